import cron, { type ScheduledTask, type TaskContext as NodeCronContext } from 'node-cron'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { NoActiveLockError } from '../../src/core/errors.ts'
import { activeFencingToken } from '../../src/core/lock-context.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { lockingRunCoordinator, lockingTaskOptions } from '../../src/integrations/node-cron.ts'
import { configureSchedulerLock, resetSchedulerLock, SchedulerLock } from '../../src/integrations/scheduler-lock.ts'
import { taskContext } from '../../src/integrations/task-context.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { manualClock } from '../helpers/fakes.ts'
import { listingStore } from '../helpers/listing-store.ts'

// The lock's fencing token inside each integration: taskContext().fencingToken (and
// activeFencingToken()) in withLock() functions and @SchedulerLock methods, the coordinator's
// fencingToken(context) for node-cron fires. The in-memory provider counts from 1 per name.

/** Both ways a locked function reads its token. */
const tokens = (): [bigint | undefined, bigint | undefined] => [taskContext().fencingToken, activeFencingToken()]

describe('withLock()', () => {
  it('the function reads its lock’s token from taskContext() and activeFencingToken(), greater at each call', async () => {
    const provider = inMemoryLockProvider()
    const fenced = withLock(provider, { name: 'sync', lockAtMostFor: '1m' }, async (label: string) => {
      await sleep(1)
      return [label, ...tokens()]
    })
    const other = withLock(provider, { name: 'other', lockAtMostFor: '1m' }, async () => tokens())
    expect(await fenced('a')).toEqual(['a', 1n, 1n])
    expect(await fenced('b')).toEqual(['b', 2n, 2n])
    expect(await other()).toEqual([1n, 1n])
  })

  it('the runs of a catch-up have the catch-up lock’s token, one greater than the last run’s', async () => {
    const clock = manualClock(T0)
    const { provider } = listingStore(clock)
    const seen: Array<[string, bigint | undefined]> = []
    const make = () =>
      withLock(
        createLockingTaskExecutor(provider, { clock }),
        { name: 'report', lockAtMostFor: '1m', slot: true, catchUp: { policy: 'all', within: '1h' } },
        (_fire?: Date) => void seen.push([taskContext().slot!.toISOString(), taskContext().fencingToken]),
      )
    await make()(new Date(T0))
    // Every node was down for three fire times.
    clock.set(T0 + 3 * MINUTE + 30_000)
    const result = await make().catchUp(cron.createTask('* * * * *', () => {}, { timezone: 'UTC' }))
    expect(result.outcome).toBe('ran')
    expect(seen).toEqual([
      [iso(T0), 1n],
      [iso(T0 + MINUTE), 2n],
      [iso(T0 + 2 * MINUTE), 2n],
      [iso(T0 + 3 * MINUTE), 2n],
    ])
  })
})

const MINUTE = 60_000
const T0 = Date.UTC(2026, 10, 24, 2, 0, 0)
const iso = (ms: number): string => new Date(ms).toISOString()

describe('@SchedulerLock', () => {
  afterEach(() => resetSchedulerLock())

  it('the method reads its lock’s token from taskContext() and activeFencingToken(), greater at each call', async () => {
    configureSchedulerLock({ provider: inMemoryLockProvider(), defaultLockAtMostFor: '1m' })
    class Reports {
      async nightly(): Promise<[bigint | undefined, bigint | undefined]> {
        await sleep(1)
        return tokens()
      }
    }
    // The decorator applied as legacy decorators do (the compiled fixtures test both modes).
    const descriptor = Object.getOwnPropertyDescriptor(Reports.prototype, 'nightly')!
    Object.defineProperty(
      Reports.prototype,
      'nightly',
      SchedulerLock({ name: 'nightly' })(Reports.prototype, 'nightly', descriptor),
    )
    const reports = new Reports()
    expect(await reports.nightly()).toEqual([1n, 1n])
    expect(await reports.nightly()).toEqual([2n, 2n])
  })
})

describe('node-cron: coordinator.fencingToken(context)', () => {
  const tasks: ScheduledTask[] = []
  afterEach(async () => {
    for (const task of tasks.splice(0)) await task.destroy()
  })

  it('gives each fire the token of the lock it runs under, greater at each fire, from the context node-cron passes', async () => {
    const provider = inMemoryLockProvider()
    const options = lockingTaskOptions(createLockingTaskExecutor(provider), {
      name: 'fenced-cron',
      lockAtMostFor: '10s',
    })
    const seen: Array<bigint | undefined> = []
    const task = cron.schedule(
      '* * * * * *',
      (context: NodeCronContext) => {
        seen.push(options.runCoordinator.fencingToken(context))
      },
      { ...options, noOverlap: true },
    )
    tasks.push(task)
    await vi.waitUntil(() => seen.length >= 2, { timeout: 5_000, interval: 50 })
    await task.stop()
    expect(seen.length).toBeGreaterThanOrEqual(2)
    for (const token of seen) expect(typeof token).toBe('bigint')
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!)
  })

  it('in a run of catchUp(task), the catch-up lock’s token', async () => {
    const clock = manualClock(T0)
    const { provider } = listingStore(clock)
    const coordinator = lockingRunCoordinator(createLockingTaskExecutor(provider, { clock }), {
      name: 'report',
      lockAtMostFor: '1m',
      slot: true,
      catchUp: { policy: 'all', within: '1h' },
    })
    await coordinator.shouldRun(`report:${iso(T0)}`, 60_000)
    const first = coordinator.fencingToken({ date: new Date(T0) })
    await coordinator.onComplete(`report:${iso(T0)}`)
    clock.set(T0 + 2 * MINUTE + 30_000)
    const seen: Array<bigint | undefined> = []
    const task = cron.createTask('* * * * *', (context) => void seen.push(coordinator.fencingToken(context)), {
      name: 'report',
      timezone: 'UTC',
    })
    tasks.push(task)
    expect((await coordinator.catchUp(task)).outcome).toBe('ran')
    expect(first).toBe(1n)
    expect(seen).toEqual([2n, 2n])
  })

  it('throws NoActiveLockError for a fire that does not hold the lock on this node', () => {
    const options = lockingTaskOptions(inMemoryLockProvider(), { name: 'idle', lockAtMostFor: '10s' })
    expect(() => options.runCoordinator.fencingToken({ date: new Date('2026-11-24T02:00:00Z') })).toThrow(
      NoActiveLockError,
    )
    expect(() => options.runCoordinator.fencingToken({ date: new Date('2026-11-24T02:00:00Z') })).toThrow(
      /no fire at 2026-11-24T02:00:00.000Z holds the lock on this node/,
    )
  })
})
