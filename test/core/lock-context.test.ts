import type { Duration } from '../../src/core/duration.ts'
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  LockCannotBeExtendedError,
  LockConfigurationError,
  LockExtensionError,
  LockLostError,
  LockProviderError,
  NoActiveLockError,
  NotLockedError,
} from '../../src/core/errors.ts'
import {
  type LockConfiguration,
  type LockConfigurationOptions,
  lockConfiguration,
} from '../../src/core/lock-configuration.ts'
import { assertLocked, extendActiveLock } from '../../src/core/lock-context.ts'
import type { ExtensibleLock, ExtensibleLockProvider, LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { deferred, manualClock, recordingListener, fakeHandle } from '../helpers/fakes.ts'

const opts = (name = 'job', lockAtMostFor: Duration = '10m'): LockConfigurationOptions => ({ name, lockAtMostFor })

function isLocked(): boolean {
  try {
    assertLocked()
    return true
  } catch (error) {
    expect(error).toBeInstanceOf(NotLockedError)
    return false
  }
}

/** An extensible provider whose handles are numbered; logs every call as "<op> #<handle> ..." */
function numberedProvider(
  log: string[],
  extendResult: (n: number) => Promise<boolean> = async () => true,
): ExtensibleLockProvider {
  let counter = 0
  const handle = (id: number): ExtensibleLock =>
    fakeHandle({
      async unlock() {
        log.push(`unlock #${id}`)
      },
      async extend(atMost: number | string, atLeast: number | string) {
        log.push(`extend #${id} ${atMost} ${atLeast}`)
        return (await extendResult(id)) ? handle(++counter) : undefined
      },
    })
  return {
    async lock() {
      return handle(++counter)
    },
  }
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('assertLocked', () => {
  it('throws NotLockedError outside a locked task, with a hint', () => {
    expect(() => assertLocked()).toThrow(NotLockedError)
    expect(() => assertLocked()).toThrow(/^The task is not locked/)
    expect(() => assertLocked()).toThrow(/runLocked/)
  })

  it('passes inside a task, across awaits, timers, microtasks and Promise.all branches', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const seen: boolean[] = []
    const result = await executor.executeWithLock(async () => {
      seen.push(isLocked())
      await Promise.resolve()
      seen.push(isLocked())
      await sleep(1)
      seen.push(isLocked())
      await new Promise<void>((resolve) =>
        setTimeout(() => {
          seen.push(isLocked())
          resolve()
        }, 1),
      )
      await new Promise<void>((resolve) =>
        queueMicrotask(() => {
          seen.push(isLocked())
          resolve()
        }),
      )
      await nextTurn()
      const branches = await Promise.all([
        (async () => {
          await sleep(2)
          return isLocked()
        })(),
        (async () => {
          await nextTurn()
          return isLocked()
        })(),
        Promise.resolve().then(() => isLocked()),
      ])
      seen.push(...branches)
      return 'done'
    }, opts())
    expect(result).toEqual({ executed: true, result: 'done' })
    expect(seen).toEqual([true, true, true, true, true, true, true, true])
  })

  it('passes inside a synchronous task', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    expect(await executor.executeWithLock(() => isLocked(), opts())).toEqual({ executed: true, result: true })
  })

  it('does not leak to unrelated concurrent work, nor to the caller after the task', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const taskRunning = deferred()
    const outsideChecked = deferred()
    const outside = (async () => {
      await taskRunning.promise
      const result = isLocked()
      outsideChecked.resolve()
      return result
    })()
    const locked = executor.executeWithLock(async () => {
      taskRunning.resolve()
      await outsideChecked.promise
      return isLocked()
    }, opts())
    expect(await outside).toBe(false)
    expect(await locked).toEqual({ executed: true, result: true })
    expect(isLocked()).toBe(false)
  })

  it("two concurrent tasks do not see each other's lock", async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const gate = deferred()
    const names: string[][] = []
    const task = (ctx: { configuration: LockConfiguration }) => async () => {
      await gate.promise
      // A nested call with the *other* name must go to the provider, not run re-entrantly.
      const other = ctx.configuration.name === 'a' ? 'b' : 'a'
      const nested = await executor.executeWithLock(() => 'nested', opts(other))
      names.push([ctx.configuration.name, nested.executed ? 'nested ran' : 'nested skipped'])
    }
    const a = executor.executeWithLock((ctx) => task(ctx)(), opts('a'))
    const b = executor.executeWithLock((ctx) => task(ctx)(), opts('b'))
    await nextTurn()
    gate.resolve()
    await Promise.all([a, b])
    // Each lock is held by the other task, so both nested calls are skipped.
    expect(names.sort()).toEqual([
      ['a', 'nested skipped'],
      ['b', 'nested skipped'],
    ])
  })

  it('does not pass in work the task started but that runs after the task ended', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const later = deferred<boolean>()
    await executor.executeWithLock(() => {
      setTimeout(() => later.resolve(isLocked()), 5)
    }, opts())
    expect(await later.promise).toBe(false)
  })

  it('a same-name call from work that outlived its task takes the lock again instead of running re-entrantly', async () => {
    const provider = inMemoryLockProvider()
    const listener = recordingListener()
    const executor = createLockingTaskExecutor(provider, { listener })
    const later = deferred<unknown>()
    await executor.executeWithLock(() => {
      setTimeout(() => {
        executor.executeWithLock(() => 'later', opts()).then(later.resolve, later.reject)
      }, 5)
    }, opts())
    // Another node takes the lock before the leftover timer fires.
    const other = await provider.lock(lockConfiguration(opts()))
    expect(other).toBeDefined()
    expect(await later.promise).toEqual({ executed: false, reason: 'held' })
    expect(listener.log.filter((l) => l === 'onLockAttempt job')).toHaveLength(2)
  })

  // Regression (hardening issue, defect 1): a same-name call the task did not await kept running
  // after the task returned and the lock was released, and another node ran the task meanwhile.
  it('a same-name call the task did not await runs under the lock, which is released only after it', async () => {
    const provider = inMemoryLockProvider()
    const log: string[] = []
    const executor = createLockingTaskExecutor(provider, {
      listener: recordingListener(log, ['onTaskStarted', 'onTaskFinished', 'onUnlocked']),
    })
    const nestedMayEnd = deferred()
    let nested: Promise<unknown> | undefined
    let outerSettled = false
    const outer = executor
      .executeWithLock(() => {
        nested = executor.executeWithLock(async () => {
          await nestedMayEnd.promise
          return isLocked()
        }, opts())
        return 'outer done'
      }, opts())
      .finally(() => {
        outerSettled = true
      })
    await sleep(20)
    // The outer task returned long ago, but the lock stays held while the nested run goes on.
    expect(outerSettled).toBe(false)
    expect(await provider.lock(lockConfiguration(opts()))).toBeUndefined()
    nestedMayEnd.resolve()
    expect(await outer).toEqual({ executed: true, result: 'outer done' })
    expect(await nested).toEqual({ executed: true, result: true })
    // Outer starts, nested starts, outer ends; the unlock comes only after the nested run ended.
    expect(log).toEqual([
      'onTaskStarted job',
      'onTaskStarted job',
      'onTaskFinished job',
      'onTaskFinished job',
      'onUnlocked job',
    ])
    const other = await provider.lock(lockConfiguration(opts()))
    expect(other).toBeDefined()
  })

  it('a nested run started from a timer during the task is joined too, and sees the outer signal abort when the lock is lost', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { clock })
    const seen = deferred<AbortSignal>()
    const nestedMayEnd = deferred()
    let outerSignal: AbortSignal | undefined
    let nested: Promise<unknown> | undefined
    const outer = executor.executeWithLock(
      async ({ signal }) => {
        outerSignal = signal
        await new Promise<void>((resolve) =>
          setTimeout(() => {
            nested = executor.executeWithLock(
              async ({ signal: inner }) => {
                seen.resolve(inner)
                await nestedMayEnd.promise
              },
              opts('job', 1_000),
            )
            resolve()
          }, 5),
        )
      },
      opts('job', 1_000),
    )
    const inner = await seen.promise
    expect(inner).toBe(outerSignal)
    // lockAtMostUntil passes while the nested run still runs: its signal aborts with LockLostError.
    clock.advance(1_000)
    await vi.waitFor(() => expect(inner.aborted).toBe(true), { timeout: 2_000 })
    expect(inner.reason).toBeInstanceOf(LockLostError)
    nestedMayEnd.resolve()
    await outer
    await nested
  })

  it('a same-name call after the lock was lost does not run under it: it asks the provider', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const listener = recordingListener()
    const executor = createLockingTaskExecutor(provider, { clock, listener })
    const result = await executor.executeWithLock(
      async ({ signal }) => {
        clock.advance(1_000)
        await vi.waitFor(() => expect(signal.aborted).toBe(true), { timeout: 2_000 })
        // Another node takes the expired lock; the nested call must see that.
        expect(
          await provider.lock(lockConfiguration({ ...opts('job', '1m'), createdAt: new Date(clock.now()) })),
        ).toBeDefined()
        return executor.executeWithLock(() => 'nested ran', opts('job', '1m'))
      },
      opts('job', 1_000),
    )
    expect(result).toEqual({ executed: true, result: { executed: false, reason: 'held' } })
    expect(listener.log.filter((l) => l === 'onLockAttempt job')).toHaveLength(2)
  })

  it('in work that outlived an inner task, the outer lock still counts', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const inside = deferred<boolean>()
    const extended = deferred<unknown>()
    await executor.executeWithLock(async () => {
      let leftover: Promise<void> | undefined
      await executor.executeWithLock(() => {
        leftover = sleep(5).then(async () => {
          inside.resolve(isLocked())
          await extendActiveLock('20m').then(() => extended.resolve('extended'), extended.resolve)
        })
      }, opts('inner'))
      await leftover
    }, opts('outer'))
    expect(await inside.promise).toBe(true)
    expect(await extended.promise).toBe('extended')
  })
})

describe('extendActiveLock', () => {
  it('throws NoActiveLockError outside a locked task', async () => {
    await expect(extendActiveLock('1m')).rejects.toThrow(NoActiveLockError)
    await expect(extendActiveLock('1m')).rejects.toThrow(LockExtensionError)
    await expect(extendActiveLock('1m')).rejects.toThrow(/inside the locked task/)
  })

  it('throws NoActiveLockError in work that outlived its task', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const later = deferred<unknown>()
    await executor.executeWithLock(() => {
      setTimeout(() => extendActiveLock('1m').then(later.resolve, later.resolve), 5)
    }, opts())
    expect(await later.promise).toBeInstanceOf(NoActiveLockError)
  })

  it('extends the lock from now, and the new lockAtLeastFor applies on unlock', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const listener = recordingListener()
    const executor = createLockingTaskExecutor(provider, { clock, listener })
    await executor.executeWithLock(
      async (ctx) => {
        clock.advance(1_000)
        await extendActiveLock('1h', '30m')
        expect(provider.inspect('job')!.lockUntil.getTime()).toBe(1_000 + 3_600_000)
        expect(ctx.signal.aborted).toBe(false)
      },
      opts('job', '1m'),
    )
    const extended = listener.events.filter((e) => e.hook === 'onLockExtended')
    expect(extended).toHaveLength(1)
    expect(extended[0]!.configuration).toMatchObject({
      name: 'job',
      lockAtMostFor: 3_600_000,
      lockAtLeastFor: 1_800_000,
    })
    expect(extended[0]!.configuration.createdAt.getTime()).toBe(1_000)
    // Unlocked, but held until createdAt + lockAtLeastFor of the extension.
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(1_000 + 1_800_000)
    expect(listener.log).toContain('onUnlocked job')
  })

  it('defaults lockAtLeastFor to 0', async () => {
    const log: string[] = []
    const executor = createLockingTaskExecutor(numberedProvider(log))
    await executor.executeWithLock(() => extendActiveLock(5_000), opts())
    expect(log).toEqual(['extend #1 5000 0', 'unlock #2'])
  })

  it('extends the innermost lock when nested', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { clock })
    await executor.executeWithLock(async () => {
      await executor.executeWithLock(async () => {
        await extendActiveLock('1h')
        expect(provider.inspect('inner')!.lockUntil.getTime()).toBe(3_600_000)
        expect(provider.inspect('outer')!.lockUntil.getTime()).toBe(600_000)
      }, opts('inner'))
      await extendActiveLock('2h')
      expect(provider.inspect('outer')!.lockUntil.getTime()).toBe(7_200_000)
    }, opts('outer'))
  })

  it('a re-entrant same-name call extends the outer lock', async () => {
    const log: string[] = []
    const executor = createLockingTaskExecutor(numberedProvider(log))
    await executor.executeWithLock(() => executor.executeWithLock(() => extendActiveLock('1m'), opts()), opts())
    expect(log).toEqual(['extend #1 60000 0', 'unlock #2'])
  })

  it('twice in a row extends the new handle, and the last handle is unlocked', async () => {
    const log: string[] = []
    const executor = createLockingTaskExecutor(numberedProvider(log))
    await executor.executeWithLock(async () => {
      await extendActiveLock('1m')
      await extendActiveLock('2m', '1m')
    }, opts())
    expect(log).toEqual(['extend #1 60000 0', 'extend #2 120000 60000', 'unlock #3'])
  })

  it('concurrent calls from Promise.all branches run one after another and both succeed', async () => {
    const log: string[] = []
    const gates = [deferred<boolean>(), deferred<boolean>()]
    let calls = 0
    const provider = numberedProvider(log, () => gates[calls++]!.promise)
    // Unleased: the executor's first lock would otherwise be renewed down to a lease at once.
    const executor = createLockingTaskExecutor(provider, { lease: false })
    const running = executor.executeWithLock(
      () => Promise.all([extendActiveLock('1m'), extendActiveLock('2m')]),
      opts(),
    )
    await nextTurn()
    expect(log).toEqual(['extend #1 60000 0'])
    gates[0]!.resolve(true)
    await nextTurn()
    expect(log).toEqual(['extend #1 60000 0', 'extend #2 120000 0'])
    gates[1]!.resolve(true)
    await running
    expect(log).toEqual(['extend #1 60000 0', 'extend #2 120000 0', 'unlock #3'])
  })

  it('concurrent calls on a real provider both succeed (no LockStateError from a busy handle)', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const listener = recordingListener()
    const executor = createLockingTaskExecutor(provider, { clock, listener })
    await executor.executeWithLock(async () => {
      await Promise.all([extendActiveLock('1h'), extendActiveLock('2h'), extendActiveLock('3h')])
      expect(provider.inspect('job')!.lockUntil.getTime()).toBe(3 * 3_600_000)
    }, opts())
    expect(listener.log.filter((l) => l === 'onLockExtended job')).toHaveLength(3)
    expect(listener.log).toContain('onUnlocked job')
  })

  it('a failing call in a chain does not stop the next one', async () => {
    const log: string[] = []
    const executor = createLockingTaskExecutor(numberedProvider(log))
    await executor.executeWithLock(async () => {
      const results = await Promise.allSettled([extendActiveLock('10foo' as Duration), extendActiveLock('1m')])
      expect(results[0]!.status).toBe('rejected')
      expect(results[1]!.status).toBe('fulfilled')
    }, opts())
    expect(log).toEqual(['extend #1 60000 0', 'unlock #2'])
  })

  it('validates its arguments with LockConfigurationError and leaves the lock untouched', async () => {
    const log: string[] = []
    const executor = createLockingTaskExecutor(numberedProvider(log))
    await executor.executeWithLock(async () => {
      await expect(extendActiveLock('10foo' as Duration)).rejects.toThrow(LockConfigurationError)
      await expect(extendActiveLock('1m', '2m')).rejects.toThrow(LockConfigurationError)
      await expect(extendActiveLock(-1)).rejects.toThrow(LockConfigurationError)
    }, opts())
    expect(log).toEqual(['unlock #1'])
  })

  it('an expired lock: LockCannotBeExtendedError, the signal aborts, and the spent handle is not unlocked', async () => {
    const clock = manualClock(0)
    const inner = inMemoryLockProvider({ clock })
    const unlocks: string[] = []
    // Wraps the in-memory provider to see which handles get unlocked.
    const provider: ExtensibleLockProvider = {
      async lock(configuration) {
        const wrap = (lock: ExtensibleLock, id: string): ExtensibleLock =>
          fakeHandle({
            async unlock() {
              unlocks.push(id)
              await lock.unlock()
            },
            async extend(atMost: number | string, atLeast: number | string) {
              const next = await lock.extend(atMost as Duration, atLeast as Duration)
              return next && wrap(next, `${id}'`)
            },
          })
        const lock = await inner.lock(configuration)
        return lock && wrap(lock, 'first')
      },
    }
    const listener = recordingListener()
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const executor = createLockingTaskExecutor(provider, { clock, listener })
    const result = await executor.executeWithLock(
      async ({ signal }) => {
        clock.advance(60_001)
        const error = await extendActiveLock('1m').then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error).toBeInstanceOf(LockCannotBeExtendedError)
        expect((error as Error).message).toMatch(/"job".*expired/)
        expect((error as Error).cause).toBeInstanceOf(LockLostError)
        expect(signal.aborted).toBe(true)
        expect(signal.reason).toBeInstanceOf(LockLostError)
        // A second attempt says the lock is gone, without touching the spent handle.
        await expect(extendActiveLock('1m')).rejects.toThrow(LockCannotBeExtendedError)
        return 'finished anyway'
      },
      opts('job', '1m'),
    )
    expect(result).toEqual({ executed: true, result: 'finished anyway' })
    expect(unlocks).toEqual([])
    expect(listener.log).toEqual([
      'onLockAttempt job',
      'onLockAcquired job',
      'onTaskStarted job',
      'onLockLost job',
      'onTaskFinished job',
    ])
    expect(warn).not.toHaveBeenCalled()
  })

  it("an expired lock whose task rethrows: the task's error surfaces, not a LockStateError", async () => {
    const clock = manualClock(0)
    const listener = recordingListener()
    const executor = createLockingTaskExecutor(inMemoryLockProvider({ clock }), { clock, listener })
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    await expect(
      executor.executeWithLock(
        async () => {
          clock.advance(60_001)
          await extendActiveLock('1m')
        },
        opts('job', '1m'),
      ),
    ).rejects.toThrow(LockCannotBeExtendedError)
    expect(listener.log).not.toContain('onUnlockFailed job')
    expect(warn).not.toHaveBeenCalled()
  })

  it('a provider without extend: LockCannotBeExtendedError, and the lock is still released', async () => {
    const unlocked = vi.fn(async () => {})
    const provider: LockProvider = { lock: async () => fakeHandle({ unlock: unlocked }) }
    const executor = createLockingTaskExecutor(provider)
    const result = await executor.executeWithLock(async ({ signal }) => {
      await expect(extendActiveLock('1m')).rejects.toThrow(LockCannotBeExtendedError)
      await expect(extendActiveLock('1m')).rejects.toThrow(/does not support extension/)
      return signal.aborted
    }, opts())
    expect(result).toEqual({ executed: true, result: false })
    expect(unlocked).toHaveBeenCalledTimes(1)
  })

  it('a store failure rejects with the provider error and leaves the lock as it was', async () => {
    const log: string[] = []
    let attempt = 0
    const failure = new LockProviderError('store down')
    const provider = numberedProvider(log, async () => {
      if (attempt++ === 0) throw failure
      return true
    })
    const executor = createLockingTaskExecutor(provider)
    await executor.executeWithLock(async ({ signal }) => {
      await expect(extendActiveLock('1m')).rejects.toBe(failure)
      expect(signal.aborted).toBe(false)
      await extendActiveLock('2m')
    }, opts())
    expect(log).toEqual(['extend #1 60000 0', 'extend #1 120000 0', 'unlock #2'])
  })
})
