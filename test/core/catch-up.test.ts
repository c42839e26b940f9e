import { describe, expect, it } from 'vitest'
import { ExecutorClosedError, LockConfigurationError, LockLostError, LockProviderError } from '../../src/core/errors.ts'
import { type LockConfiguration, lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import {
  CatchUpError,
  type CatchUpPolicy,
  createLockingTaskExecutor,
  type LockRequest,
} from '../../src/core/locking-task-executor.ts'
import { slotRecordName } from '../../src/core/slots.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/provider.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/run-ledger.ts'
import { manualClock, recordingListener } from '../helpers/fakes.ts'
import { listingStore } from '../helpers/listing-store.ts'

const MINUTE = 60_000
const T0 = Date.UTC(2026, 10, 24, 2, 0, 0)
const at = (minutes: number): Date => new Date(T0 + minutes * MINUTE)
/** A schedule firing every minute: its fire times from `from` to `to`, both included. */
const everyMinute = (from: Date, to: Date): Date[] => {
  const out: Date[] = []
  for (let t = Math.ceil(from.getTime() / MINUTE) * MINUTE; t <= to.getTime(); t += MINUTE) out.push(new Date(t))
  return out
}

describe('catchUp', () => {
  const request: LockRequest = { name: 'report', lockAtMostFor: '1m' }

  async function setUp(policy: CatchUpPolicy) {
    const clock = manualClock(at(0).getTime())
    const { provider, names } = listingStore(clock)
    const ledger = inMemoryRunLedger()
    const listener = recordingListener([], ['onSlotMissed', 'onSlotCaughtUp'])
    const node = () => createLockingTaskExecutor(provider, { clock, runLedger: ledger, listener })
    // The task ran at slot 0; then every node was down for five slots (1..5).
    expect((await node().executeWithLock(() => 'slot 0', { ...request, slot: at(0) })).executed).toBe(true)
    clock.set(at(5).getTime() + 30_000)
    const ran: (Date | undefined)[] = []
    const task = ({ slot }: { slot: Date | undefined }) => void ran.push(slot)
    const catchUp = (executor = node()) =>
      executor.catchUp(task, request, { policy, within: '1h', fireTimes: everyMinute })
    return { clock, ledger, listener, node, ran, catchUp, names }
  }

  it("'all' runs each missed slot once, oldest first; a second node starting later finds nothing missed", async () => {
    const { ran, catchUp, ledger, listener } = await setUp('all')
    const result = await catchUp()
    expect(result).toEqual({
      outcome: 'ran',
      missed: [1, 2, 3, 4, 5].map(at),
      ran: [1, 2, 3, 4, 5].map(at),
      failed: [],
      notRun: [],
    })
    expect(ran).toEqual([1, 2, 3, 4, 5].map(at))
    expect(await catchUp()).toEqual({ outcome: 'nothing-missed', missed: [], ran: [], failed: [], notRun: [] })
    expect((await ledger.history('report')).map((r) => [r.slot?.getTime(), r.outcome])).toEqual([
      ...[5, 4, 3, 2, 1].map((m) => [at(m).getTime(), 'ok']),
      [at(0).getTime(), 'ok'],
    ])
    expect(listener.log.filter((l) => l === 'onSlotCaughtUp report')).toHaveLength(5)
  })

  it("'once' runs one catch-up, for the latest missed slot, and records the others as skipped", async () => {
    const { ran, catchUp, ledger } = await setUp('once')
    expect(await catchUp()).toMatchObject({ outcome: 'ran', missed: [1, 2, 3, 4, 5].map(at), ran: [at(5)] })
    expect(ran).toEqual([at(5)])
    // The folded slots are recorded after the run, once the lock is released.
    const bySlot = (await ledger.history('report'))
      .map((r) => [r.slot?.getTime(), r.outcome])
      .sort((a, b) => Number(a[0]) - Number(b[0]))
    expect(bySlot).toEqual([
      [at(0).getTime(), 'ok'],
      ...[1, 2, 3, 4].map((m) => [at(m).getTime(), 'skipped']),
      [at(5).getTime(), 'ok'],
    ])
    // Each missed slot is done now: the scheduler firing one of them late does not run it.
    expect(await catchUp()).toMatchObject({ outcome: 'nothing-missed' })
  })

  it("'skip' runs nothing", async () => {
    const { ran, catchUp } = await setUp('skip')
    expect(await catchUp()).toEqual({ outcome: 'skipped', missed: [], ran: [], failed: [], notRun: [] })
    expect(ran).toEqual([])
  })

  it('two nodes starting together catch up once: the other finds the lock held', async () => {
    const { ran, catchUp, node } = await setUp('all')
    const [a, b] = [node(), node()]
    const results = await Promise.all([catchUp(a), catchUp(b)])
    expect(results.map((r) => r.outcome).sort()).toEqual(['held', 'ran'])
    expect(ran).toEqual([1, 2, 3, 4, 5].map(at))
  })

  it('a slot another node claims meanwhile (its scheduler fired it) is not run by the catch-up', async () => {
    const { ran, catchUp, node } = await setUp('all')
    expect((await node().executeWithLock(() => 'on time elsewhere', { ...request, slot: at(3) })).executed).toBe(true)
    // Slot 3 is now the latest record: only 4 and 5 are missed.
    expect(await catchUp()).toMatchObject({ missed: [at(4), at(5)], ran: [at(4), at(5)] })
    expect(ran).toEqual([at(4), at(5)])
  })

  it('a task without slot records (new, or stopped longer than the retention) has nothing to catch up', async () => {
    const clock = manualClock(at(30).getTime())
    const { provider } = listingStore(clock)
    const ran: unknown[] = []
    const result = await createLockingTaskExecutor(provider, { clock }).catchUp(() => void ran.push(1), request, {
      policy: 'all',
      within: '1h',
      fireTimes: everyMinute,
    })
    expect(result.outcome).toBe('no-history')
    expect(ran).toEqual([])
  })

  it('a failing catch-up run does not stop the others and does not reject: failed says so', async () => {
    const { node } = await setUp('all')
    const error = new Error('boom')
    const result = await node().catchUp(
      ({ slot }) => {
        if (slot?.getTime() === at(2).getTime()) throw error
      },
      request,
      { policy: 'all', within: '1h', fireTimes: everyMinute },
    )
    expect(result.ran).toEqual([1, 2, 3, 4, 5].map(at))
    expect(result.failed).toEqual([{ slot: at(2), error }])
  })

  it('only slots within the window count: the window starts after the latest slot record', async () => {
    const { clock, catchUp, ran } = await setUp('all')
    clock.set(at(90).getTime())
    const result = await catchUp()
    // From an hour back, both ends included: 02:30 to 03:30.
    expect(result.missed).toHaveLength(61)
    expect(result.missed[0]).toEqual(at(30))
    expect(ran).toHaveLength(61)
  })

  it('refuses a window longer than the slot retention, a bad policy, and a provider without an inspector', async () => {
    const inner = inMemoryLockProvider()
    const executor = createLockingTaskExecutor({ lock: (configuration) => inner.lock(configuration) })
    await expect(
      executor.catchUp(() => {}, request, { policy: 'all', within: '25h', fireTimes: everyMinute }),
    ).rejects.toThrow(/longer than the slot retention/)
    await expect(
      executor.catchUp(() => {}, request, { policy: 'each' as CatchUpPolicy, within: '1h', fireTimes: everyMinute }),
    ).rejects.toThrow(LockConfigurationError)
    await expect(
      executor.catchUp(() => {}, request, { policy: 'all', within: '1h', fireTimes: everyMinute }),
    ).rejects.toThrow(/needs a provider with an inspector/)
  })

  it('the slot records a run leaves are the ones catch-up reads', async () => {
    const { names } = await setUp('skip')
    expect([...names]).toContain(slotRecordName('report', at(0)))
  })
})

/** A provider over `inner` whose `lock()` runs `before(configuration)` first (to fail or slow a call). */
function intercepted(inner: LockProvider, before: (configuration: LockConfiguration) => void): LockProvider {
  return {
    ...inner,
    lock: async (configuration) => {
      before(configuration)
      return inner.lock(configuration)
    },
  }
}

/** Resolves once `check()` is true, polling; fails after 5 s. */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  expect(check()).toBe(true)
}

describe('catchUp after an outage (issue 26)', () => {
  const request: LockRequest = { name: 'report', lockAtMostFor: '2s' }

  /** A store whose every call takes `costMs` of the (manual) clock; the task ran slot 0, then every node was down for `down` slots. */
  async function outage(down: number, costMs = 0, options: { wrap?: (provider: LockProvider) => LockProvider } = {}) {
    const clock = manualClock(at(0).getTime())
    const store = listingStore(clock)
    const slow = intercepted(store.provider, () => clock.advance(costMs))
    const provider = options.wrap?.(slow) ?? slow
    const ledger = inMemoryRunLedger()
    const node = () => createLockingTaskExecutor(provider, { clock, runLedger: ledger })
    expect((await node().executeWithLock(() => 'slot 0', { ...request, slot: at(0) })).executed).toBe(true)
    clock.set(at(down).getTime() + 30_000)
    return { clock, provider, store, ledger, node }
  }

  it("defect 1: 'once' over 3,000 missed slots claims one slot, and its run starts on a fresh lock", async () => {
    const seconds = (n: number) => new Date(T0 + n * 1000)
    const everySecond = (from: Date, to: Date) => {
      const out: Date[] = []
      for (let t = Math.ceil(from.getTime() / 1000) * 1000; t <= to.getTime(); t += 1000) out.push(new Date(t))
      return out
    }
    // Every store call costs 1 ms: 3,000 claims under a 2 s lock would outlive it.
    const { clock, node, store, ledger } = await outage(0, 1)
    clock.set(seconds(3000).getTime())
    const before = store.names.size
    const left: number[] = []
    const result = await node().catchUp(
      ({ configuration }) => void left.push(configuration.lockAtMostUntil.getTime() - clock.now()),
      request,
      {
        policy: 'once',
        within: '1h',
        fireTimes: everySecond,
      },
    )
    expect(result).toMatchObject({ outcome: 'ran', ran: [seconds(3000)], notRun: [] })
    expect(result.missed).toHaveLength(3000)
    expect(left).toHaveLength(1)
    expect(left[0]).toBeGreaterThan(1800)
    // The run's claim, its owed record, the marker: no claim per folded slot.
    expect(store.names.size - before).toBe(3)
    expect(
      (await ledger.history('report', { limit: 5000 })).filter((r) => r.outcome === 'skipped').length,
    ).toBeGreaterThan(0)
  })

  it("defect 1: 'all' makes the lock fresh before each run, and never starts a run on a lock it lost", async () => {
    const { clock, node, provider } = await outage(5)
    const left: number[] = []
    const held: string[] = []
    const result = await node().catchUp(
      async ({ configuration, slot }) => {
        left.push(configuration.lockAtMostUntil.getTime() - clock.now())
        clock.advance(1500) // each run takes 1.5 s of the 2 s lock
        // Another node, at the end of the run: the lock still excludes it.
        const beside = await provider.lock(
          lockConfiguration({ name: 'report', lockAtMostFor: '1m', createdAt: new Date(clock.now()) }),
        )
        held.push(beside ? `${slot?.getTime()} taken beside` : 'held')
      },
      request,
      { policy: 'all', within: '1h', fireTimes: everyMinute },
    )
    expect(result).toMatchObject({ outcome: 'ran', ran: [1, 2, 3, 4, 5].map(at), notRun: [] })
    for (const ms of left) expect(ms).toBeGreaterThanOrEqual(1800)
    expect(held).toEqual(['held', 'held', 'held', 'held', 'held'])
  })

  it('defect 1: a lock that cannot be extended stops the catch-up; the rest is left unclaimed for a later one', async () => {
    const { clock, node, provider } = await outage(5, 0, {
      // The store loses every lock on extension.
      wrap: (inner) => ({
        ...inner,
        lock: async (configuration) => {
          const handle = await inner.lock(configuration)
          return (
            handle &&
            Object.assign(Object.create(handle), { unlock: () => handle.unlock(), extend: async () => undefined })
          )
        },
      }),
    })
    const ran: (Date | undefined)[] = []
    const result = await node().catchUp(
      ({ slot }) => {
        ran.push(slot)
        clock.advance(1500)
      },
      request,
      { policy: 'all', within: '1h', fireTimes: everyMinute },
    )
    expect(ran).toEqual([at(1)])
    expect(result).toMatchObject({ outcome: 'ran', ran: [at(1)], notRun: [2, 3, 4, 5].map(at) })
    expect(result.stoppedBy).toBeInstanceOf(LockLostError)
    // The next catch-up (the lock is free: 2 s passed) runs what was left.
    clock.advance(2000)
    const again = await createLockingTaskExecutor(provider, { clock }).catchUp(() => {}, request, {
      policy: 'all',
      within: '1h',
      fireTimes: everyMinute,
    })
    expect(again.ran).toEqual([2, 3, 4, 5].map(at))
  })

  it('defect 2: close() waits for a running catch-up, aborts its task, and resolves once its lock is released', async () => {
    const { node, provider, clock } = await outage(5)
    const executor = node()
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    const ran: (Date | undefined)[] = []
    const catchingUp = executor.catchUp(
      async ({ signal, slot }) => {
        ran.push(slot)
        started()
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        await new Promise((resolve) => setTimeout(resolve, 50))
      },
      request,
      { policy: 'all', within: '1h', fireTimes: everyMinute },
    )
    await running
    await executor.close()
    // Released: another node takes the lock at once.
    const handle = await provider.lock(
      lockConfiguration({ name: 'report', lockAtMostFor: '1m', createdAt: new Date(clock.now()) }),
    )
    expect(handle).toBeDefined()
    const result = await catchingUp
    expect(ran).toEqual([at(1)])
    expect(result).toMatchObject({ ran: [at(1)], notRun: [2, 3, 4, 5].map(at) })
    expect(result.stoppedBy).toBeInstanceOf(ExecutorClosedError)
  })

  it('defect 3 (issue 41, scenario 2): slots fired during a catch-up are done (claimed by it) or owed, and each runs once', async () => {
    const { node } = await outage(5)
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const ran: string[] = []
    const catchingUp = node().catchUp(
      async ({ slot }) => {
        ran.push(`catch-up ${slot?.toISOString()}`)
        if (slot?.getTime() === at(1).getTime()) await gate
      },
      request,
      { policy: 'all', within: '1h', fireTimes: everyMinute },
    )
    await until(() => ran.length === 1)
    // Another node's scheduler fires slot 3 (among the missed ones) and slots 6 and 7 (new ones).
    const firing = node()
    const fired = await Promise.all(
      [3, 6, 7].map((m) =>
        firing.executeWithLock(({ slot }) => void ran.push(`fired ${slot?.toISOString()}`), {
          ...request,
          slot: at(m),
        }),
      ),
    )
    // Each found the lock held, and is owed (slot 3 too: the catch-up claims a slot when it runs it).
    expect(fired).toEqual(Array(3).fill({ executed: false, reason: 'owed' }))
    release()
    const result = await catchingUp
    // The catch-up runs every owed slot before it releases the lock, those owed meanwhile too.
    expect(result.ran).toEqual([1, 2, 3, 4, 5, 6, 7].map(at))
    expect(ran).toEqual([1, 2, 3, 4, 5, 6, 7].map((m) => `catch-up ${at(m).toISOString()}`))
  })

  it('defect 3: a slot fired during a catch-up is owed, and runs once, before the catch-up releases the lock', async () => {
    const { node } = await outage(5)
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const ran: string[] = []
    const catchingUp = node().catchUp(
      async ({ slot }) => {
        ran.push(`catch-up ${slot?.getTime()}`)
        await gate
      },
      request,
      { policy: 'once', within: '1h', fireTimes: everyMinute },
    )
    await until(() => ran.length === 1)
    const fired = node().executeWithLock(({ slot }) => void ran.push(`fired ${slot?.getTime()}`), {
      ...request,
      slot: at(6),
    })
    expect(await fired).toEqual({ executed: false, reason: 'owed' })
    release()
    await catchingUp
    await until(() => ran.length === 2)
    // Run by the catch-up, which drains what was owed while it ran before it releases the lock.
    expect(ran).toEqual([`catch-up ${at(5).getTime()}`, `catch-up ${at(6).getTime()}`])
  })

  it('defect 4: a claim given back (the store failed on the task lock) is run by a later catch-up', async () => {
    let fail = false
    const { node } = await outage(4, 0, {
      wrap: (inner) =>
        intercepted(inner, (configuration) => {
          if (fail && configuration.name === 'report') throw new Error('connection reset')
        }),
    })
    // Slot 4 comes while the store fails on the task's lock: its claim is given back.
    fail = true
    await expect(node().executeWithLock(() => 'never', { ...request, slot: at(4) })).rejects.toThrow(LockProviderError)
    fail = false
    const ran: (Date | undefined)[] = []
    const result = await node().catchUp(({ slot }) => void ran.push(slot), request, {
      policy: 'all',
      within: '1h',
      fireTimes: everyMinute,
    })
    expect(result.missed).toEqual([1, 2, 3, 4].map(at))
    expect(ran).toEqual([1, 2, 3, 4].map(at))
  })

  it('defect 6: a store failure mid catch-up rejects with what ran; what it had not run stays owed or missed, and a later catch-up runs it once', async () => {
    let claims = Number.NEGATIVE_INFINITY
    const { node, clock } = await outage(5, 0, {
      wrap: (inner) =>
        intercepted(inner, (configuration) => {
          if (configuration.name.startsWith('report@2026') && ++claims === 3) throw new Error('connection reset')
        }),
    })
    claims = 0
    const ran: (Date | undefined)[] = []
    const error = await node()
      .catchUp(({ slot }) => void ran.push(slot), request, { policy: 'all', within: '1h', fireTimes: everyMinute })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CatchUpError)
    expect(error).toBeInstanceOf(LockProviderError)
    // The store failed on the third claim, taken when its slot was to run: two ran.
    expect((error as CatchUpError).result).toMatchObject({ ran: [at(1), at(2)], failed: [] })
    expect(ran).toEqual([at(1), at(2)])
    // Nothing stays claimed without being owed: a later catch-up runs every slot, once.
    clock.advance(1)
    const again = await node().catchUp(({ slot }) => void ran.push(slot), request, {
      policy: 'all',
      within: '1h',
      fireTimes: everyMinute,
    })
    expect(again.ran).toEqual([3, 4, 5].map(at))
    expect(ran).toEqual([1, 2, 3, 4, 5].map(at))
  })

  it('defect 7: works with hundreds of thousands of slot records', async () => {
    const { provider, clock } = await outage(5)
    const records = Array.from({ length: 200_000 }, (_, i) => {
      const slot = new Date(at(0).getTime() - i * 500)
      return {
        name: slotRecordName('report', slot),
        lockUntil: new Date(clock.now() + 1000),
        lockedAt: slot,
        lockedBy: undefined,
        held: true,
        remainingMs: 1000,
      }
    })
    const inspector = provider.inspector!()
    const many: LockProvider = {
      ...provider,
      inspector: () => ({ ...inspector, list: async () => ({ now: new Date(clock.now()), locks: records }) }),
    }
    const result = await createLockingTaskExecutor(many, { clock }).catchUp(() => {}, request, {
      policy: 'all',
      within: '1h',
      fireTimes: everyMinute,
    })
    expect(result).toMatchObject({ outcome: 'ran', missed: [1, 2, 3, 4, 5].map(at) })
  })
})
