import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it, vi } from 'vitest'
import { LockConfigurationError, LockProviderError } from '../../src/core/errors.ts'
import { keepAliveLockProvider } from '../../src/core/keep-alive.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { LockProvider, SimpleLock } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor, type LockRequest, type TaskContext } from '../../src/core/locking-task-executor.ts'
import type { RunLedger } from '../../src/core/run-ledger.ts'
import { owedRecordName, parseOwedRecordName, parseSlotRecordName, slotRecordName } from '../../src/core/slots.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/provider.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/run-ledger.ts'
import { deferred, manualClock, recordingListener } from '../helpers/fakes.ts'

const T = new Date('2026-11-24T02:00:00.000Z')
const next = (slot: Date, seconds = 60): Date => new Date(slot.getTime() + seconds * 1000)

describe('slot record names', () => {
  it('are <name>@<slot in ISO-8601 basic format>, and read back', () => {
    expect(slotRecordName('nightly-report', T)).toBe('nightly-report@20261124T020000Z')
    expect(slotRecordName('n', new Date('2026-11-24T02:00:00.250Z'))).toBe('n@20261124T020000.250Z')
    expect(parseSlotRecordName('nightly-report@20261124T020000Z')).toEqual({ name: 'nightly-report', slot: T })
    expect(parseSlotRecordName('a@b@20261124T020000.250Z')).toEqual({
      name: 'a@b',
      slot: new Date('2026-11-24T02:00:00.250Z'),
    })
    expect(parseSlotRecordName('nightly-report')).toBeUndefined()
    expect(parseSlotRecordName('x@20261324T020000Z')).toBeUndefined()
  })

  it('refuse a slot that is not a valid Date, before the store is asked', async () => {
    const provider = inMemoryLockProvider()
    const lock = vi.spyOn(provider, 'lock')
    const executor = createLockingTaskExecutor(provider)
    for (const slot of [new Date(Number.NaN), '2026-11-24T02:00:00Z', 1_700_000_000_000]) {
      await expect(
        executor.executeWithLock(() => {}, { name: 'n', lockAtMostFor: '1m', slot: slot as Date }),
      ).rejects.toThrow(LockConfigurationError)
    }
    expect(lock).not.toHaveBeenCalled()
  })
})

describe('executeWithLock with a slot', () => {
  it('runs a slot once across nodes, however late another node fires it; another slot runs again', async () => {
    const provider = inMemoryLockProvider()
    const [a, b] = [createLockingTaskExecutor(provider), createLockingTaskExecutor(provider)]
    const options = { name: 'report', lockAtMostFor: '1m', lockAtLeastFor: 0 } as const
    expect(await a.executeWithLock(() => 'a', { ...options, slot: T })).toEqual({ executed: true, result: 'a' })
    // The lock is free again (lockAtLeastFor 0): only the slot's record stops b.
    expect(await b.executeWithLock(() => 'b', { ...options, slot: T })).toEqual({
      executed: false,
      reason: 'slot-done',
    })
    expect(await a.executeWithLock(() => 'a again', { ...options, slot: T })).toEqual({
      executed: false,
      reason: 'slot-done',
    })
    expect(await b.executeWithLock(() => 'b', { ...options, slot: next(T) })).toEqual({ executed: true, result: 'b' })
    // A plain call (no slot) is not affected by slot records.
    expect(await b.executeWithLock(() => 'plain', options)).toEqual({ executed: true, result: 'plain' })
  })

  it('a slot record lives for the retention, then the slot could run again', async () => {
    const clock = manualClock(T.getTime())
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { clock, slotRetention: '10m' })
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m', slot: T }
    expect((await executor.executeWithLock(() => 1, options)).executed).toBe(true)
    clock.advance(9 * 60_000)
    expect(await executor.executeWithLock(() => 2, options)).toEqual({ executed: false, reason: 'slot-done' })
    expect(provider.inspect(slotRecordName('report', T))!.lockUntil.getTime()).toBe(T.getTime() + 10 * 60_000)
    clock.advance(60_000)
    expect(await executor.executeWithLock(() => 3, { ...options, slotRetention: '1h' })).toEqual({
      executed: true,
      result: 3,
    })
    expect(provider.inspect(slotRecordName('report', T))!.lockUntil.getTime()).toBe(
      T.getTime() + 10 * 60_000 + 3_600_000,
    )
  })

  it("overlap 'skip': a long run of slot T makes slot T+1 skip: the claiming node records the skip once, and T+1 never runs later", async () => {
    const provider = inMemoryLockProvider()
    const ledger = inMemoryRunLedger()
    const listener = recordingListener()
    const [a, b, c] = [0, 1, 2].map(() =>
      createLockingTaskExecutor(provider, { runLedger: ledger, listener, node: 'n' }),
    )
    const long = deferred()
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m' }
    const first = a!.executeWithLock(() => long.promise, { ...options, slot: T })
    await sleep(5)
    expect(await b!.executeWithLock(() => 'T+1 on b', { ...options, slot: next(T), overlap: 'skip' })).toEqual({
      executed: false,
      reason: 'held',
    })
    expect(await c!.executeWithLock(() => 'T+1 on c', { ...options, slot: next(T) })).toEqual({
      executed: false,
      reason: 'slot-done',
    })
    long.resolve()
    await first
    expect(await c!.executeWithLock(() => 'T+1 late', { ...options, slot: next(T) })).toEqual({
      executed: false,
      reason: 'slot-done',
    })
    const history = await ledger.history('report')
    expect(history.map((r) => [r.slot?.toISOString(), r.outcome])).toEqual([
      [next(T).toISOString(), 'skipped'],
      [T.toISOString(), 'ok'],
    ])
    expect(listener.log.filter((l) => l.startsWith('onSlot'))).toEqual([
      'onSlotClaimed report',
      'onSlotClaimed report',
      'onSlotSkipped report',
      'onSlotDone report',
      'onSlotDone report',
    ])
  })

  it("overlap 'skip': the skip is recorded under the node that claimed the slot, as the store names it (its lockedBy), like runs", async () => {
    const store = inMemoryLockProvider()
    // A store that keeps an owner per acquisition, as the real ones do.
    let taken = 0
    const owned: LockProvider = {
      name: 'owned',
      inspector: () => store.inspector(),
      lock: async (configuration) => {
        const handle = await store.lock(configuration)
        return handle && Object.assign(Object.create(handle) as SimpleLock, { lockedBy: `host:1:${++taken}` })
      },
    }
    const ledger = inMemoryRunLedger()
    const [a, b] = [0, 1].map(() => createLockingTaskExecutor(owned, { runLedger: ledger, node: 'fallback' }))
    const long = deferred()
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m' }
    const first = a!.executeWithLock(() => long.promise, { ...options, slot: T })
    await sleep(5)
    expect(await b!.executeWithLock(() => 'T+1', { ...options, slot: next(T), overlap: 'skip' })).toEqual({
      executed: false,
      reason: 'held',
    })
    long.resolve()
    await first
    const nodes = (await ledger.history('report')).map((r) => [r.outcome, r.node])
    expect(nodes).toEqual([
      ['skipped', 'host:1:3'],
      ['ok', 'host:1:2'],
    ])
  })

  it("overlap 'all' (the default): slots that come during a long run are owed, and run after it, once each, oldest first (issue 41, scenario 2)", async () => {
    const provider = inMemoryLockProvider()
    const ledger = inMemoryRunLedger()
    const listener = recordingListener()
    const [a, b, c] = [0, 1, 2].map(() => createLockingTaskExecutor(provider, { runLedger: ledger, listener }))
    const long = deferred()
    const ran: string[] = []
    const task = ({ slot }: TaskContext) => void ran.push(slot!.toISOString())
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m' }
    const first = a!.executeWithLock(() => long.promise, { ...options, slot: T })
    await sleep(5)
    const later = [next(T), next(next(T)), next(next(next(T)))]
    // Three nodes fire the three next slots while the lock is held: each is owed, none is dropped.
    const owed = await Promise.all(later.map((slot, i) => [b, c, b][i]!.executeWithLock(task, { ...options, slot })))
    expect(owed).toEqual(Array(3).fill({ executed: false, reason: 'owed' }))
    // A late fire of an owed slot while the lock is still held owes it again (one record: it runs once).
    expect(await c!.executeWithLock(task, { ...options, slot: later[0] })).toEqual({
      executed: false,
      reason: 'owed',
    })
    long.resolve()
    await first
    await vi.waitFor(() => expect(ran).toHaveLength(3), { timeout: 5_000 })
    await sleep(300)
    expect(ran).toEqual(later.map((slot) => slot.toISOString()))
    const history = await ledger.history('report')
    expect(history.map((r) => [r.slot?.toISOString(), r.outcome]).sort()).toEqual(
      [T, ...later].map((slot) => [slot.toISOString(), 'ok']).sort(),
    )
    expect(listener.log.filter((l) => l === 'onSlotOwed report')).toHaveLength(4)
    expect(listener.log.filter((l) => l === 'onSlotCaughtUp report')).toHaveLength(3)
    const inspector = provider.inspector!()
    for (const slot of later) expect((await inspector.get(owedRecordName('report', slot)))?.held).not.toBe(true)
  })

  it("overlap 'once': of the slots owed during a long run only the latest runs; the others are recorded as skipped", async () => {
    const provider = inMemoryLockProvider()
    const ledger = inMemoryRunLedger()
    const [a, b] = [0, 1].map(() => createLockingTaskExecutor(provider, { runLedger: ledger, overlap: 'once' }))
    const long = deferred()
    const ran: string[] = []
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m' }
    const first = a!.executeWithLock(() => long.promise, { ...options, slot: T })
    await sleep(5)
    const later = [next(T), next(next(T))]
    for (const slot of later)
      expect(await b!.executeWithLock(({ slot }) => void ran.push(slot!.toISOString()), { ...options, slot })).toEqual({
        executed: false,
        reason: 'owed',
      })
    long.resolve()
    await first
    await vi.waitFor(() => expect(ran).toHaveLength(1), { timeout: 5_000 })
    await sleep(300)
    expect(ran).toEqual([later[1]!.toISOString()])
    const outcomes = (await ledger.history('report')).map((r) => [r.slot?.toISOString(), r.outcome])
    expect(outcomes).toContainEqual([later[0]!.toISOString(), 'skipped'])
    expect(outcomes).toContainEqual([later[1]!.toISOString(), 'ok'])
  })

  it('refuses an unknown overlap policy, naming the lock', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    await expect(
      executor.executeWithLock(() => 1, { name: 'report', lockAtMostFor: '1m', slot: T, overlap: 'queue' as never }),
    ).rejects.toThrow(/Lock "report": overlap must be 'all', 'once' or 'skip', got "queue"/)
    expect(() => createLockingTaskExecutor(inMemoryLockProvider(), { overlap: 'x' as never })).toThrow(
      LockConfigurationError,
    )
  })

  it('a failed run counts as run, and the ledger says why it failed', async () => {
    const ledger = inMemoryRunLedger()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: ledger, node: 'web-1' })
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m', slot: T }
    await expect(
      executor.executeWithLock(() => Promise.reject(new TypeError('boom\nsecond line postgres://u:pw@db/x')), options),
    ).rejects.toThrow('boom')
    expect(await executor.executeWithLock(() => 'retry', options)).toEqual({ executed: false, reason: 'slot-done' })
    const [run] = await ledger.history('report')
    expect(run).toMatchObject({
      name: 'report',
      slot: T,
      node: 'web-1',
      outcome: 'failed',
      error: { type: 'TypeError', message: 'boom' },
    })
    expect(run!.finishedAt!.getTime()).toBeGreaterThanOrEqual(run!.startedAt.getTime())
    expect(await ledger.health('report')).toMatchObject({
      consecutiveFailures: 1,
      lastSuccess: undefined,
      lastFailure: { id: run!.id },
    })
  })

  it('a store failure after the claim gives the slot back: a later attempt runs it', async () => {
    const inner = inMemoryLockProvider()
    let failMainLock = true
    const provider: LockProvider = {
      lock: async (configuration) => {
        if (configuration.name === 'report' && failMainLock) throw new LockProviderError('store down')
        return inner.lock(configuration)
      },
    }
    const executor = createLockingTaskExecutor(provider)
    const options: LockRequest = { name: 'report', lockAtMostFor: '1m', slot: T }
    const task = vi.fn(() => 'ran')
    await expect(executor.executeWithLock(task, options)).rejects.toThrow(LockProviderError)
    expect(task).not.toHaveBeenCalled()
    failMainLock = false
    expect(await executor.executeWithLock(task, options)).toEqual({ executed: true, result: 'ran' })
  })

  it('a slot claimed through a keep-alive wrapper is not kept alive: it is the plain provider that claims it', async () => {
    const inner = inMemoryLockProvider()
    const claims: string[] = []
    const spy: typeof inner = {
      ...inner,
      lock: async (configuration) => {
        claims.push(configuration.name)
        return inner.lock(configuration)
      },
    }
    const executor = createLockingTaskExecutor(keepAliveLockProvider(spy, { minLockAtMostFor: 1 }))
    expect((await executor.executeWithLock(() => 1, { name: 'report', lockAtMostFor: '1m', slot: T })).executed).toBe(
      true,
    )
    expect(claims).toEqual(['report@20261124T020000Z', 'report'])
  })
})

describe('the run ledger', () => {
  it('records every execution, slot or not, with node, times, outcome and duration', async () => {
    const ledger = inMemoryRunLedger()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: ledger, node: 'web-1' })
    await executor.executeWithLock(() => sleep(20), { name: 'report', lockAtMostFor: '1m' })
    const [run] = await ledger.history('report')
    expect(run).toMatchObject({ name: 'report', slot: undefined, node: 'web-1', outcome: 'ok', error: undefined })
    expect(run!.durationMs).toBeGreaterThanOrEqual(15)
    expect(await ledger.tasks()).toEqual([
      expect.objectContaining({ name: 'report', consecutiveFailures: 0, lastSuccess: run }),
    ])
  })

  it('records a lock lost during the run as lock-lost', async () => {
    const clock = manualClock(T.getTime())
    const ledger = inMemoryRunLedger()
    const executor = createLockingTaskExecutor(inMemoryLockProvider({ clock }), { clock, runLedger: ledger })
    await executor.executeWithLock(
      async ({ signal }) => {
        clock.advance(1_000)
        await vi.waitFor(() => expect(signal.aborted).toBe(true), { timeout: 3_000 })
      },
      { name: 'report', lockAtMostFor: 1_000 },
    )
    expect((await ledger.history('report'))[0]!.outcome).toBe('lock-lost')
  })

  it('a failing ledger never fails the task: onRunLedgerFailed hears of it', async () => {
    const broken: RunLedger = {
      ...inMemoryRunLedger(),
      name: 'broken',
      start: () => Promise.reject(new Error('ledger down')),
      record: () => Promise.reject(new Error('ledger down')),
    }
    const listener = recordingListener([], ['onRunLedgerFailed'])
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: broken, listener })
    expect(await executor.executeWithLock(() => 'ran', { name: 'report', lockAtMostFor: '1m' })).toEqual({
      executed: true,
      result: 'ran',
    })
    expect(listener.log).toEqual(['onRunLedgerFailed report'])
    // A ledger that never answers is given up on after 5 s; the lock is released meanwhile.
    const hanging: RunLedger = {
      ...inMemoryRunLedger(),
      start: () => new Promise(() => {}),
      record: () => new Promise(() => {}),
    }
    const provider = inMemoryLockProvider()
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    try {
      const done = createLockingTaskExecutor(provider, { runLedger: hanging }).executeWithLock(() => 'ran', {
        name: 'slow',
        lockAtMostFor: '1m',
      })
      await vi.advanceTimersByTimeAsync(6_000)
      expect(await done).toEqual({ executed: true, result: 'ran' })
    } finally {
      vi.useRealTimers()
    }
    expect(await provider.lock(lockConfiguration({ name: 'slow', lockAtMostFor: '1m' }))).toBeDefined()
  })
})

describe('owed records', () => {
  it('are named <name>@o<slot without Z>, as long as the slot record, and are no slot record', () => {
    const slot = new Date(Date.UTC(2026, 10, 24, 2, 0, 0))
    const withMs = new Date(Date.UTC(2026, 10, 24, 2, 0, 0, 250))
    expect(owedRecordName('nightly-report', slot)).toBe('nightly-report@o20261124T020000')
    expect(owedRecordName('a@b', withMs)).toBe('a@b@o20261124T020000.250')
    expect(owedRecordName('nightly-report', slot)).toHaveLength(slotRecordName('nightly-report', slot).length)
    expect(parseOwedRecordName('a@b@o20261124T020000.250')).toEqual({ name: 'a@b', slot: withMs })
    expect(parseSlotRecordName(owedRecordName('x', slot))).toBeUndefined()
    expect(parseOwedRecordName(slotRecordName('x', slot))).toBeUndefined()
    expect(parseOwedRecordName('x@catch-up')).toBeUndefined()
  })
})
