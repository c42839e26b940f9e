// Leases (issue 41): a running task's lock is held by the store for a lease at a time and renewed
// by the live process, so a node that dies frees it within a lease, not after lockAtMostFor.
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { LockLostError } from '../../src/core/errors.ts'
import { keepAliveLockProvider } from '../../src/core/keep-alive.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { ExtensibleLock, LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor, type TaskContext } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/provider.ts'

const LEASE = 300

/** How long the store holds `name` from now, in ms (negative once it lapsed). */
function heldFor(provider: ReturnType<typeof inMemoryLockProvider>, name: string): number {
  return (provider.inspect(name)?.lockUntil.getTime() ?? 0) - Date.now()
}

describe('leases', () => {
  it('a long task holds its lock a lease at a time, renewed while it runs, up to lockAtMostFor; released after', async () => {
    const provider = inMemoryLockProvider()
    const executor = createLockingTaskExecutor(provider, { lease: LEASE })
    // The first lock tells the executor that the provider's locks can be renewed.
    await executor.executeWithLock(() => undefined, { name: 'first', lockAtMostFor: '1m' })
    const seen: number[] = []
    let signal: AbortSignal | undefined
    const result = await executor.executeWithLock(
      async (context: TaskContext) => {
        signal = context.signal
        for (let i = 0; i < 10; i++) {
          seen.push(heldFor(provider, 'report'))
          await sleep(100)
        }
        return 'done'
      },
      { name: 'report', lockAtMostFor: '1m' },
    )
    expect(result).toEqual({ executed: true, result: 'done' })
    expect(signal?.aborted).toBe(false)
    // Never held for the whole minute, and never lapsed while the task ran (1 s: three leases).
    for (const left of seen) {
      expect(left).toBeLessThanOrEqual(LEASE)
      expect(left).toBeGreaterThan(0)
    }
    expect(heldFor(provider, 'report')).toBeLessThanOrEqual(0)
  })

  it("an executor's first lock, taken before it knew the store extends, is cut to a lease at once", async () => {
    const provider = inMemoryLockProvider()
    const executor = createLockingTaskExecutor(provider, { lease: LEASE })
    let left = Number.POSITIVE_INFINITY
    await executor.executeWithLock(
      async () => {
        await sleep(100)
        left = heldFor(provider, 'report')
      },
      { name: 'report', lockAtMostFor: '10m' },
    )
    // Not held for the 10 minutes: a node killed in its first task frees it within a lease too.
    expect(left).toBeLessThanOrEqual(LEASE)
    expect(left).toBeGreaterThan(0)
  })

  it('a node whose renewals stop (it died, or its store went away) loses the lock within the lease: another node takes it then', async () => {
    const memory = inMemoryLockProvider()
    let frozen = false
    // A node whose extensions never answer once frozen, as a dead or partitioned one.
    const stalling: LockProvider = {
      name: 'stalling',
      lock: async (configuration) => {
        const handle = (await memory.lock(configuration)) as ExtensibleLock | undefined
        if (!handle) return undefined
        const extend = handle.extend.bind(handle)
        return Object.assign(Object.create(handle) as ExtensibleLock, {
          extend: (...args: Parameters<ExtensibleLock['extend']>) =>
            frozen ? new Promise<never>(() => {}) : extend(...args),
        })
      },
    }
    const executor = createLockingTaskExecutor(stalling, { lease: LEASE })
    await executor.executeWithLock(() => undefined, { name: 'first', lockAtMostFor: '1m' })
    let lost: unknown
    const started = Date.now()
    const running = executor.executeWithLock(
      async ({ signal }) => {
        frozen = true
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        lost = signal.reason
      },
      { name: 'report', lockAtMostFor: '10m' },
    )
    const other = createLockingTaskExecutor(memory)
    let taken: number | undefined
    for (let i = 0; i < 40 && taken === undefined; i++) {
      await sleep(50)
      const attempt = await other.executeWithLock(() => Date.now(), { name: 'report', lockAtMostFor: '1m' })
      if (attempt.executed) taken = attempt.result
    }
    expect(taken).toBeDefined()
    // Within a lease (and a poll), not after the 10 minutes of lockAtMostFor.
    expect(taken! - started).toBeLessThan(LEASE + 200)
    await running
    expect(lost).toBeInstanceOf(LockLostError)
  })

  it('lease: false, a lockAtMostFor not longer than the lease, and keep-alive locks are held as before', async () => {
    const provider = inMemoryLockProvider()
    const check = async (executor: ReturnType<typeof createLockingTaskExecutor>, lockAtMostFor: number) => {
      await executor.executeWithLock(() => undefined, { name: 'first', lockAtMostFor: '1m' })
      let left = 0
      await executor.executeWithLock(
        () => {
          left = heldFor(provider, 'report')
        },
        { name: 'report', lockAtMostFor },
      )
      return left
    }
    expect(await check(createLockingTaskExecutor(provider, { lease: false }), 60_000)).toBeGreaterThan(59_000)
    expect(await check(createLockingTaskExecutor(provider, { lease: '30s' }), 20_000)).toBeGreaterThan(19_000)
    const kept = keepAliveLockProvider(provider, { minLockAtMostFor: '1s' })
    expect(await check(createLockingTaskExecutor(kept, { lease: LEASE }), 60_000)).toBeGreaterThan(59_000)
  })

  it('lockAtLeastFor is kept after the run, and a lease never shorter than it', async () => {
    const provider = inMemoryLockProvider()
    const executor = createLockingTaskExecutor(provider, { lease: LEASE })
    await executor.executeWithLock(() => undefined, { name: 'first', lockAtMostFor: '1m' })
    let during = 0
    await executor.executeWithLock(
      () => {
        during = heldFor(provider, 'report')
      },
      { name: 'report', lockAtMostFor: '1m', lockAtLeastFor: 2_000 },
    )
    expect(during).toBeGreaterThan(1_900)
    expect(during).toBeLessThanOrEqual(2_000)
    expect(heldFor(provider, 'report')).toBeGreaterThan(1_800)
    expect(await provider.lock(lockConfiguration({ name: 'report', lockAtMostFor: '1m' }))).toBeUndefined()
  })
})
