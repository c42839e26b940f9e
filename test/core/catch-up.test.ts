import { describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../src/core/errors.ts'
import { type CatchUpPolicy, createLockingTaskExecutor, type LockRequest } from '../../src/core/locking-task-executor.ts'
import { slotRecordName } from '../../src/core/slots.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/provider.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/run-ledger.ts'
import { manualClock, recordingListener } from '../support/fakes.ts'
import { listingStore } from '../support/listing-store.ts'

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
    const catchUp = (executor = node()) => executor.catchUp(task, request, { policy, within: '1h', fireTimes: everyMinute })
    return { clock, ledger, listener, node, ran, catchUp, names }
  }

  it("'all' runs each missed slot once, oldest first; a second node starting later finds nothing missed", async () => {
    const { ran, catchUp, ledger, listener } = await setUp('all')
    const result = await catchUp()
    expect(result).toEqual({ outcome: 'ran', missed: [1, 2, 3, 4, 5].map(at), ran: [1, 2, 3, 4, 5].map(at), failed: [] })
    expect(ran).toEqual([1, 2, 3, 4, 5].map(at))
    expect(await catchUp()).toEqual({ outcome: 'nothing-missed', missed: [], ran: [], failed: [] })
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
    expect((await ledger.history('report')).map((r) => r.outcome)).toEqual(['ok', 'skipped', 'skipped', 'skipped', 'skipped', 'ok'])
    // Each missed slot is done now: the scheduler firing one of them late does not run it.
    expect(await catchUp()).toMatchObject({ outcome: 'nothing-missed' })
  })

  it("'skip' runs nothing", async () => {
    const { ran, catchUp } = await setUp('skip')
    expect(await catchUp()).toEqual({ outcome: 'skipped', missed: [], ran: [], failed: [] })
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
    await expect(executor.catchUp(() => {}, request, { policy: 'all', within: '25h', fireTimes: everyMinute })).rejects.toThrow(
      /longer than the slot retention/,
    )
    await expect(executor.catchUp(() => {}, request, { policy: 'each' as CatchUpPolicy, within: '1h', fireTimes: everyMinute })).rejects.toThrow(
      LockConfigurationError,
    )
    await expect(executor.catchUp(() => {}, request, { policy: 'all', within: '1h', fireTimes: everyMinute })).rejects.toThrow(
      /needs a provider with an inspector/,
    )
  })

  it('the slot records a run leaves are the ones catch-up reads', async () => {
    const { names } = await setUp('skip')
    expect([...names]).toContain(slotRecordName('report', at(0)))
  })
})
