import type { Duration } from '../../src/core/duration.ts'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError, NoActiveLockError, NotLockedError } from '../../src/core/errors.ts'
import { assertLocked, extendActiveLock } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { runLocked } from '../../src/testing/index.ts'
import { deferred, fakeHandle } from '../helpers/fakes.ts'

/** A nightly job as a user would write it: it insists on running under a lock. */
async function nightlyReport(): Promise<string> {
  assertLocked()
  await sleep(1)
  assertLocked()
  await extendActiveLock('1h', '10m')
  return 'report'
}

describe('runLocked', () => {
  it('makes assertLocked pass inside, synchronously and across awaits', async () => {
    expect(
      runLocked(() => {
        assertLocked()
        return 'sync'
      }),
    ).toBe('sync')
    await expect(runLocked(() => nightlyReport())).resolves.toBe('report')
  })

  it('the same code fails outside', async () => {
    await expect(nightlyReport()).rejects.toThrow(NotLockedError)
  })

  it('extendActiveLock resolves inside without a provider', async () => {
    await runLocked(async () => {
      await expect(extendActiveLock('1m')).resolves.toBeUndefined()
      await expect(extendActiveLock(1_000, 500)).resolves.toBeUndefined()
      await expect(Promise.all([extendActiveLock('1m'), extendActiveLock('2m')])).resolves.toEqual([
        undefined,
        undefined,
      ])
    })
  })

  it('extendActiveLock still validates its arguments inside', async () => {
    await runLocked(async () => {
      await expect(extendActiveLock('10foo' as Duration)).rejects.toThrow(LockConfigurationError)
      await expect(extendActiveLock('1m', '2m')).rejects.toThrow(LockConfigurationError)
      await expect(extendActiveLock(-1)).rejects.toThrow(LockConfigurationError)
      // A failed call does not break the next one.
      await expect(extendActiveLock('1m')).resolves.toBeUndefined()
    })
  })

  it('returns what fn returns, and propagates what it throws', async () => {
    const failure = new Error('boom')
    expect(() =>
      runLocked(() => {
        throw failure
      }),
    ).toThrow(failure)
    await expect(runLocked(async () => Promise.reject(failure))).rejects.toBe(failure)
  })

  it('leaks nothing outside: after it returns, nor to concurrent work', async () => {
    runLocked(() => {})
    expect(() => assertLocked()).toThrow(NotLockedError)
    await expect(extendActiveLock('1m')).rejects.toThrow(NoActiveLockError)

    const inside = deferred()
    const outsideChecked = deferred()
    const outside = (async () => {
      await inside.promise
      try {
        assertLocked()
        return 'locked'
      } catch (error) {
        return error
      } finally {
        outsideChecked.resolve()
      }
    })()
    await runLocked(async () => {
      inside.resolve()
      await outsideChecked.promise
      assertLocked()
    })
    expect(await outside).toBeInstanceOf(NotLockedError)
    expect(() => assertLocked()).toThrow(NotLockedError)
  })

  it('a nested executeWithLock with another name still goes to the provider', async () => {
    const calls: string[] = []
    const provider: LockProvider = {
      async lock(configuration) {
        calls.push(configuration.name)
        return fakeHandle({ unlock: async () => {} })
      },
    }
    const executor = createLockingTaskExecutor(provider)
    await runLocked(() => executor.executeWithLock(() => {}, { name: 'job', lockAtMostFor: '1m' }))
    expect(calls).toEqual(['job'])
    // With the simulated lock's own name, the call is re-entrant.
    await runLocked(() => executor.executeWithLock(() => {}, { name: 'simulated', lockAtMostFor: '1m' }), 'simulated')
    expect(calls).toEqual(['job'])
  })

  it('rejects a blank name', () => {
    expect(() => runLocked(() => {}, '  ')).toThrow(LockConfigurationError)
  })
})
