// "Run now" (issue 46): a trigger is the record `<name>@trigger` held by "triggered by …", which
// executors that poll for triggers (`triggers: { poll }`) run through the task's own lock, on one
// replica only, on the real PostgreSQL with its run ledger.
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { triggerHolder, triggerOf, triggerRecordName } from '../../src/core/trigger.ts'
import { parseOwedRecordName, parseSlotRecordName } from '../../src/core/slots.ts'
import { createLockingTaskExecutor, inMemoryLockProvider, LockConfigurationError } from '../../src/index.ts'
import {
  postgresLockInspector,
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../src/providers/postgres/index.ts'
import { takeTrigger, waitForPickUp } from '../../src/status/trigger-control.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { waitFor } from '../helpers/processes.ts'
import { postgresPoolOrSkip } from '../helpers/sql-pools.ts'

describe('trigger records', () => {
  it('never read as slot or owed records, and their holder says who triggered', () => {
    expect(triggerRecordName('nightly')).toBe('nightly@trigger')
    expect(parseSlotRecordName('nightly@trigger')).toBeUndefined()
    expect(parseOwedRecordName('nightly@trigger')).toBeUndefined()
    const record = { name: 'nightly@trigger', lockUntil: undefined, lockedAt: undefined, remainingMs: undefined }
    expect(triggerOf({ ...record, held: true, lockedBy: `${triggerHolder('alice@ops')}:42:0123456789ab` })).toBe(
      'alice@ops',
    )
    expect(triggerOf({ ...record, held: false, lockedBy: triggerHolder('alice') })).toBeUndefined()
    expect(triggerOf({ ...record, held: true, lockedBy: 'web-1:42:0123456789ab' })).toBeUndefined()
    expect(triggerHolder('x'.repeat(300))).toHaveLength(200)
  })

  it('an executor refuses a poll that is not a positive duration, or a provider without an inspector', () => {
    expect(() => createLockingTaskExecutor(inMemoryLockProvider(), { triggers: { poll: 0 } })).toThrow(
      LockConfigurationError,
    )
    const blind = { lock: inMemoryLockProvider().lock }
    expect(() => createLockingTaskExecutor(blind, { triggers: { poll: '10s' } })).toThrow(
      /triggers need a provider with an inspector\(\)/,
    )
  })
})

const pool = await postgresPoolOrSkip(8)

describe.skipIf(!pool)('triggers on PostgreSQL', () => {
  const db = pool!
  const table = uniqueTable('shedlock_trigger')
  const runs = `${table}_runs`
  const inspector = postgresLockInspector({ client: db, tableName: table })
  const ledger = postgresRunLedger({ client: db, tableName: runs })
  const target = {
    inspector,
    provider: (lockedBy: string) => postgresLockProvider({ client: db, tableName: table, lockedBy }),
  }
  let ready: Promise<unknown> | undefined
  const setUp = () =>
    (ready ??= db
      .query(postgresSchema({ tableName: table }))
      .then(() => db.query(postgresRunsSchema({ tableName: runs }))))
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.query(`DROP TABLE IF EXISTS ${runs}`)
    await db.end()
  })

  /** `count` replicas over the store, polling every 100 ms. */
  function replicas(count: number) {
    return Array.from({ length: count }, (_, k) =>
      createLockingTaskExecutor(postgresLockProvider({ client: db, tableName: table, lockedBy: `replica-${k}` }), {
        runLedger: ledger,
        recordRunningAfter: 0,
        triggers: { poll: 100 },
      }),
    )
  }

  it('3 replicas that ran the task: exactly one runs it once per trigger, recorded as triggered by its operator', async () => {
    await setUp()
    const name = `trigger-once-${randomUUID().slice(0, 8)}`
    const executors = replicas(3)
    let ran = 0
    const task = () => void ran++
    for (const executor of executors) await executor.executeWithLock(task, { name, lockAtMostFor: '10s' })
    expect(ran).toBe(3)

    const taken = await takeTrigger(target, name, triggerHolder('alice@ops'))
    expect(taken).toMatchObject({ result: 'triggered', by: 'alice@ops' })
    expect(await takeTrigger(target, name, triggerHolder('bob'))).toMatchObject({
      result: 'already-triggered',
      by: 'alice@ops',
    })
    expect(await waitForPickUp(target, taken.record!, 5_000)).toBeDefined()
    expect(await waitFor(() => ran === 4, 2_000)).toBe(true)
    // Every replica had at least two more polls to find it again.
    await sleep(400)
    expect(ran).toBe(4)
    const history = await ledger.history(name)
    expect(history).toHaveLength(4)
    expect(history[0]).toMatchObject({ outcome: 'ok', triggeredBy: 'alice@ops', slot: undefined })
    expect(history.slice(1).map((run) => run.triggeredBy)).toEqual([undefined, undefined, undefined])
    expect(triggerOf(await inspector.get(triggerRecordName(name)))).toBeUndefined()
    await Promise.all(executors.map((executor) => executor.close()))
  })

  it('never beside a run that holds the lock: the trigger waits for it, then runs once', async () => {
    await setUp()
    const name = `trigger-wait-${randomUUID().slice(0, 8)}`
    const executors = replicas(2)
    let running = 0
    let overlapped = false
    let long = false
    const starts: number[] = []
    // The same task on both replicas: whichever picks the trigger up runs it.
    const task = async () => {
      if (++running > 1) overlapped = true
      starts.push(Date.now())
      const ms = long ? 1_500 : 10
      long = false
      await sleep(ms)
      running--
    }
    await executors[1]!.executeWithLock(task, { name, lockAtMostFor: '10s' })
    long = true
    const run = executors[0]!.executeWithLock(task, { name, lockAtMostFor: '10s' })
    await sleep(100)
    const taken = await takeTrigger(target, name, triggerHolder('carol'))
    await sleep(600)
    expect(starts).toHaveLength(2)
    expect((await inspector.get(triggerRecordName(name)))?.held).toBe(true)
    expect(await run).toEqual({ executed: true, result: undefined })
    expect(await waitForPickUp(target, taken.record!, 3_000)).toBeDefined()
    expect(await waitFor(() => starts.length === 3, 2_000)).toBe(true)
    expect(starts[2]! - starts[1]!).toBeGreaterThanOrEqual(1_500)
    expect(overlapped).toBe(false)
    expect((await ledger.history(name))[0]).toMatchObject({ outcome: 'ok', triggeredBy: 'carol' })
    await Promise.all(executors.map((executor) => executor.close()))
  })

  it("a triggered run holds the task's lock without its lockAtLeastFor: the next scheduled fire is not skipped", async () => {
    await setUp()
    const name = `trigger-least-${randomUUID().slice(0, 8)}`
    const executors = replicas(3)
    let ran = 0
    const request = { name, lockAtMostFor: '2m', lockAtLeastFor: '1m' } as const
    for (const executor of executors) await executor.executeWithLock(() => void ran++, request)
    // The scheduled run's lockAtLeastFor would hold the lock for a minute: freed by hand here.
    expect(await inspector.release(name)).toBe(true)
    const taken = await takeTrigger(target, name, triggerHolder('erin'))
    expect(await waitForPickUp(target, taken.record!, 5_000)).toBeDefined()
    expect(await waitFor(() => ran === 2, 2_000)).toBe(true)
    await sleep(400) // the other replicas' polls: they may take the lock, find the trigger gone, free it
    expect((await inspector.get(name))?.held).toBe(false)
    expect(await executors[0]!.executeWithLock(() => void ran++, request)).toEqual({
      executed: true,
      result: undefined,
    })
    await Promise.all(executors.map((executor) => executor.close()))
  })

  it('a task no executor ran is not polled; a closed executor polls no more', async () => {
    await setUp()
    const name = `trigger-none-${randomUUID().slice(0, 8)}`
    const [executor] = replicas(1)
    await executor!.close()
    const taken = await takeTrigger(target, name, triggerHolder('dave'))
    expect(await waitForPickUp(target, taken.record!, 400)).toBeUndefined()
    expect(await inspector.release(taken.record!)).toBe(true)
  })
})

describe('a poll that fails', () => {
  it('never throws: the store error goes to the debug log and the next poll tries again', async () => {
    const provider = inMemoryLockProvider()
    let reads = 0
    const failing = Object.assign(Object.create(provider), {
      inspector: () => ({
        ...provider.inspector(),
        get: async () => {
          reads++
          throw new Error('store down')
        },
      }),
    })
    const executor = createLockingTaskExecutor(failing, { triggers: { poll: 20 } })
    await executor.executeWithLock(() => 1, { name: 'flaky', lockAtMostFor: '1s' })
    await sleep(120)
    expect(reads).toBeGreaterThanOrEqual(2)
    await executor.close()
  })
})
