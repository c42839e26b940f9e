import cron, { type RunCoordinator, type TaskContext } from 'node-cron'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { stateOf } from '../../src/status/verdict.ts'
import { LockConfigurationError } from '../../src/core/errors.ts'
import { assertLocked } from '../../src/core/lock-context.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { slotRecordName } from '../../src/core/slots.ts'
import {
  type LockingRunCoordinator,
  lockingRunCoordinator,
  lockingTaskOptions,
} from '../../src/integrations/node-cron.ts'
import { taskContext } from '../../src/integrations/task-context.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/run-ledger.ts'
import {
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../src/providers/postgres/index.ts'
import { cli } from '../cli/support/cli.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { deferred, manualClock } from '../helpers/fakes.ts'
import { listingStore } from '../helpers/listing-store.ts'

const T0 = Date.UTC(2026, 10, 24, 2, 0, 0)
const iso = (ms: number): string => new Date(ms).toISOString()
const keyOf = (ms: number, task = 'report') => `${task}:${iso(ms)}`

// The coordinator is node-cron's own type.
const asNodeCron = (c: LockingRunCoordinator): RunCoordinator => c
void asNodeCron

const quiet = { info() {}, warn() {}, error() {}, debug() {} }
const destroy: Array<() => unknown> = []
afterEach(async () => {
  for (const fn of destroy.splice(0)) await fn()
})

describe('lockingRunCoordinator with slot: true', () => {
  it("the fire time in node-cron's key is the slot: a late node's fire of the same slot is not elected, even after the lock was released", async () => {
    const provider = inMemoryLockProvider()
    const options = { name: 'report', lockAtMostFor: '1m', lockAtLeastFor: 0, slot: true } as const
    const [a, b] = [lockingRunCoordinator(provider, options), lockingRunCoordinator(provider, options)]
    await expect(a.shouldRun(keyOf(T0), 30_000)).resolves.toBe(true)
    await a.onComplete(keyOf(T0))
    expect(provider.inspect(slotRecordName('report', new Date(T0)))).toBeDefined()
    await expect(b.shouldRun(keyOf(T0), 30_000)).resolves.toBe(false)
    // The next fire runs, on whichever node asks first; a task name with colons is fine.
    await expect(b.shouldRun(keyOf(T0 + 60_000, 'a:b'), 30_000)).resolves.toBe(true)
    await b.onComplete(keyOf(T0 + 60_000, 'a:b'))
    // Without slot, the late node runs the fire again once the lock is free.
    const plain = lockingRunCoordinator(provider, { ...options, slot: false })
    await expect(plain.shouldRun(keyOf(T0), 30_000)).resolves.toBe(true)
  })

  it('a key without a fire time rejects with LockConfigurationError: node-cron skips the fire (coordinator-error)', async () => {
    const coordinator = lockingRunCoordinator(inMemoryLockProvider(), {
      name: 'report',
      lockAtMostFor: '1m',
      slot: true,
    })
    await expect(coordinator.shouldRun('report', 30_000)).rejects.toThrow(LockConfigurationError)
    await expect(coordinator.shouldRun('report:yesterday', 30_000)).rejects.toThrow(/<task name>:<fire time>/)
  })

  it('real node-cron, two nodes, one of them asking 300 ms late: each fire runs once', async () => {
    const provider = inMemoryLockProvider()
    const runs: string[] = []
    const skipped: string[] = []
    const options = { name: 'every-second', lockAtMostFor: '10s', lockAtLeastFor: 0, slot: true } as const
    const a = lockingTaskOptions(provider, options)
    const late = lockingRunCoordinator(provider, options)
    const b: RunCoordinator = {
      shouldRun: async (key, ttl) => {
        await sleep(300)
        return late.shouldRun(key, ttl)
      },
      onComplete: (key) => late.onComplete(key),
    }
    const record = (node: string) => (context: TaskContext) => void runs.push(`${node} ${context.date.toISOString()}`)
    const tasks = [
      cron.schedule('* * * * * *', record('a'), a),
      cron.schedule('* * * * * *', record('b'), { name: 'every-second', distributed: true, runCoordinator: b }),
    ]
    for (const task of tasks)
      task.on(
        'execution:skipped',
        (context) => void skipped.push(`${String(context.reason)} ${context.date.toISOString()}`),
      )
    destroy.push(() => {
      for (const task of tasks) task.destroy()
    })
    await sleep(2_700)
    for (const task of tasks) await task.destroy()
    await sleep(400)
    expect(runs.length).toBeGreaterThanOrEqual(2)
    expect(runs.every((run) => run.startsWith('a '))).toBe(true)
    expect(skipped.filter((s) => s.startsWith('not-elected')).length).toBeGreaterThanOrEqual(runs.length - 1)
  })

  it('lockingTaskOptions passes slot, slotRetention and catchUp through to its coordinator', async () => {
    const clock = manualClock(T0)
    const provider = inMemoryLockProvider({ clock })
    const options = lockingTaskOptions(createLockingTaskExecutor(provider, { clock }), {
      name: 'report',
      lockAtMostFor: '1m',
      slot: true,
      slotRetention: '2h',
    })
    await expect(options.runCoordinator.shouldRun(keyOf(T0), 60_000)).resolves.toBe(true)
    await options.runCoordinator.onComplete(keyOf(T0))
    expect(provider.inspect(slotRecordName('report', new Date(T0)))!.lockUntil.getTime()).toBe(T0 + 2 * 3_600_000)
    expect(typeof options.runCoordinator.catchUp).toBe('function')
    expect(() =>
      lockingTaskOptions(provider, { name: 'report', lockAtMostFor: '1m', catchUp: { policy: 'all', within: '1h' } }),
    ).toThrow(/catchUp needs slot/)
    expect(() =>
      lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m', slot: 'yes' as unknown as boolean }),
    ).toThrow(/slot must be true or false/)
  })
})

describe('lockingRunCoordinator catchUp(task)', () => {
  async function setUp(policy: 'once' | 'all') {
    const clock = manualClock(T0)
    const { provider } = listingStore(clock)
    const ledger = inMemoryRunLedger()
    const coordinator = lockingRunCoordinator(createLockingTaskExecutor(provider, { clock, runLedger: ledger }), {
      name: 'report',
      lockAtMostFor: '1m',
      slot: true,
      catchUp: { policy, within: '1h' },
    })
    // The task ran at T0; then every node was down for five fire times.
    await coordinator.shouldRun(keyOf(T0), 60_000)
    await coordinator.onComplete(keyOf(T0))
    clock.set(T0 + 5 * 60_000 + 30_000)
    const ran: string[] = []
    const task = cron.createTask(
      '* * * * *',
      (context) => {
        assertLocked()
        ran.push(`${taskContext().slot!.toISOString()} ${context.execution?.reason}`)
      },
      { name: 'report', timezone: 'UTC' },
    )
    destroy.push(() => task.destroy())
    return { coordinator, task, ran, ledger }
  }

  it("policy 'all': task.execute() for each missed fire time (node-cron's match()), under the lock, oldest first", async () => {
    const { coordinator, task, ran } = await setUp('all')
    const result = await coordinator.catchUp(task)
    expect(result.outcome).toBe('ran')
    expect(ran).toEqual([1, 2, 3, 4, 5].map((m) => `${iso(T0 + m * 60_000)} invoked`))
    expect((await coordinator.catchUp(task)).outcome).toBe('nothing-missed')
  })

  it("policy 'once': the latest missed fire time only", async () => {
    const { coordinator, task, ran, ledger } = await setUp('once')
    await coordinator.catchUp(task)
    expect(ran).toEqual([`${iso(T0 + 5 * 60_000)} invoked`])
    // Oldest slot first: the folded slots are recorded once the catch-up's lock is released.
    const bySlot = (await ledger.history('report')).sort((a, b) => a.slot!.getTime() - b.slot!.getTime())
    expect(bySlot.map((r) => r.outcome)).toEqual(['ok', 'skipped', 'skipped', 'skipped', 'skipped', 'ok'])
  })

  it('a failing run is in failed; without the catchUp option, or once closed, nothing runs; a non-task is refused', async () => {
    const { coordinator } = await setUp('all')
    const failing = cron.createTask(
      '* * * * *',
      () => {
        throw new Error('boom')
      },
      { timezone: 'UTC', logger: quiet },
    )
    destroy.push(() => failing.destroy())
    const result = await coordinator.catchUp(failing)
    expect(result.failed.map((f) => (f.error as Error).message)).toEqual(['boom', 'boom', 'boom', 'boom', 'boom'])
    const plain = lockingRunCoordinator(listingStore().provider, { name: 'x', lockAtMostFor: '1m', slot: true })
    await expect(plain.catchUp(failing)).resolves.toMatchObject({ outcome: 'skipped' })
    await expect(plain.catchUp({} as never)).rejects.toThrow(/ScheduledTask/)
    await coordinator.close()
    await expect(coordinator.catchUp(failing)).resolves.toMatchObject({ outcome: 'skipped' })
  })
})

describe('lockingRunCoordinator close()', () => {
  it('closes its executor: a fire in progress keeps its lock until it completes, then it is released; later fires are not elected', async () => {
    const provider = inMemoryLockProvider()
    const coordinator = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    await expect(coordinator.shouldRun(keyOf(T0), 60_000)).resolves.toBe(true)
    const closed = deferred<string>()
    void coordinator.close({ timeout: '5s' }).then(() => closed.resolve('closed'))
    await sleep(20)
    expect(provider.inspect('report')!.lockUntil.getTime()).toBeGreaterThan(Date.now())
    await coordinator.onComplete(keyOf(T0))
    await expect(closed.promise).resolves.toBe('closed')
    expect(provider.inspect('report')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
    await expect(coordinator.shouldRun(keyOf(T0 + 60_000), 60_000)).resolves.toBe(false)
  })
})

const pool = await postgresPoolOrSkip(4)

describe.skipIf(!pool)('lockingTaskOptions with slot: true and a PostgreSQL run ledger', () => {
  const locks = uniqueTable('shedlock_cron_fail_locks')
  const runs = uniqueTable('shedlock_cron_fail_runs')
  afterAll(async () => {
    await pool!.query(`DROP TABLE IF EXISTS ${locks}`)
    await pool!.query(`DROP TABLE IF EXISTS ${runs}`)
    await pool!.end()
  })

  it("real node-cron, without watch(): the coordinator finds the task in node-cron's registry, and a fire that throws is recorded failed", async () => {
    const db = pool!
    await db.query(postgresSchema({ tableName: locks }))
    await db.query(postgresRunsSchema({ tableName: `${runs}_auto` }))
    const runLedger = postgresRunLedger({ client: db, tableName: `${runs}_auto` })
    const executor = createLockingTaskExecutor(postgresLockProvider({ client: db, tableName: locks }), { runLedger })
    const options = lockingTaskOptions(executor, { name: 'unwatched-report', lockAtMostFor: '10s', slot: true })
    const task = cron.schedule(
      '* * * * * *',
      () => {
        throw new RangeError('no report today')
      },
      { ...options, name: 'unwatched-report', logger: quiet },
    )
    destroy.push(() => task.destroy())
    const deadline = Date.now() + 5_000
    while (
      Date.now() < deadline &&
      (await runLedger.history('unwatched-report')).filter((r) => r.finishedAt).length < 2
    )
      await sleep(100)
    await task.destroy()
    await options.runCoordinator.close({ timeout: '5s' })
    destroy.push(() => db.query(`DROP TABLE IF EXISTS ${runs}_auto`))
    const finished = (await runLedger.history('unwatched-report')).filter((r) => r.outcome !== 'running')
    expect(finished.length).toBeGreaterThanOrEqual(2)
    for (const run of finished) expect(run.error).toEqual({ type: 'RangeError', message: 'no report today' })
    expect(finished.map((r) => r.outcome)).toEqual(finished.map(() => 'failed'))
  })

  it('real node-cron: a fire that throws is recorded failed, with its error redacted, and status --stale flags the task', async () => {
    const db = pool!
    await db.query(postgresSchema({ tableName: locks }))
    await db.query(postgresRunsSchema({ tableName: runs }))
    const runLedger = postgresRunLedger({ client: db, tableName: runs })
    const executor = createLockingTaskExecutor(postgresLockProvider({ client: db, tableName: locks }), { runLedger })
    const options = lockingTaskOptions(executor, { name: 'failing-report', lockAtMostFor: '10s', slot: true })
    const failures: string[] = []
    const task = cron.schedule(
      '* * * * * *',
      () => {
        throw new TypeError('cannot reach postgres://report:hunter2@db.internal/reports\nsecond line')
      },
      { ...options, logger: quiet },
    )
    destroy.push(() => task.destroy())
    task.on('execution:failed', () => void failures.push('failed'))
    options.runCoordinator.watch(task)
    options.runCoordinator.watch(task) // twice is once
    const deadline = Date.now() + 5_000
    while (Date.now() < deadline && (await runLedger.history('failing-report')).filter((r) => r.finishedAt).length < 2)
      await sleep(100)
    await task.destroy()
    await options.runCoordinator.close({ timeout: '5s' })

    const finished = (await runLedger.history('failing-report')).filter((r) => r.outcome !== 'running')
    expect(finished.length).toBeGreaterThanOrEqual(2)
    expect(failures.length).toBeGreaterThanOrEqual(finished.length)
    for (const run of finished) {
      expect(run.outcome).toBe('failed')
      expect(run.slot).toBeInstanceOf(Date)
      expect(run.error).toEqual({
        type: 'TypeError',
        message: 'cannot reach postgres://report:***@db.internal/reports',
      })
    }
    const health = await runLedger.health('failing-report')
    expect(health.lastSuccess).toBeUndefined()
    expect(health.consecutiveFailures).toBe(finished.length)
    expect(stateOf(health, 3_600_000, Date.now())).toBe('stale')

    const status = await cli([
      'status',
      '--url',
      POSTGRES_URL,
      '--table',
      locks,
      '--runs-table',
      runs,
      '--stale',
      'failing-report=1h',
      '--json',
    ])
    expect(status.code, status.stderr).toBe(1)
    expect(JSON.parse(status.stdout).tasks).toMatchObject([
      { name: 'failing-report', state: 'stale', lastSuccess: null },
    ])
  })

  it('watch() refuses what is not a node-cron task', () => {
    const coordinator = lockingRunCoordinator(inMemoryLockProvider(), { name: 'x', lockAtMostFor: '1m' })
    expect(() => coordinator.watch({} as never)).toThrow(/watch\(\) needs the node-cron ScheduledTask/)
  })
})
