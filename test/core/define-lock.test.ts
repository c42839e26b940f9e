import type { Duration } from '../../src/core/duration.ts'
import { describe, expect, it, vi } from 'vitest'
import { LockConfigurationError, LockProviderError, LockStateError } from '../../src/core/errors.ts'
import { type LockConfiguration, lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { ExtensibleLock } from '../../src/core/lock-provider.ts'
import { defineLock } from '../../src/core/define-lock.ts'
import { deferred, manualClock } from '../helpers/fakes.ts'

const clock = manualClock(Date.UTC(2024, 0, 1))
const config = (): LockConfiguration =>
  lockConfiguration({ name: 'job', lockAtMostFor: '1m', lockAtLeastFor: '10s', createdAt: new Date(clock.now()) })

function operations(extendResult: boolean | (() => Promise<boolean>) = true) {
  const unlock = vi.fn(async (_configuration: LockConfiguration) => {})
  const extend = vi.fn(async (_next: LockConfiguration, _current: LockConfiguration) =>
    typeof extendResult === 'function' ? extendResult() : extendResult,
  )
  return { unlock, extend, clock }
}

describe('defineLock', () => {
  it('unlock() passes the configuration to the provider, once', async () => {
    const ops = operations()
    const configuration = config()
    const lock = defineLock(configuration, ops)
    await lock.unlock()
    expect(ops.unlock).toHaveBeenCalledTimes(1)
    expect(ops.unlock).toHaveBeenCalledWith(configuration)
  })

  it('without an extend operation the handle has no extend()', () => {
    const lock = defineLock(config(), { unlock: async () => {} })
    expect('extend' in lock).toBe(false)
  })

  it('unlocking twice throws LockStateError naming the lock, and touches the store once', async () => {
    const ops = operations()
    const lock = defineLock(config(), ops)
    await lock.unlock()
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
    await expect(lock.unlock()).rejects.toThrow(/"job".*already unlocked or extended/)
    expect(ops.unlock).toHaveBeenCalledTimes(1)
  })

  it('extend() measures from now, passes the next and current configurations, and returns a new handle', async () => {
    const ops = operations()
    const configuration = config()
    const lock = defineLock(configuration, ops)
    clock.advance(5_000)
    const next = await lock.extend('2m', 3_000)
    expect(next).toBeDefined()
    expect(ops.extend).toHaveBeenCalledTimes(1)
    const [nextConfig, current] = ops.extend.mock.calls[0]!
    expect(current).toBe(configuration)
    expect(nextConfig).toMatchObject({ name: 'job', lockAtMostFor: 120_000, lockAtLeastFor: 3_000 })
    expect(nextConfig.createdAt.getTime()).toBe(clock.now())
    expect(nextConfig.lockAtMostUntil.getTime()).toBe(clock.now() + 120_000)

    // The new handle unlocks with the new configuration (its lockAtLeastFor applies).
    await next!.unlock()
    expect(ops.unlock).toHaveBeenCalledWith(nextConfig)
  })

  it('the new handle extends again, from the new configuration', async () => {
    const ops = operations()
    const first = defineLock(config(), ops)
    const second = (await first.extend('2m', 0))!
    const third = await second.extend('3m', 0)
    expect(third).toBeDefined()
    expect(ops.extend.mock.calls[1]![1]).toBe(ops.extend.mock.calls[0]![0])
  })

  it('after extend() the old handle can be neither unlocked nor extended', async () => {
    const ops = operations()
    const lock = defineLock(config(), ops)
    const next = await lock.extend('2m', 0)
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
    await expect(lock.extend('2m', 0)).rejects.toThrow(LockStateError)
    expect(ops.unlock).not.toHaveBeenCalled()
    expect(ops.extend).toHaveBeenCalledTimes(1)
    await next!.unlock()
    expect(ops.unlock).toHaveBeenCalledTimes(1)
  })

  it('extend() that finds the lock gone resolves to undefined and spends the handle', async () => {
    const ops = operations(false)
    const lock = defineLock(config(), ops)
    expect(await lock.extend('2m', 0)).toBeUndefined()
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
    await expect(lock.extend('2m', 0)).rejects.toThrow(LockStateError)
    expect(ops.unlock).not.toHaveBeenCalled()
  })

  it('a rejected unlock leaves the handle usable, so the unlock can be retried', async () => {
    const failure = new LockProviderError('store down')
    const ops = operations()
    ops.unlock.mockRejectedValueOnce(failure)
    const lock = defineLock(config(), ops)
    await expect(lock.unlock()).rejects.toBe(failure)
    await lock.unlock()
    expect(ops.unlock).toHaveBeenCalledTimes(2)
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
  })

  it("an unlock operation that throws, or returns a thenable or nothing, still gives a promise, and the handle's state follows it", async () => {
    const thrown = new LockProviderError('thrown synchronously')
    let calls = 0
    const lock = defineLock(config(), {
      unlock: () => {
        calls++
        if (calls === 1) throw thrown
        if (calls === 2)
          return {
            // biome-ignore lint/suspicious/noThenProperty: a thenable that rejects is what this test hands the lock.
            then: (_resolve: () => void, reject: (error: unknown) => void) => reject(new Error('thenable rejected')),
          } as never
        return undefined as never
      },
    })
    const first = lock.unlock()
    expect(first).toBeInstanceOf(Promise)
    await expect(first).rejects.toBe(thrown)
    await expect(lock.unlock()).rejects.toThrow('thenable rejected')
    await expect(lock.unlock()).resolves.toBeUndefined()
    expect(calls).toBe(3)
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
  })

  it('a rejected unlock leaves the handle extensible', async () => {
    const ops = operations()
    ops.unlock.mockRejectedValueOnce(new Error('store down'))
    const lock = defineLock(config(), ops)
    await expect(lock.unlock()).rejects.toThrow('store down')
    expect(await lock.extend('1m', 0)).toBeDefined()
  })

  it('a rejected extend leaves the handle usable', async () => {
    const failure = new LockProviderError('store down')
    const ops = operations()
    ops.extend.mockRejectedValueOnce(failure)
    const lock = defineLock(config(), ops)
    await expect(lock.extend('2m', 0)).rejects.toBe(failure)
    const next = await lock.extend('2m', 0)
    expect(next).toBeDefined()
    await next!.unlock()
    expect(ops.extend).toHaveBeenCalledTimes(2)
  })

  it('a rejected extend leaves the handle unlockable', async () => {
    const ops = operations()
    ops.extend.mockRejectedValueOnce(new Error('store down'))
    const lock = defineLock(config(), ops)
    await expect(lock.extend('2m', 0)).rejects.toThrow('store down')
    await lock.unlock()
    expect(ops.unlock).toHaveBeenCalledTimes(1)
  })

  it.each([
    ['10foo', 0],
    [-1, 0],
    ['1m', '2m'],
    ['', 0],
    ['1m', Number.NaN],
  ])(
    'invalid extend durations (%j, %j) throw LockConfigurationError before the store, and leave the handle usable',
    async (atMost, atLeast) => {
      const ops = operations()
      const lock = defineLock(config(), ops)
      await expect(lock.extend(atMost as Duration, atLeast as Duration)).rejects.toThrow(LockConfigurationError)
      expect(ops.extend).not.toHaveBeenCalled()
      expect(await lock.extend('1m', 0)).toBeDefined()
    },
  )

  it('invalid durations name the lock', async () => {
    const lock = defineLock(config(), operations())
    await expect(lock.extend('10foo' as Duration, 0)).rejects.toThrow(/"job"/)
  })

  it('a second unlock while the first is in flight throws LockStateError', async () => {
    const gate = deferred()
    const ops = operations()
    ops.unlock.mockImplementationOnce(() => gate.promise)
    const lock = defineLock(config(), ops)
    const first = lock.unlock()
    await expect(lock.unlock()).rejects.toThrow(/still in progress/)
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
    gate.resolve()
    await first
    expect(ops.unlock).toHaveBeenCalledTimes(1)
    await expect(lock.unlock()).rejects.toThrow(/already unlocked or extended/)
  })

  it('unlock or extend while an extend is in flight throws LockStateError; after it fails the handle is usable', async () => {
    const gate = deferred<boolean>()
    const ops = operations(() => gate.promise)
    const lock = defineLock(config(), ops) as ExtensibleLock
    const extending = lock.extend('2m', 0)
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
    await expect(lock.extend('2m', 0)).rejects.toThrow(LockStateError)
    gate.reject(new Error('store down'))
    await expect(extending).rejects.toThrow('store down')
    await lock.unlock()
    expect(ops.unlock).toHaveBeenCalledTimes(1)
  })

  it('when the first of two concurrent unlocks fails, the handle is usable again', async () => {
    const gate = deferred()
    const ops = operations()
    ops.unlock.mockImplementationOnce(() => gate.promise)
    const lock = defineLock(config(), ops)
    const first = lock.unlock()
    await expect(lock.unlock()).rejects.toThrow(LockStateError)
    gate.reject(new Error('store down'))
    await expect(first).rejects.toThrow('store down')
    await lock.unlock()
    expect(ops.unlock).toHaveBeenCalledTimes(2)
  })
})

describe('await using', () => {
  it('unlocks a held handle when the block ends, also when the block throws', async () => {
    const ops = operations()
    {
      await using lock = defineLock(config(), ops)
      expect(lock).toBeDefined()
      expect(ops.unlock).not.toHaveBeenCalled()
    }
    expect(ops.unlock).toHaveBeenCalledTimes(1)

    const failing = operations()
    await expect(
      (async () => {
        await using _lock = defineLock(config(), failing)
        throw new Error('task failed')
      })(),
    ).rejects.toThrow('task failed')
    expect(failing.unlock).toHaveBeenCalledTimes(1)
  })

  it('skips an undefined lock (not acquired), and does nothing for a handle already unlocked or extended', async () => {
    {
      await using nothing = undefined as ExtensibleLock | undefined
      expect(nothing).toBeUndefined()
    }
    const ops = operations()
    {
      await using lock = defineLock(config(), ops)
      await lock.unlock()
    }
    expect(ops.unlock).toHaveBeenCalledTimes(1)
    const extending = operations()
    let next: ExtensibleLock | undefined
    {
      await using lock = defineLock(config(), extending) as ExtensibleLock
      next = await lock.extend('2m', 0)
    }
    // The spent handle was not unlocked; the new one is still held.
    expect(extending.unlock).not.toHaveBeenCalled()
    await next![Symbol.asyncDispose]()
    expect(extending.unlock).toHaveBeenCalledTimes(1)
  })
})
