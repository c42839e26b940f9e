import { CronJob } from 'cron'
import { Cron } from 'croner'
import cron from 'node-cron'
import schedule from 'node-schedule'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ExecutorClosedError, LockConfigurationError, NotLockedError } from '../../src/core/errors.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { assertLocked } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import {
  createLockingTaskExecutor,
  type LockingTaskExecutor,
  type SkipReason,
} from '../../src/core/locking-task-executor.ts'
import { slotRecordName } from '../../src/core/slots.ts'
import { intervalSlot } from '../../src/integrations/schedules.ts'
import { taskContext } from '../../src/integrations/task-context.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/run-ledger.ts'
import { deferred, manualClock } from '../helpers/fakes.ts'
import { listingStore } from '../helpers/listing-store.ts'

const stop: Array<() => unknown> = []
afterEach(async () => {
  for (const fn of stop.splice(0)) await fn()
  vi.useRealTimers()
})

/** An executor whose listener records why calls were skipped. */
function node(
  provider: LockProvider,
  skipped: SkipReason[] = [],
  options: { clock?: { now(): number } } = {},
): LockingTaskExecutor {
  return createLockingTaskExecutor(provider, {
    ...options,
    listener: {
      onLockNotAcquired: () => void skipped.push('held'),
      onSlotDone: () => void skipped.push('slot-done'),
    },
  })
}

describe('withLock with slot: two nodes firing the same slot run it once', () => {
  // Real schedulers, every second, two "nodes" (executors over one store). Node B calls its
  // locked function 300 ms after the fire, when node A's run is over and its lock released
  // (lockAtLeastFor 0): only the slot record keeps B from running the same fire again.
  const LATE_MS = 300

  async function runTwoNodes(
    start: (a: (...args: never[]) => unknown, b: (...args: never[]) => unknown) => void,
    slot: boolean,
  ) {
    const provider = inMemoryLockProvider()
    const runs: Array<{ node: string; slot: number | undefined }> = []
    const skipped: SkipReason[] = []
    const options = { name: 'two-nodes', lockAtMostFor: '10s' as const, ...(slot ? { slot: true as const } : {}) }
    const task = (name: string) => () => void runs.push({ node: name, slot: taskContext().slot?.getTime() })
    const a = withLock(node(provider, skipped), options, task('a'))
    const b = withLock(node(provider, skipped), options, task('b'))
    start(a as (...args: never[]) => unknown, b as (...args: never[]) => unknown)
    await sleep(2_600)
    for (const fn of stop.splice(0)) await fn()
    await sleep(LATE_MS + 100)
    return { runs, skipped }
  }

  it.each<[string, (a: (...args: never[]) => unknown, b: (...args: never[]) => unknown) => void]>([
    [
      'croner',
      (a, b) => {
        const jobs = [
          new Cron('* * * * * *', (job: Cron) => void a(job as never)),
          new Cron('* * * * * *', (job: Cron) => void setTimeout(() => b(job as never), LATE_MS)),
        ]
        stop.push(() => {
          for (const job of jobs) job.stop()
        })
      },
    ],
    [
      'cron',
      (a, b) => {
        const jobs = [
          CronJob.from({ cronTime: '* * * * * *', onTick: a as () => void, start: true }),
          CronJob.from({
            cronTime: '* * * * * *',
            onTick: function (this: CronJob) {
              setTimeout(() => (b as (this: CronJob) => void).call(this), LATE_MS)
            },
            start: true,
          }),
        ]
        stop.push(() => {
          for (const job of jobs) job.stop()
        })
      },
    ],
    [
      'node-schedule',
      (a, b) => {
        const jobs = [
          schedule.scheduleJob('* * * * * *', (date: Date) => void a(date as never)),
          schedule.scheduleJob('* * * * * *', (date: Date) => void setTimeout(() => b(date as never), LATE_MS)),
        ]
        stop.push(() => {
          for (const job of jobs) job.cancel()
        })
      },
    ],
    [
      'node-cron',
      (a, b) => {
        const tasks = [
          cron.schedule('* * * * * *', (context) => a(context as never)),
          cron.schedule('* * * * * *', (context) => void setTimeout(() => b(context as never), LATE_MS)),
        ]
        stop.push(() => {
          for (const task of tasks) task.destroy()
        })
      },
    ],
  ])('%s', async (_, start) => {
    const withSlots = await runTwoNodes(start, true)
    expect(withSlots.runs.length).toBeGreaterThanOrEqual(2)
    const slots = withSlots.runs.map((run) => run.slot!)
    expect(new Set(slots).size).toBe(slots.length)
    for (const slot of slots) expect(slot % 1000).toBe(0)
    expect(withSlots.runs.every((run) => run.node === 'a')).toBe(true)
    expect(withSlots.skipped.filter((reason) => reason === 'slot-done').length).toBeGreaterThanOrEqual(slots.length - 1)
    // The same without slots: the late node runs every fire a second time.
    const withoutSlots = await runTwoNodes(start, false)
    expect(withoutSlots.runs.filter((run) => run.node === 'b').length).toBeGreaterThanOrEqual(1)
  })
})

describe('withLock slot option', () => {
  it('a slot function (intervalSlot for setInterval): one run per interval across nodes', async () => {
    const clock = manualClock(Date.UTC(2026, 10, 24, 2, 0, 10))
    const provider = inMemoryLockProvider({ clock })
    const ran: string[] = []
    const make = (name: string) =>
      withLock(
        node(provider, [], { clock }),
        { name: 'sync', lockAtMostFor: '1m', slot: intervalSlot('5m', clock) },
        () => {
          ran.push(`${name} ${taskContext().slot!.toISOString()}`)
        },
      )
    const [a, b] = [make('a'), make('b')]
    await a()
    clock.advance(90_000) // b's timer, started at another time, ticks within the same interval
    await b()
    clock.advance(4 * 60_000)
    await b()
    await a()
    expect(ran).toEqual(['a 2026-11-24T02:00:00.000Z', 'b 2026-11-24T02:05:00.000Z'])
  })

  it('a slot function that throws or returns no valid Date rejects with LockConfigurationError (or goes to onError); the task does not run', async () => {
    const fn = vi.fn()
    const provider = inMemoryLockProvider()
    await expect(withLock(provider, { name: 'n', lockAtMostFor: '1m', slot: () => undefined }, fn)()).rejects.toThrow(
      /the slot function returned undefined/,
    )
    await expect(
      withLock(provider, { name: 'n', lockAtMostFor: '1m', slot: () => new Date(Number.NaN) }, fn)(),
    ).rejects.toThrow(/Invalid Date/)
    await expect(
      withLock(
        provider,
        {
          name: 'n',
          lockAtMostFor: '1m',
          slot: () => {
            throw new Error('boom')
          },
        },
        fn,
      )(),
    ).rejects.toThrow(/the slot function threw: boom/)
    const errors: unknown[] = []
    await expect(
      withLock(provider, { name: 'n', lockAtMostFor: '1m', slot: true, onError: (error) => errors.push(error) }, fn)(),
    ).resolves.toBeUndefined()
    expect(errors[0]).toBeInstanceOf(LockConfigurationError)
    expect(fn).not.toHaveBeenCalled()
  })

  it('slot: true with a call by hand rejects: a call never runs without its slot', async () => {
    const fn = vi.fn()
    await expect(
      withLock(inMemoryLockProvider(), { name: 'n', lockAtMostFor: '1m', slot: true }, fn)(),
    ).rejects.toThrow(LockConfigurationError)
    expect(fn).not.toHaveBeenCalled()
  })

  it('passes slotRetention: the slot record is kept that long', async () => {
    const clock = manualClock(Date.UTC(2026, 10, 24, 2, 0, 0))
    const provider = inMemoryLockProvider({ clock })
    const slot = new Date(clock.now())
    await withLock(
      node(provider, [], { clock }),
      { name: 'kept', lockAtMostFor: '1m', slot: () => slot, slotRetention: '2h' },
      () => {},
    )()
    expect(provider.inspect(slotRecordName('kept', slot))!.lockUntil.getTime()).toBe(clock.now() + 2 * 3_600_000)
  })

  it('refuses bad slot options where withLock is called', () => {
    const provider = inMemoryLockProvider()
    const fn = () => {}
    expect(() => withLock(provider, { name: 'n', lockAtMostFor: '1m', slot: 'yes' as unknown as true }, fn)).toThrow(
      /slot must be true/,
    )
    expect(() => withLock(provider, { name: 'n', lockAtMostFor: '1m', slotRetention: '1h' }, fn)).toThrow(
      /slotRetention is set without slot/,
    )
    expect(() =>
      withLock(provider, { name: 'n', lockAtMostFor: '1m', catchUp: { policy: 'all', within: '1h' } }, fn),
    ).toThrow(/catchUp needs slot/)
    expect(() =>
      withLock(
        provider,
        { name: 'n', lockAtMostFor: '1m', slot: true, catchUp: { policy: 'each' as 'all', within: '1h' } },
        fn,
      ),
    ).toThrow(/policy must be/)
    expect(() =>
      withLock(
        provider,
        { name: 'n', lockAtMostFor: '1m', slot: true, slotRetention: '1h', catchUp: { policy: 'all', within: '2h' } },
        fn,
      ),
    ).toThrow(/longer than slotRetention/)
    expect(() =>
      withLock(
        provider,
        { name: () => 'n', lockAtMostFor: '1m', slot: true, catchUp: { policy: 'all', within: '1h' } },
        fn,
      ),
    ).toThrow(/fixed lock name/)
    expect(() => withLock(provider, { name: 'n', lockAtMostFor: '1m', signal: {} as AbortSignal }, fn)).toThrow(
      /signal must be an AbortSignal/,
    )
  })
})

describe("withLock's catchUp(schedule): the slots every node missed, with the scheduler's fire times", () => {
  const MINUTE = 60_000
  const T0 = Date.UTC(2026, 10, 24, 2, 0, 0)
  const minute = (m: number): string => new Date(T0 + m * MINUTE).toISOString()

  /** A task that ran at slot 0; then every node was down for five fire times (1..5). */
  async function setUp(policy: 'once' | 'all') {
    const clock = manualClock(T0)
    const { provider } = listingStore(clock)
    const ledger = inMemoryRunLedger()
    const ran: string[] = []
    const make = () =>
      withLock(
        createLockingTaskExecutor(provider, { clock, runLedger: ledger }),
        { name: 'report', lockAtMostFor: '1m', slot: true, catchUp: { policy, within: '1h' } },
        function (this: unknown, ...args: unknown[]) {
          assertLocked()
          ran.push(`${taskContext().slot!.toISOString()} ${args.length} ${String(this)}`)
        },
      )
    await make()(new Date(T0))
    ran.length = 0
    clock.set(T0 + 5 * MINUTE + 30_000)
    return { make, ran, ledger }
  }

  it.each<[string, () => unknown]>([
    ['croner Cron', () => new Cron('0 * * * * *', { paused: true, timezone: 'UTC' })],
    ['cron CronJob', () => CronJob.from({ cronTime: '0 * * * * *', onTick: () => {}, timeZone: 'UTC' })],
    ['node-cron ScheduledTask', () => cron.createTask('* * * * *', () => {}, { timezone: 'UTC' })],
    [
      'node-schedule, through a function',
      () => (from: Date, to: Date) => {
        const rule = new schedule.RecurrenceRule(
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
          0,
          'UTC',
        )
        const out: Date[] = []
        for (
          let next = rule.nextInvocationDate(new Date(from.getTime() - 1));
          next && next <= to;
          next = rule.nextInvocationDate(next)
        )
          out.push(next)
        return out
      },
    ],
  ])(
    "policy 'all' with %s: each missed slot once, oldest first, called without arguments; a second catch-up finds nothing",
    async (_, make) => {
      const { make: locked, ran } = await setUp('all')
      const fn = locked()
      const result = await fn.catchUp(make() as Parameters<typeof fn.catchUp>[0])
      expect(result).toMatchObject({
        outcome: 'ran',
        missed: [1, 2, 3, 4, 5].map((m) => new Date(minute(m))),
        failed: [],
      })
      expect(ran).toEqual([1, 2, 3, 4, 5].map((m) => `${minute(m)} 0 undefined`))
      expect((await locked().catchUp(make() as Parameters<typeof fn.catchUp>[0])).outcome).toBe('nothing-missed')
    },
  )

  it("policy 'once': one run, for the latest missed slot; the others are recorded as skipped", async () => {
    const { make, ran, ledger } = await setUp('once')
    const result = await make().catchUp(new Cron('0 * * * * *', { paused: true, timezone: 'UTC' }))
    expect(result.ran).toEqual([new Date(minute(5))])
    expect(ran).toEqual([`${minute(5)} 0 undefined`])
    // Oldest slot first: the folded slots are recorded once the catch-up's lock is released.
    const bySlot = (await ledger.history('report')).sort((a, b) => a.slot!.getTime() - b.slot!.getTime())
    expect(bySlot.map((r) => r.outcome)).toEqual(['ok', 'skipped', 'skipped', 'skipped', 'skipped', 'ok'])
  })

  it('without the catchUp option it does nothing; a schedule of another kind is refused', async () => {
    const fn = withLock(listingStore().provider, { name: 'n', lockAtMostFor: '1m', slot: true }, () => {})
    await expect(fn.catchUp(new Cron('* * * * *', { paused: true }))).resolves.toEqual({
      outcome: 'skipped',
      missed: [],
      ran: [],
      failed: [],
      notRun: [],
    })
    await expect(fn.catchUp({} as Cron)).rejects.toThrow(LockConfigurationError)
  })
})

describe('shutdown', () => {
  it('close() aborts the running task (ExecutorClosedError), releases its lock, and the call resolves to undefined; later calls do not run', async () => {
    const provider = inMemoryLockProvider()
    const started = deferred()
    let reason: unknown
    const fn = withLock(provider, { name: 'long', lockAtMostFor: '1m', lockAtLeastFor: 0 }, async () => {
      const { signal } = taskContext()
      started.resolve()
      await new Promise((_, reject) =>
        signal.addEventListener('abort', () => {
          reason = signal.reason
          reject(reason)
        }),
      )
    })
    const call = fn()
    await started.promise
    expect(provider.inspect('long')!.lockUntil.getTime()).toBeGreaterThan(Date.now())
    await fn.close({ timeout: '5s' })
    expect(reason).toBeInstanceOf(ExecutorClosedError)
    await expect(call).resolves.toBeUndefined()
    expect(provider.inspect('long')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
    // Another node can take the lock at once; this function, closed, runs nothing more.
    await expect(
      withLock(createLockingTaskExecutor(provider), { name: 'long', lockAtMostFor: '1m' }, () => 'elsewhere')(),
    ).resolves.toBe('elsewhere')
    let ranAgain = false
    const closedFn = withLock(provider, { name: 'other', lockAtMostFor: '1m' }, () => (ranAgain = true))
    await closedFn.close()
    await expect(closedFn()).resolves.toBeUndefined()
    await expect(fn()).resolves.toBeUndefined()
    expect(ranAgain).toBe(false)
  })

  it('close() closes the executor that was passed in: its other users stop too', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const a = withLock(executor, { name: 'a', lockAtMostFor: '1m' }, () => 'a')
    const b = withLock(executor, { name: 'b', lockAtMostFor: '1m' }, () => 'b')
    await a.close()
    expect(executor.closed).toBe(true)
    await expect(b()).resolves.toBeUndefined()
  })

  it("withLock's signal: once aborted, the running task's signal aborts with its reason, the call resolves to undefined, the lock is released, new calls and catch-ups skip", async () => {
    const { provider } = listingStore()
    const controller = new AbortController()
    const started = deferred()
    const runs: string[] = []
    const fn = withLock(
      provider,
      {
        name: 'sig',
        lockAtMostFor: '1m',
        slot: () => new Date(Date.UTC(2026, 0, 1)),
        catchUp: { policy: 'all', within: '1h' },
        signal: controller.signal,
      },
      async () => {
        runs.push('run')
        const { signal } = taskContext()
        started.resolve()
        await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
      },
    )
    const call = fn()
    await started.promise
    controller.abort(new Error('SIGTERM'))
    await expect(call).resolves.toBeUndefined()
    expect(await provider.lock(lockConfiguration({ name: 'sig', lockAtMostFor: '1m' }))).toBeDefined()
    await expect(fn()).resolves.toBeUndefined()
    await expect(fn.catchUp(() => [])).resolves.toMatchObject({ outcome: 'skipped' })
    expect(runs).toEqual(['run'])
  })

  it('a task error that is not the shutdown still rejects', async () => {
    const controller = new AbortController()
    const fn = withLock(inMemoryLockProvider(), { name: 'e', lockAtMostFor: '1m', signal: controller.signal }, () => {
      throw new Error('own')
    })
    await expect(fn()).rejects.toThrow('own')
  })
})

it('taskContext() outside a withLock function throws NotLockedError', () => {
  expect(() => taskContext()).toThrow(NotLockedError)
})

it("taskContext() inside an executeWithLock() task is the task's own context, across awaits, and a withLock function's inside it is that function's", async () => {
  const executor = createLockingTaskExecutor(inMemoryLockProvider())
  const slot = new Date('2026-11-24T02:00:00Z')
  const inner = withLock(executor, { name: 'inner', lockAtMostFor: '1m', slot: () => slot }, async () => {
    await sleep(1)
    return taskContext()
  })
  const seen: unknown[] = []
  const result = await executor.executeWithLock(
    async (context) => {
      seen.push(taskContext() === context)
      await sleep(1)
      seen.push(taskContext() === context)
      const innerContext = await inner()
      seen.push(innerContext !== context && innerContext?.configuration.name === 'inner' && innerContext.slot === slot)
      // Back in the outer task: its own context again.
      seen.push(taskContext() === context)
      return context.configuration.name
    },
    { name: 'outer', lockAtMostFor: '1m' },
  )
  expect(result).toEqual({ executed: true, result: 'outer' })
  expect(seen).toEqual([true, true, true, true])
  expect(() => taskContext()).toThrow(NotLockedError)
})

it('taskContext() inside a nested executeWithLock() of the same lock (re-entrant) is the context the nested task gets', async () => {
  const executor = createLockingTaskExecutor(inMemoryLockProvider())
  const seen: boolean[] = []
  await executor.executeWithLock(
    async (outer) => {
      await executor.executeWithLock(
        async (inner) => {
          seen.push(inner !== outer, taskContext() === inner)
          await sleep(1)
          seen.push(taskContext() === inner)
        },
        { name: 'reentrant', lockAtMostFor: '1m' },
      )
      seen.push(taskContext() === outer)
    },
    { name: 'reentrant', lockAtMostFor: '1m' },
  )
  expect(seen).toEqual([true, true, true, true])
})
