import { afterEach, describe, expect, it, vi } from 'vitest'
import { LockConfigurationError, LockProviderError, NotLockedError } from '../../src/core/errors.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { assertLocked, extendActiveLock } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { deferred, manualClock, recordingListener } from '../helpers/fakes.ts'

const failingProvider = (message = 'connection refused'): LockProvider => ({
  lock: async (configuration) => {
    throw new LockProviderError(message, { provider: 'test', lockName: configuration.name })
  },
})

afterEach(() => {
  vi.restoreAllMocks()
})

describe('withLock', () => {
  it("runs fn under the lock with the call's arguments and this, and resolves to its result", async () => {
    const provider = inMemoryLockProvider()
    const seen: unknown[] = []
    const locked = withLock(
      provider,
      { name: 'sum', lockAtMostFor: '1m' },
      async function (this: { base: number }, a: number, b: number) {
        assertLocked()
        seen.push(provider.inspect('sum')!.lockUntil.getTime() > Date.now())
        return this.base + a + b
      },
    )
    await expect(locked.call({ base: 10 }, 1, 2)).resolves.toBe(13)
    expect(seen).toEqual([true])
  })

  it('resolves to undefined and does not run fn while another node holds the lock', async () => {
    const provider = inMemoryLockProvider()
    const holder = await provider.lock(lockConfiguration({ name: 'report', lockAtMostFor: '1m' }))
    const fn = vi.fn(() => 'ran')
    const locked = withLock(provider, { name: 'report', lockAtMostFor: '1m' }, fn)
    await expect(locked()).resolves.toBeUndefined()
    expect(fn).not.toHaveBeenCalled()
    await holder!.unlock()
    await expect(locked()).resolves.toBe('ran')
  })

  it('skips an overlapping call in the same process at once (no waiting)', async () => {
    const gate = deferred()
    const locked = withLock(inMemoryLockProvider(), { name: 'slow', lockAtMostFor: '1m' }, async () => {
      await gate.promise
      return 'first'
    })
    const first = locked()
    await expect(locked()).resolves.toBeUndefined()
    gate.resolve()
    await expect(first).resolves.toBe('first')
  })

  it('keeps the lock until lockAtLeastFor after a short run', async () => {
    const clock = manualClock(Date.UTC(2024, 0, 1))
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { clock })
    const fn = vi.fn(() => 'ok')
    const locked = withLock(executor, { name: 'tick', lockAtMostFor: '10s', lockAtLeastFor: '500ms' }, fn)
    await expect(locked()).resolves.toBe('ok')
    clock.advance(499)
    await expect(locked()).resolves.toBeUndefined()
    clock.advance(1)
    await expect(locked()).resolves.toBe('ok')
    expect(fn).toHaveBeenCalledTimes(2)
  })

  it('computes a dynamic name from the arguments: one lock per value', async () => {
    const provider = inMemoryLockProvider()
    const gate = deferred()
    const names: string[] = []
    const locked = withLock(
      provider,
      { name: (tenant: string) => `import-${tenant}`, lockAtMostFor: '1m' },
      async (tenant: string) => {
        names.push(tenant)
        await gate.promise
        return tenant
      },
    )
    const a = locked('a')
    const b = locked('b')
    await expect(locked('a')).resolves.toBeUndefined()
    gate.resolve()
    await expect(Promise.all([a, b])).resolves.toEqual(['a', 'b'])
    expect(names).toEqual(['a', 'b'])
    expect(provider.inspect('import-a')).toBeDefined()
    expect(provider.inspect('import-b')).toBeDefined()
  })

  it('a dynamic name function gets this as well', async () => {
    const provider = inMemoryLockProvider()
    const locked = withLock(
      provider,
      {
        name(this: { id: string }) {
          return `job-${this.id}`
        },
        lockAtMostFor: '1m',
      },
      function (this: { id: string }) {
        return this.id
      },
    )
    await expect(locked.call({ id: 'x' })).resolves.toBe('x')
    expect(provider.inspect('job-x')).toBeDefined()
  })

  it('supports extendActiveLock() inside fn', async () => {
    const clock = manualClock(Date.UTC(2024, 0, 1))
    const provider = inMemoryLockProvider({ clock })
    const locked = withLock(
      createLockingTaskExecutor(provider, { clock }),
      { name: 'long', lockAtMostFor: '1m' },
      async () => {
        clock.advance(30_000)
        await extendActiveLock('5m')
        return provider.inspect('long')!.lockUntil.getTime() - clock.now()
      },
    )
    await expect(locked()).resolves.toBe(300_000)
  })

  it('takes an executor and keeps its listener', async () => {
    const listener = recordingListener()
    const locked = withLock(
      createLockingTaskExecutor(inMemoryLockProvider(), { listener }),
      { name: 'job', lockAtMostFor: '1m' },
      () => 1,
    )
    await locked()
    expect(listener.log).toEqual([
      'onLockAttempt job',
      'onLockAcquired job',
      'onTaskStarted job',
      'onTaskFinished job',
      'onUnlocked job',
    ])
  })

  it('rejects with the LockProviderError when the store fails; fn does not run', async () => {
    const fn = vi.fn()
    const locked = withLock(failingProvider(), { name: 'job', lockAtMostFor: '1m' }, fn)
    const error = await locked().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as LockProviderError).lockName).toBe('job')
    expect(fn).not.toHaveBeenCalled()
  })

  it("rejects with fn's own error after releasing the lock", async () => {
    const provider = inMemoryLockProvider()
    const failure = new Error('boom')
    const locked = withLock(provider, { name: 'job', lockAtMostFor: '1m' }, () => {
      throw failure
    })
    await expect(locked()).rejects.toBe(failure)
    expect(provider.inspect('job')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
  })

  describe('onError', () => {
    it('receives a store failure instead of a rejection; the call resolves to undefined', async () => {
      const onError = vi.fn()
      const fn = vi.fn()
      const locked = withLock(failingProvider(), { name: 'job', lockAtMostFor: '1m', onError }, fn)
      await expect(locked()).resolves.toBeUndefined()
      expect(fn).not.toHaveBeenCalled()
      expect(onError).toHaveBeenCalledTimes(1)
      expect(onError.mock.calls[0]![0]).toBeInstanceOf(LockProviderError)
    })

    it("receives fn's own error", async () => {
      const onError = vi.fn()
      const failure = new Error('boom')
      const locked = withLock(inMemoryLockProvider(), { name: 'job', lockAtMostFor: '1m', onError }, async () => {
        throw failure
      })
      await expect(locked()).resolves.toBeUndefined()
      expect(onError).toHaveBeenCalledWith(failure)
    })

    it('is not called for a skipped call', async () => {
      const provider = inMemoryLockProvider()
      await provider.lock(lockConfiguration({ name: 'job', lockAtMostFor: '1m' }))
      const onError = vi.fn()
      await expect(
        withLock(provider, { name: 'job', lockAtMostFor: '1m', onError }, () => 1)(),
      ).resolves.toBeUndefined()
      expect(onError).not.toHaveBeenCalled()
    })

    it('when it throws, the call rejects with that error', async () => {
      const second = new Error('from onError')
      const locked = withLock(
        failingProvider(),
        {
          name: 'job',
          lockAtMostFor: '1m',
          onError: () => {
            throw second
          },
        },
        () => 1,
      )
      await expect(locked()).rejects.toBe(second)
    })
  })

  describe('bad input fails at definition time', () => {
    const provider = inMemoryLockProvider()
    const task = () => 1

    it.each([
      [
        'a missing name',
        { lockAtMostFor: '1m' },
        /^withLock\(\): the lock name is missing; pass name: "nightly-report"/,
      ],
      ['a blank name', { name: '  ', lockAtMostFor: '1m' }, /^withLock\(\): the lock name " {2}" is blank/],
      [
        'a non-string name',
        { name: 42, lockAtMostFor: '1m' },
        /^withLock\(\): the lock name is number 42, not a string/,
      ],
      [
        'a missing lockAtMostFor',
        { name: 'job' },
        /^withLock\(\) of lock "job": lockAtMostFor is required; set it well above/,
      ],
      [
        'a bad lockAtMostFor',
        { name: 'job', lockAtMostFor: '10 minutes' },
        /^withLock\(\) of lock "job": lockAtMostFor is invalid\. Invalid duration "10 minutes"/,
      ],
      [
        'a negative lockAtLeastFor',
        { name: 'job', lockAtMostFor: '1m', lockAtLeastFor: -1 },
        /^withLock\(\) of lock "job": lockAtLeastFor is invalid\./,
      ],
      [
        'lockAtLeastFor above lockAtMostFor',
        { name: 'job', lockAtMostFor: '1m', lockAtLeastFor: '2m' },
        /^withLock\(\) of lock "job": lockAtLeastFor \(2m\) is longer than lockAtMostFor \(1m\); make lockAtMostFor at least as long/,
      ],
      [
        'lockAtLeastFor above lockAtMostFor with a dynamic name',
        { name: () => 'x', lockAtMostFor: 1000, lockAtLeastFor: 2000 },
        /^withLock\(\): lockAtLeastFor \(2s\) is longer than lockAtMostFor \(1s\)/,
      ],
      [
        'missing options',
        undefined,
        /^withLock\(\): options are missing; pass \{ name, lockAtMostFor, lockAtLeastFor\? \}/,
      ],
      [
        'a non-function onError',
        { name: 'job', lockAtMostFor: '1m', onError: 'log' },
        /^withLock\(\) of lock "job": onError must be a function/,
      ],
    ])('%s', (_, options, message) => {
      expect(() => withLock(provider, options as never, task)).toThrow(LockConfigurationError)
      expect(() => withLock(provider, options as never, task)).toThrow(message)
    })

    it('a task that is not a function', () => {
      expect(() => withLock(provider, { name: 'job', lockAtMostFor: '1m' }, 'run' as never)).toThrow(
        /^withLock\(\) of lock "job": the task must be a function, got string/,
      )
    })

    it.each([[null], [{}], [{ lock: 1 }], ['postgres']])(
      'a provider that is neither a provider nor an executor: %j',
      (bad) => {
        expect(() => withLock(bad as never, { name: 'job', lockAtMostFor: '1m' }, task)).toThrow(
          /^withLock\(\) of lock "job": expected a LockProvider \(such as postgresLockProvider\(\{ client \}\)\) or a LockingTaskExecutor/,
        )
      },
    )
  })

  describe('a dynamic name that is bad at the call', () => {
    it('rejects with a LockConfigurationError that quotes the computed name, before touching the store', async () => {
      const lock = vi.fn(async () => undefined)
      const locked = withLock({ lock }, { name: (id: string) => id, lockAtMostFor: '1m' }, (id: string) => id)
      const error = await locked(' ').catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toMatch(/^withLock\(\): the name function returned " ": Lock name " " is blank/)
      expect(lock).not.toHaveBeenCalled()
    })

    it('a name function that throws', async () => {
      const locked = withLock(
        inMemoryLockProvider(),
        {
          name: () => {
            throw new Error('no tenant')
          },
          lockAtMostFor: '1m',
        },
        () => 1,
      )
      await expect(locked()).rejects.toThrow(/^withLock\(\): the name function threw: no tenant/)
    })

    it('goes to onError when given', async () => {
      const onError = vi.fn()
      const locked = withLock(inMemoryLockProvider(), { name: () => '', lockAtMostFor: '1m', onError }, () => 1)
      await expect(locked()).resolves.toBeUndefined()
      expect(onError.mock.calls[0]![0]).toBeInstanceOf(LockConfigurationError)
    })
  })

  it('outside the wrapped function assertLocked() still throws', async () => {
    const locked = withLock(inMemoryLockProvider(), { name: 'job', lockAtMostFor: '1m' }, () => 1)
    await locked()
    expect(() => assertLocked()).toThrow(NotLockedError)
  })
})
