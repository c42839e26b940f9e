import { setTimeout as sleep } from 'node:timers/promises'
import { AsyncLocalStorage } from 'node:async_hooks'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { LockExecution } from '../../src/core/diagnostics.ts'
import {
  ExecutorClosedError,
  LockConfigurationError,
  LockLostError,
  LockProviderError,
  ShedLockError,
} from '../../src/core/errors.ts'
import {
  type LockConfiguration,
  type LockConfigurationOptions,
  lockConfiguration,
} from '../../src/core/lock-configuration.ts'
import { extendActiveLock } from '../../src/core/lock-context.ts'
import type { LockProvider, SimpleLock } from '../../src/core/lock-provider.ts'
import {
  createLockingTaskExecutor,
  type LockingTaskExecutorListener,
  type TaskContext,
} from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { dateClock, deferred, manualClock, recordingListener, fakeHandle } from '../helpers/fakes.ts'
import { startNode } from '../helpers/processes.ts'

/** A provider that grants every lock (or what `grant` says) and logs lock/unlock into `log`. */
function recordingProvider(log: string[] = [], grant: (configuration: LockConfiguration) => boolean = () => true) {
  const configurations: LockConfiguration[] = []
  const handles: SimpleLock[] = []
  const provider: LockProvider & { configurations: LockConfiguration[]; handles: SimpleLock[]; unlockError?: unknown } =
    {
      configurations,
      handles,
      async lock(configuration) {
        configurations.push(configuration)
        log.push(`provider.lock ${configuration.name}`)
        if (!grant(configuration)) return undefined
        const handle: SimpleLock = fakeHandle({
          unlock: vi.fn(async () => {
            log.push(`provider.unlock ${configuration.name}`)
            if (provider.unlockError !== undefined) throw provider.unlockError
          }),
        })
        handles.push(handle)
        return handle
      },
    }
  return provider
}

const opts = (name = 'job'): LockConfigurationOptions => ({ name, lockAtMostFor: '10m' })

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

describe('createLockingTaskExecutor', () => {
  it.each([[null], [undefined], [{}], [{ lock: 'no' }], ['provider'], [() => {}]])(
    'rejects %s as provider with LockConfigurationError',
    (provider) => {
      expect(() => createLockingTaskExecutor(provider as unknown as LockProvider)).toThrow(LockConfigurationError)
    },
  )
})

describe('executeWithLock', () => {
  it('runs the task and returns { executed: true, result }', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    await expect(executor.executeWithLock(() => 42, opts())).resolves.toEqual({ executed: true, result: 42 })
    await expect(executor.executeWithLock(async () => 'async', opts())).resolves.toEqual({
      executed: true,
      result: 'async',
    })
    await expect(executor.executeWithLock(() => undefined, opts())).resolves.toEqual({
      executed: true,
      result: undefined,
    })
  })

  it("skips the task when the lock is held: { executed: false, reason: 'held' }", async () => {
    const provider = inMemoryLockProvider()
    const holder = await provider.lock(lockConfiguration(opts()))
    expect(holder).toBeDefined()
    const task = vi.fn()
    const result = await createLockingTaskExecutor(provider).executeWithLock(task, opts())
    expect(result).toEqual({ executed: false, reason: 'held' })
    expect('result' in result).toBe(false)
    expect(task).not.toHaveBeenCalled()
  })

  it('gives the task a signal and the configuration it runs under', async () => {
    const provider = recordingProvider()
    const executor = createLockingTaskExecutor(provider)
    let context: TaskContext | undefined
    await executor.executeWithLock(
      (ctx) => {
        context = ctx
      },
      { name: 'job', lockAtMostFor: '10m', lockAtLeastFor: '1s' },
    )
    expect(context!.signal).toBeInstanceOf(AbortSignal)
    expect(context!.signal.aborted).toBe(false)
    expect(context!.configuration).toBe(provider.configurations[0])
    expect(context!.configuration).toMatchObject({ name: 'job', lockAtMostFor: 600_000, lockAtLeastFor: 1_000 })
  })

  it('uses a ready LockConfiguration as given', async () => {
    const provider = recordingProvider()
    const configuration = lockConfiguration(opts())
    await createLockingTaskExecutor(provider).executeWithLock(() => {}, configuration)
    expect(provider.configurations[0]).toBe(configuration)
  })

  it('takes a fresh createdAt from the clock for each call with an options object', async () => {
    const clock = manualClock(1_000_000)
    const provider = recordingProvider()
    const executor = createLockingTaskExecutor(provider, { clock })
    const options = { name: 'job', lockAtMostFor: '1m' } satisfies LockConfigurationOptions
    await executor.executeWithLock(() => {}, options)
    clock.advance(5_000)
    await executor.executeWithLock(() => {}, options)
    const [first, second] = provider.configurations
    expect(first!.createdAt.getTime()).toBe(1_000_000)
    expect(second!.createdAt.getTime()).toBe(1_005_000)
    expect(second!.lockAtMostUntil.getTime()).toBe(1_065_000)
    expect(options).toEqual({ name: 'job', lockAtMostFor: '1m' })
  })

  // Regression (hardening issue, defect 4): a configuration built once and passed again after its
  // lockAtMostUntil made providers write an already-expired lock, and two nodes ran together.
  it('refuses a configuration kept past its lockAtMostUntil, before the provider is asked', async () => {
    const clock = manualClock(1_000_000)
    const provider = recordingProvider()
    const executor = createLockingTaskExecutor(provider, { clock })
    const configuration = lockConfiguration({ name: 'nightly', lockAtMostFor: '1m', createdAt: new Date(clock.now()) })
    await executor.executeWithLock(() => {}, configuration)
    clock.advance(60_000)
    const task = vi.fn()
    const error = await executor.executeWithLock(task, configuration).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockConfigurationError)
    expect((error as Error).message).toMatch(/^Lock "nightly": its configuration expired at 1970-01-01T00:17:40\.000Z/)
    expect((error as Error).message).toContain('takes a fresh createdAt for every call')
    expect(task).not.toHaveBeenCalled()
    expect(provider.configurations).toHaveLength(1)
    // Options take a fresh createdAt each call, so the same options keep working.
    await expect(executor.executeWithLock(() => 'ran', { name: 'nightly', lockAtMostFor: '1m' })).resolves.toEqual({
      executed: true,
      result: 'ran',
    })
  })

  it.each([
    ['a blank name and a negative duration', { name: '', lockAtMostFor: -5 }],
    ['lockAtMostFor 0', { name: 'nightly', lockAtMostFor: 0 }],
    ['a copy of a real configuration with its name blanked', { name: ' ' }],
  ])('refuses an object that only looks like a configuration (%s) before the provider is asked', async (_, changes) => {
    const provider = recordingProvider()
    const lookAlike = Object.freeze({ ...lockConfiguration(opts()), ...changes }) as LockConfiguration
    const task = vi.fn()
    await expect(createLockingTaskExecutor(provider).executeWithLock(task, lookAlike)).rejects.toThrow(
      LockConfigurationError,
    )
    expect(task).not.toHaveBeenCalled()
    expect(provider.configurations).toHaveLength(0)
  })

  it('honours createdAt given in the options', async () => {
    const provider = recordingProvider()
    const createdAt = new Date('2024-01-01T00:00:00Z')
    await createLockingTaskExecutor(provider, { clock: manualClock(0) }).executeWithLock(() => {}, {
      ...opts(),
      createdAt,
    })
    expect(provider.configurations[0]!.createdAt).toEqual(createdAt)
  })

  it('re-throws the task error after unlocking: another executor can lock at once', async () => {
    const provider = inMemoryLockProvider()
    const listener = recordingListener()
    const failure = new Error('task failed')
    await expect(
      createLockingTaskExecutor(provider, { listener }).executeWithLock(() => {
        throw failure
      }, opts()),
    ).rejects.toBe(failure)
    expect(listener.log).toEqual([
      'onLockAttempt job',
      'onLockAcquired job',
      'onTaskStarted job',
      'onTaskFinished job',
      'onUnlocked job',
    ])
    expect(listener.events.find((e) => e.hook === 'onTaskFinished')!.extra).toMatchObject({
      failed: true,
      error: failure,
    })
    await expect(createLockingTaskExecutor(provider).executeWithLock(() => 'second', opts())).resolves.toEqual({
      executed: true,
      result: 'second',
    })
  })

  it('re-throws an async task rejection (even a non-Error) after unlocking', async () => {
    const provider = recordingProvider()
    await expect(
      createLockingTaskExecutor(provider).executeWithLock(async () => {
        await Promise.resolve()
        throw 'plain string'
      }, opts()),
    ).rejects.toBe('plain string')
    expect(provider.handles[0]!.unlock).toHaveBeenCalledTimes(1)
  })

  it('an unlock error never hides the task error and goes to onUnlockFailed', async () => {
    const provider = recordingProvider()
    const unlockError = new LockProviderError('store down')
    provider.unlockError = unlockError
    const listener = recordingListener()
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const failure = new Error('task failed')
    await expect(
      createLockingTaskExecutor(provider, { listener }).executeWithLock(() => {
        throw failure
      }, opts()),
    ).rejects.toBe(failure)
    const unlockFailed = listener.events.filter((e) => e.hook === 'onUnlockFailed')
    expect(unlockFailed).toHaveLength(1)
    expect(unlockFailed[0]!.extra).toBe(unlockError)
    expect(listener.log).not.toContain('onUnlocked job')
    expect(warn).not.toHaveBeenCalled()
  })

  it('an unlock error after success resolves with the result and is reported to onUnlockFailed', async () => {
    const provider = recordingProvider()
    provider.unlockError = new Error('store down')
    const listener = recordingListener()
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    await expect(
      createLockingTaskExecutor(provider, { listener }).executeWithLock(() => 'done', opts()),
    ).resolves.toEqual({ executed: true, result: 'done' })
    expect(listener.events.filter((e) => e.hook === 'onUnlockFailed').map((e) => e.extra)).toEqual([
      provider.unlockError,
    ])
    expect(warn).not.toHaveBeenCalled()
  })

  it('without an onUnlockFailed hook an unlock error becomes a ShedLockWarning', async () => {
    const provider = recordingProvider()
    provider.unlockError = new Error('store down')
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const listener = recordingListener([], ['onUnlocked'])
    await expect(
      createLockingTaskExecutor(provider, { listener }).executeWithLock(() => 'done', opts('nightly')),
    ).resolves.toEqual({
      executed: true,
      result: 'done',
    })
    expect(warn).toHaveBeenCalledTimes(1)
    const [message, type] = warn.mock.calls[0]! as unknown as [string, string]
    expect(type).toBe('ShedLockWarning')
    expect(message).toContain('"nightly"')
    expect(message).toContain('store down')
    expect(listener.log).toEqual([])
  })

  it('with no listener at all an unlock error becomes a ShedLockWarning', async () => {
    const provider = recordingProvider()
    provider.unlockError = new Error('store down')
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    await expect(createLockingTaskExecutor(provider).executeWithLock(() => 1, opts())).resolves.toEqual({
      executed: true,
      result: 1,
    })
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('store down'), 'ShedLockWarning')
  })

  describe('when the provider rejects', () => {
    it('passes a LockProviderError through, reports onLockFailed and does not run the task', async () => {
      const failure = new LockProviderError('connection refused', { provider: 'test', lockName: 'job' })
      const provider: LockProvider = { lock: async () => Promise.reject(failure) }
      const listener = recordingListener()
      const task = vi.fn()
      await expect(createLockingTaskExecutor(provider, { listener }).executeWithLock(task, opts())).rejects.toBe(
        failure,
      )
      expect(task).not.toHaveBeenCalled()
      expect(listener.log).toEqual(['onLockAttempt job', 'onLockFailed job'])
      expect(listener.events[1]!.extra).toBe(failure)
    })

    it('wraps any other error of a third-party provider in a LockProviderError with cause and lock name', async () => {
      const cause = new TypeError('socket hang up')
      const provider: LockProvider = {
        lock: async () => {
          throw cause
        },
      }
      const listener = recordingListener()
      const task = vi.fn()
      const error = await createLockingTaskExecutor(provider, { listener })
        .executeWithLock(task, opts('nightly'))
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(LockProviderError)
      expect(error).toBeInstanceOf(ShedLockError)
      expect((error as LockProviderError).cause).toBe(cause)
      expect((error as LockProviderError).lockName).toBe('nightly')
      expect((error as Error).message).toContain('"nightly"')
      expect((error as Error).message).toContain('socket hang up')
      expect(task).not.toHaveBeenCalled()
      expect(listener.events.find((e) => e.hook === 'onLockFailed')!.extra).toBe(error)
    })

    it('wraps a synchronous throw from lock() too', async () => {
      const provider = {
        lock: () => {
          throw new Error('sync')
        },
      } as unknown as LockProvider
      await expect(createLockingTaskExecutor(provider).executeWithLock(() => {}, opts())).rejects.toThrow(
        LockProviderError,
      )
    })
  })

  describe('listener', () => {
    it('acquired: attempt, acquired, taskStarted, taskFinished, unlocked', async () => {
      const log: string[] = []
      const provider = recordingProvider(log)
      const listener = recordingListener(log)
      await createLockingTaskExecutor(provider, { listener }).executeWithLock(() => {
        log.push('task')
      }, opts())
      expect(log).toEqual([
        'onLockAttempt job',
        'provider.lock job',
        'onLockAcquired job',
        'onTaskStarted job',
        'task',
        'onTaskFinished job',
        'provider.unlock job',
        'onUnlocked job',
      ])
      const finished = listener.events.find((e) => e.hook === 'onTaskFinished')!.extra as {
        durationMs: number
        failed: boolean
      }
      expect(finished.failed).toBe(false)
      expect(finished.durationMs).toBeGreaterThanOrEqual(0)
    })

    it('not acquired: attempt, notAcquired', async () => {
      const log: string[] = []
      const listener = recordingListener(log)
      await createLockingTaskExecutor(
        recordingProvider(log, () => false),
        { listener },
      ).executeWithLock(() => {
        log.push('task')
      }, opts())
      expect(log).toEqual(['onLockAttempt job', 'provider.lock job', 'onLockNotAcquired job'])
    })

    it('re-entrant same name: one attempt and lock, two started/finished, one unlock', async () => {
      const log: string[] = []
      const provider = recordingProvider(log)
      const listener = recordingListener(log)
      const executor = createLockingTaskExecutor(provider, { listener })
      let innerContext: TaskContext | undefined
      let outerContext: TaskContext | undefined
      const result = await executor.executeWithLock(async (outer) => {
        outerContext = outer
        const inner = await executor.executeWithLock((ctx) => {
          innerContext = ctx
          log.push('inner task')
          return 'inner'
        }, opts())
        return inner
      }, opts())
      expect(result).toEqual({ executed: true, result: { executed: true, result: 'inner' } })
      expect(log).toEqual([
        'onLockAttempt job',
        'provider.lock job',
        'onLockAcquired job',
        'onTaskStarted job',
        'onTaskStarted job',
        'inner task',
        'onTaskFinished job',
        'onTaskFinished job',
        'provider.unlock job',
        'onUnlocked job',
      ])
      expect(innerContext!.signal).toBe(outerContext!.signal)
      expect(innerContext!.configuration).toBe(outerContext!.configuration)
    })

    it('re-entrancy holds across executors and for a second executor on another provider', async () => {
      const first = recordingProvider()
      const second = recordingProvider()
      await createLockingTaskExecutor(first).executeWithLock(
        () => createLockingTaskExecutor(second).executeWithLock(() => {}, opts()),
        opts(),
      )
      expect(first.configurations).toHaveLength(1)
      expect(second.configurations).toHaveLength(0)
    })

    it('different names nest: the inner lock is released before the outer task finishes', async () => {
      const log: string[] = []
      const provider = recordingProvider(log)
      const listener = recordingListener(log)
      const executor = createLockingTaskExecutor(provider, { listener })
      await executor.executeWithLock(
        () => executor.executeWithLock(() => log.push('inner task'), opts('inner')),
        opts('outer'),
      )
      expect(log).toEqual([
        'onLockAttempt outer',
        'provider.lock outer',
        'onLockAcquired outer',
        'onTaskStarted outer',
        'onLockAttempt inner',
        'provider.lock inner',
        'onLockAcquired inner',
        'onTaskStarted inner',
        'inner task',
        'onTaskFinished inner',
        'provider.unlock inner',
        'onUnlocked inner',
        'onTaskFinished outer',
        'provider.unlock outer',
        'onUnlocked outer',
      ])
    })

    it('a throwing or rejecting listener never breaks a task', async () => {
      const boom = () => {
        throw new Error('listener throws')
      }
      const reject = async () => {
        throw new Error('listener rejects')
      }
      const provider = recordingProvider()
      const unhandled = vi.fn()
      process.on('unhandledRejection', unhandled)
      try {
        for (const hook of [boom, reject]) {
          const listener = {
            onLockAttempt: hook,
            onLockAcquired: hook,
            onLockNotAcquired: hook,
            onTaskStarted: hook,
            onTaskFinished: hook,
            onUnlocked: hook,
            onUnlockFailed: hook,
          }
          const executor = createLockingTaskExecutor(provider, { listener })
          await expect(executor.executeWithLock(() => 'ok', opts())).resolves.toEqual({ executed: true, result: 'ok' })
          const failing = new Error('task')
          await expect(
            executor.executeWithLock(() => {
              throw failing
            }, opts()),
          ).rejects.toBe(failing)
          await expect(
            createLockingTaskExecutor(
              recordingProvider([], () => false),
              { listener },
            ).executeWithLock(() => 1, opts()),
          ).resolves.toEqual({ executed: false, reason: 'held' })
          provider.unlockError = new Error('unlock')
          await expect(executor.executeWithLock(() => 'still ok', opts())).resolves.toEqual({
            executed: true,
            result: 'still ok',
          })
          provider.unlockError = undefined
        }
        const failure = new LockProviderError('down')
        await expect(
          createLockingTaskExecutor(
            { lock: () => Promise.reject(failure) },
            { listener: { onLockAttempt: boom, onLockFailed: boom } },
          ).executeWithLock(() => 1, opts()),
        ).rejects.toBe(failure)
        // Let rejected listener promises settle.
        await new Promise((resolve) => setImmediate(resolve))
        expect(unhandled).not.toHaveBeenCalled()
      } finally {
        process.off('unhandledRejection', unhandled)
      }
    })

    it('calls hooks with the listener as this', async () => {
      const seen: unknown[] = []
      const listener = {
        onLockAcquired(this: unknown) {
          seen.push(this)
        },
      }
      await createLockingTaskExecutor(recordingProvider(), { listener }).executeWithLock(() => {}, opts())
      expect(seen).toEqual([listener])
    })
  })

  it('keeps the lock until lockAtLeastFor after an early finish', async () => {
    const clock = manualClock()
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { clock })
    const options = { name: 'job', lockAtMostFor: '10s', lockAtLeastFor: '5s' } satisfies LockConfigurationOptions
    expect(await executor.executeWithLock(() => 'first', options)).toEqual({ executed: true, result: 'first' })
    clock.advance(1)
    expect(await executor.executeWithLock(() => 'too soon', options)).toEqual({ executed: false, reason: 'held' })
    clock.advance(4_998)
    expect(await createLockingTaskExecutor(provider, { clock }).executeWithLock(() => 'too soon', options)).toEqual({
      executed: false,
      reason: 'held',
    })
    clock.advance(1)
    expect(await executor.executeWithLock(() => 'again', options)).toEqual({ executed: true, result: 'again' })
  })

  describe('validation', () => {
    it.each([[undefined], [null], ['task'], [{}]])(
      'a non-function task %s is a LockConfigurationError, before the store',
      async (task) => {
        const provider = recordingProvider()
        await expect(
          createLockingTaskExecutor(provider).executeWithLock(task as unknown as () => void, opts()),
        ).rejects.toThrow(LockConfigurationError)
        expect(provider.configurations).toHaveLength(0)
      },
    )

    it.each([
      [{ name: '', lockAtMostFor: '1m' }],
      [{ name: 'job', lockAtMostFor: '10foo' }],
      [{ name: 'job', lockAtMostFor: '1m', lockAtLeastFor: '2m' }],
      [{ name: 'job' }],
      [undefined],
      [null],
    ])('invalid options %j are a LockConfigurationError, before the store', async (options) => {
      const provider = recordingProvider()
      const listener = recordingListener()
      const task = vi.fn()
      await expect(
        createLockingTaskExecutor(provider, { listener }).executeWithLock(task, options as never),
      ).rejects.toThrow(LockConfigurationError)
      expect(provider.configurations).toHaveLength(0)
      expect(task).not.toHaveBeenCalled()
      expect(listener.log).toEqual([])
    })
  })

  describe('lock-lost watchdog', () => {
    it('aborts the signal with LockLostError at lockAtMostUntil and reports onLockLost', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
      const provider = inMemoryLockProvider({ clock: dateClock })
      const listener = recordingListener()
      const executor = createLockingTaskExecutor(provider, { listener, clock: dateClock })
      const release = deferred()
      let signal: AbortSignal | undefined
      const running = executor.executeWithLock(
        async (ctx) => {
          signal = ctx.signal
          await release.promise
          return ctx.signal.aborted
        },
        { name: 'job', lockAtMostFor: '10s' },
      )
      await vi.advanceTimersByTimeAsync(9_999)
      expect(signal!.aborted).toBe(false)
      expect(listener.log).not.toContain('onLockLost job')
      await vi.advanceTimersByTimeAsync(1)
      expect(signal!.aborted).toBe(true)
      expect(signal!.reason).toBeInstanceOf(LockLostError)
      expect((signal!.reason as Error).message).toContain('"job"')
      const lost = listener.events.filter((e) => e.hook === 'onLockLost')
      expect(lost).toHaveLength(1)
      expect(lost[0]!.extra).toBe(signal!.reason)
      release.resolve()
      await expect(running).resolves.toEqual({ executed: true, result: true })
    })

    it('does not abort after the task finished', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
      const listener = recordingListener()
      const executor = createLockingTaskExecutor(inMemoryLockProvider({ clock: dateClock }), {
        listener,
        clock: dateClock,
      })
      let signal: AbortSignal | undefined
      await executor.executeWithLock(
        (ctx) => {
          signal = ctx.signal
        },
        { name: 'job', lockAtMostFor: '10s' },
      )
      // The watchdog is cancelled; the deadlines' shared timer (unref'd) may fire once more, to find nothing.
      await vi.advanceTimersByTimeAsync(60_000)
      expect(signal!.aborted).toBe(false)
      expect(listener.log).not.toContain('onLockLost job')
      expect(vi.getTimerCount()).toBe(0)
    })

    it('does not abort after a failed task either', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
      const executor = createLockingTaskExecutor(inMemoryLockProvider({ clock: dateClock }), { clock: dateClock })
      let signal: AbortSignal | undefined
      await expect(
        executor.executeWithLock(
          (ctx) => {
            signal = ctx.signal
            throw new Error('failed')
          },
          { name: 'job', lockAtMostFor: '10s' },
        ),
      ).rejects.toThrow('failed')
      await vi.advanceTimersByTimeAsync(60_000)
      expect(signal!.aborted).toBe(false)
    })

    it('extendActiveLock moves the deadline', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
      const provider = inMemoryLockProvider({ clock: dateClock })
      const listener = recordingListener()
      const executor = createLockingTaskExecutor(provider, { listener, clock: dateClock })
      const extendNow = deferred()
      const release = deferred()
      let signal: AbortSignal | undefined
      const running = executor.executeWithLock(
        async (ctx) => {
          signal = ctx.signal
          await extendNow.promise
          await extendActiveLock('10s')
          await release.promise
        },
        { name: 'job', lockAtMostFor: '10s' },
      )
      await vi.advanceTimersByTimeAsync(6_000)
      extendNow.resolve()
      await vi.advanceTimersByTimeAsync(0)
      expect(
        listener.events
          .filter((e) => e.hook === 'onLockExtended')
          .map((e) => e.configuration.lockAtMostUntil.getTime()),
      ).toEqual([Date.now() + 10_000])
      // The original deadline (10 s) passes: no abort.
      await vi.advanceTimersByTimeAsync(9_999)
      expect(signal!.aborted).toBe(false)
      // The extended one (6 s + 10 s) does.
      await vi.advanceTimersByTimeAsync(1)
      expect(signal!.aborted).toBe(true)
      expect(signal!.reason).toBeInstanceOf(LockLostError)
      expect(listener.log.filter((l) => l === 'onLockLost job')).toHaveLength(1)
      release.resolve()
      await running
    })

    it('re-arms when the timer fires early by the clock', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
      const clock = manualClock(0)
      const executor = createLockingTaskExecutor(inMemoryLockProvider({ clock }), { clock })
      const release = deferred()
      let signal: AbortSignal | undefined
      const running = executor.executeWithLock(
        async (ctx) => {
          signal = ctx.signal
          await release.promise
        },
        { name: 'job', lockAtMostFor: '10s' },
      )
      await vi.advanceTimersByTimeAsync(0)
      // The timer fires, but the injected clock says only 4 s passed.
      clock.set(4_000)
      await vi.advanceTimersByTimeAsync(10_000)
      expect(signal!.aborted).toBe(false)
      clock.set(10_000)
      await vi.advanceTimersByTimeAsync(6_000)
      expect(signal!.aborted).toBe(true)
      release.resolve()
      await running
    })
  })
})

describe('the execution argument of listener hooks', () => {
  it('every hook of one call gets the same frozen execution, last; the detail hooks keep their detail second', async () => {
    const calls: Array<{ hook: string; args: unknown[] }> = []
    const hooks = [
      'onLockAttempt',
      'onLockAcquired',
      'onTaskStarted',
      'onTaskFinished',
      'onUnlocked',
      'onLockExtended',
    ] as const
    const listener: LockingTaskExecutorListener = {}
    for (const hook of hooks)
      (listener as Record<string, unknown>)[hook] = (...args: unknown[]) => calls.push({ hook, args })
    const provider = Object.assign(inMemoryLockProvider(), { name: 'memory' })
    await createLockingTaskExecutor(provider, { listener }).executeWithLock(() => extendActiveLock('20m'), opts())
    expect(calls.map((c) => c.hook)).toEqual([
      'onLockAttempt',
      'onLockAcquired',
      'onTaskStarted',
      'onLockExtended',
      'onTaskFinished',
      'onUnlocked',
    ])
    const execution = calls[0]!.args[1] as LockExecution
    expect(execution).toEqual({ id: expect.any(Number), provider: 'memory', reentrant: false })
    expect(Object.isFrozen(execution)).toBe(true)
    for (const { hook, args } of calls) {
      expect(args.at(-1), hook).toBe(execution)
      expect(args, hook).toHaveLength(hook === 'onTaskFinished' ? 3 : 2)
    }
    expect(calls.find((c) => c.hook === 'onTaskFinished')!.args[1]).toMatchObject({ failed: false })
  })

  it('onLockFailed, onUnlockFailed and onLockLost get (configuration, error, execution)', async () => {
    const seen: Record<string, unknown[]> = {}
    const listener: LockingTaskExecutorListener = {
      onLockFailed: (...args) => (seen.onLockFailed = args),
      onUnlockFailed: (...args) => (seen.onUnlockFailed = args),
      onLockLost: (...args) => (seen.onLockLost = args),
    }
    const failure = new LockProviderError('down')
    await expect(
      createLockingTaskExecutor({ lock: () => Promise.reject(failure) }, { listener }).executeWithLock(() => 1, opts()),
    ).rejects.toBe(failure)
    expect(seen.onLockFailed![1]).toBe(failure)
    expect((seen.onLockFailed![2] as LockExecution).reentrant).toBe(false)

    const unlockError = new Error('store down')
    const expiring: LockProvider = {
      lock: async () => fakeHandle({ unlock: () => Promise.reject(unlockError), extend: async () => undefined }),
    }
    await createLockingTaskExecutor(expiring, { listener }).executeWithLock(
      () => extendActiveLock('1m').catch(() => undefined),
      opts(),
    )
    expect(seen.onLockLost![1]).toBeInstanceOf(LockLostError)
    // The lost handle is not released, so no unlock error here...
    expect(seen.onUnlockFailed).toBeUndefined()
    const failing: LockProvider = { lock: async () => fakeHandle({ unlock: () => Promise.reject(unlockError) }) }
    await createLockingTaskExecutor(failing, { listener }).executeWithLock(() => 1, opts())
    // ...but a failed release is.
    expect(seen.onUnlockFailed![1]).toBe(unlockError)
    expect(seen.onUnlockFailed![2]).not.toBe(seen.onLockLost![2])
  })

  it('each call has its own execution with a larger id; a re-entrant call is marked and has no provider call', async () => {
    const executions: Array<[string, LockExecution]> = []
    const listener: LockingTaskExecutorListener = {
      onLockAttempt: (_c, execution) => executions.push(['attempt', execution]),
      onTaskStarted: (_c, execution) => executions.push(['started', execution]),
    }
    const provider = recordingProvider()
    const executor = createLockingTaskExecutor(provider, { listener })
    await executor.executeWithLock(() => executor.executeWithLock(() => {}, opts()), opts())
    await executor.executeWithLock(() => {}, opts())
    expect(executions.map(([what, e]) => [what, e.reentrant])).toEqual([
      ['attempt', false],
      ['started', false],
      ['started', true],
      ['attempt', false],
      ['started', false],
    ])
    const ids = executions.map(([, e]) => e.id)
    expect(ids[0]).toBe(ids[1])
    expect(ids[2]).toBeGreaterThan(ids[1]!)
    expect(ids[3]).toBeGreaterThan(ids[2]!)
    expect(executions[0]![1].provider).toBeUndefined()
    expect(provider.configurations).toHaveLength(2)
  })
})

describe('aroundTask', () => {
  it('runs the task, and every await in it, inside the context the hook opens', async () => {
    const storage = new AsyncLocalStorage<string>()
    const seen: Array<string | undefined> = []
    const listener: LockingTaskExecutorListener = {
      aroundTask: (configuration, start) => storage.run(`ctx ${configuration.name}`, start),
      onTaskFinished: () => seen.push(`finished in ${storage.getStore()}`),
    }
    const result = await createLockingTaskExecutor(inMemoryLockProvider(), { listener }).executeWithLock(async () => {
      seen.push(storage.getStore())
      await new Promise((resolve) => setTimeout(resolve, 1))
      seen.push(storage.getStore())
      return 'done'
    }, opts())
    expect(result).toEqual({ executed: true, result: 'done' })
    // The hook wraps the task only, not the executor's own events after it.
    expect(seen).toEqual(['ctx job', 'ctx job', 'finished in undefined'])
  })

  it('gets the configuration, a start function and the execution; re-entrant calls too', async () => {
    const calls: Array<[string, boolean]> = []
    const listener: LockingTaskExecutorListener = {
      aroundTask: (configuration, start, execution) => {
        calls.push([configuration.name, execution.reentrant])
        start()
      },
    }
    const executor = createLockingTaskExecutor(recordingProvider(), { listener })
    await executor.executeWithLock(() => executor.executeWithLock(() => {}, opts()), opts())
    expect(calls).toEqual([
      ['job', false],
      ['job', true],
    ])
  })

  it.each([
    ['never calls start', () => {}],
    [
      'throws before start',
      () => {
        throw new Error('hook')
      },
    ],
    [
      'returns a rejected promise without start',
      async () => {
        throw new Error('hook')
      },
    ],
    [
      'calls start twice',
      (_c: LockConfiguration, start: () => void) => {
        start()
        start()
      },
    ],
    [
      'throws after start',
      (_c: LockConfiguration, start: () => void) => {
        start()
        throw new Error('hook')
      },
    ],
  ])('a hook that %s: the task runs exactly once and its result is returned', async (_what, aroundTask) => {
    const task = vi.fn(() => 'result')
    const listener = recordingListener()
    Object.assign(listener, { aroundTask })
    await expect(
      createLockingTaskExecutor(inMemoryLockProvider(), { listener }).executeWithLock(task, opts()),
    ).resolves.toEqual({
      executed: true,
      result: 'result',
    })
    expect(task).toHaveBeenCalledTimes(1)
    expect(listener.log).toEqual([
      'onLockAttempt job',
      'onLockAcquired job',
      'onTaskStarted job',
      'onTaskFinished job',
      'onUnlocked job',
    ])
  })

  it('a start called later, after the hook returned, does nothing: the executor already started the task', async () => {
    let later: (() => void) | undefined
    const task = vi.fn()
    const listener: LockingTaskExecutorListener = {
      aroundTask: (_c, start) => {
        later = start
      },
    }
    await createLockingTaskExecutor(inMemoryLockProvider(), { listener }).executeWithLock(task, opts())
    later!()
    expect(task).toHaveBeenCalledTimes(1)
  })

  it("a task's synchronous throw inside start reaches the caller, not the hook, and the lock is released", async () => {
    const boom = new Error('task')
    const hookSaw: unknown[] = []
    const listener = recordingListener()
    Object.assign(listener, {
      aroundTask: (_c: LockConfiguration, start: () => void) => {
        try {
          start()
        } catch (error) {
          hookSaw.push(error)
        }
      },
    })
    const provider = recordingProvider()
    await expect(
      createLockingTaskExecutor(provider, { listener }).executeWithLock(() => {
        throw boom
      }, opts()),
    ).rejects.toBe(boom)
    expect(hookSaw).toEqual([])
    expect(listener.events.find((e) => e.hook === 'onTaskFinished')!.extra).toMatchObject({ failed: true, error: boom })
    expect(provider.handles[0]!.unlock).toHaveBeenCalledTimes(1)
  })
})

// util.debuglog reads NODE_DEBUG when the module loads, so each case runs in a child process
// with the built package (`npm test` builds first; while developing, `npm run build`).
describe('NODE_DEBUG=shedlock', () => {
  const dist = (file: string) => JSON.stringify(new URL(`../../dist/${file}`, import.meta.url).href)
  const script = `
    import { createLockingTaskExecutor } from ${dist('core/locking-task-executor.js')}
    import { lockConfiguration } from ${dist('core/lock-configuration.js')}
    import { extendActiveLock } from ${dist('core/lock-context.js')}
    import { inMemoryLockProvider } from ${dist('providers/in-memory/index.js')}
    const opts = (name, more) => ({ name, lockAtMostFor: '10m', ...more })
    const provider = Object.assign(inMemoryLockProvider(), { name: 'memory' })
    const executor = createLockingTaskExecutor(provider)
    await executor.executeWithLock(() => {}, opts('ran', { lockAtLeastFor: '1s' }))
    await provider.lock(lockConfiguration(opts('held')))
    await executor.executeWithLock(() => {}, opts('held'))
    await createLockingTaskExecutor({ lock: async () => { throw new Error('connection refused') } }).executeWithLock(() => {}, opts('down')).catch(() => {})
    await executor.executeWithLock(() => executor.executeWithLock(() => {}, opts('nested')), opts('nested'))
    await executor.executeWithLock(() => extendActiveLock('20m'), opts('extended'))
    const expiring = { lock: async () => ({ unlock: async () => {}, extend: async () => undefined }) }
    await createLockingTaskExecutor(expiring).executeWithLock(() => extendActiveLock('1m').catch(() => {}), opts('lost'))
    const stuck = { lock: async () => ({ unlock: async () => { throw new Error('store down') } }) }
    await createLockingTaskExecutor(stuck, { listener: { onUnlockFailed() {} } }).executeWithLock(() => {}, opts('stuck'))
  `

  function run(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
    const built = fileURLToPath(new URL('../../dist/core/locking-task-executor.js', import.meta.url))
    if (!existsSync(built)) throw new Error(`${built} is missing: run "npm run build" first`)
    return startNode(['--input-type=module', '-e', script], { env }).done
  }

  const ISO = String.raw`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`

  it('logs one line per decision: acquired, skipped, failed, re-entrant, extended, lost, released or not', async () => {
    const { code, stderr } = await run({ NODE_DEBUG: 'shedlock' })
    expect(code).toBe(0)
    const lines = stderr.split('\n').filter((line) => line !== '')
    const prefix = `SHEDLOCK ${'\\d+'}: `
    for (const line of lines) expect(line).toMatch(new RegExp(`^${prefix}Lock "[a-z]+" `))
    const of = (name: string) =>
      lines.filter((line) => line.includes(`Lock "${name}"`)).map((line) => line.replace(new RegExp(`^${prefix}`), ''))
    // The in-memory provider's fencing token, where the provider hands out one.
    const acquired = (name: string, provider = ' from memory with fencing token 1') =>
      new RegExp(`^Lock "${name}" acquired${provider}; held at most until ${ISO}, at least until ${ISO}$`)
    const released = (name: string, kept = '') => new RegExp(`^Lock "${name}" released after the task${kept}$`)

    expect(of('ran')).toHaveLength(2)
    expect(of('ran')[0]).toMatch(acquired('ran'))
    expect(of('ran')[1]).toMatch(released('ran', `; held until ${ISO} \\(lockAtLeastFor\\)`))
    expect(of('held')).toEqual(['Lock "held" not acquired: another node holds it; the task is skipped'])
    expect(of('down')).toEqual([
      'Lock "down" could not be acquired, the task does not run: Could not acquire lock "down": connection refused',
    ])
    expect(of('nested')).toHaveLength(3)
    expect(of('nested')[0]).toMatch(acquired('nested'))
    expect(of('nested')[1]).toBe('Lock "nested" is already held in this async context; the nested task runs under it')
    expect(of('nested')[2]).toMatch(released('nested'))
    expect(of('extended')).toHaveLength(3)
    expect(of('extended')[1]).toMatch(new RegExp(`^Lock "extended" extended: held at most until ${ISO}$`))
    expect(of('lost')).toHaveLength(3)
    expect(of('lost')[0]).toMatch(acquired('lost', ''))
    expect(of('lost')[1]).toMatch(
      /^Lock "lost" lost: Lock "lost" was lost: it had expired when the task tried to extend it$/,
    )
    expect(of('lost')[2]).toBe('Lock "lost" not released: it was lost during the task')
    expect(of('stuck')).toHaveLength(2)
    expect(of('stuck')[1]).toMatch(new RegExp(`^Lock "stuck" could not be released, it expires at ${ISO}: store down$`))
    expect(lines).toHaveLength(2 + 1 + 1 + 3 + 3 + 3 + 2)
  })

  it('logs nothing without NODE_DEBUG', async () => {
    const { code, stderr } = await run({ NODE_DEBUG: '' })
    expect(code).toBe(0)
    expect(stderr).toBe('')
  })
})

describe('graceful shutdown: close() and the caller signal', () => {
  it('a signal aborted before the call rejects with its reason, and the store is not asked', async () => {
    const provider = recordingProvider()
    const controller = new AbortController()
    const reason = new Error('shutting down')
    controller.abort(reason)
    const task = vi.fn()
    await expect(
      createLockingTaskExecutor(provider).executeWithLock(task, { ...opts(), signal: controller.signal }),
    ).rejects.toBe(reason)
    await expect(
      createLockingTaskExecutor(provider).executeWithLock(task, lockConfiguration(opts()), {
        signal: controller.signal,
      }),
    ).rejects.toBe(reason)
    expect(provider.configurations).toHaveLength(0)
    expect(task).not.toHaveBeenCalled()
  })

  it("a signal aborted while the task runs aborts the task's signal with its reason; the lock is released after the task", async () => {
    const provider = inMemoryLockProvider()
    const controller = new AbortController()
    const reason = new Error('deploy')
    const seen = deferred<unknown>()
    const started = deferred()
    const result = createLockingTaskExecutor(provider).executeWithLock(
      async ({ signal }) => {
        started.resolve()
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        seen.resolve(signal.reason)
        return 'stopped early'
      },
      { ...opts(), signal: controller.signal },
    )
    await started.promise
    controller.abort(reason)
    expect(await seen.promise).toBe(reason)
    await expect(result).resolves.toEqual({ executed: true, result: 'stopped early' })
    expect(await provider.lock(lockConfiguration(opts()))).toBeDefined()
  })

  it('close() aborts running tasks with ExecutorClosedError and resolves once their locks are released', async () => {
    const provider = inMemoryLockProvider()
    const executor = createLockingTaskExecutor(provider)
    const started = deferred()
    let reason: unknown
    const result = executor.executeWithLock(async ({ signal }) => {
      started.resolve()
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      reason = signal.reason
      await sleep(20)
    }, opts())
    await started.promise
    expect(executor.closed).toBe(false)
    const closing = executor.close()
    expect(executor.closed).toBe(true)
    expect(executor.close()).toBe(closing)
    await closing
    expect(reason).toBeInstanceOf(ExecutorClosedError)
    await expect(result).resolves.toEqual({ executed: true, result: undefined })
    // Released by the time close() resolved: another node takes it at once.
    expect(await provider.lock(lockConfiguration(opts()))).toBeDefined()
  })

  it('after close() nothing new runs: { executed: false, reason: "closed" }, the store not asked', async () => {
    const provider = recordingProvider()
    const executor = createLockingTaskExecutor(provider)
    await executor.close()
    const task = vi.fn()
    await expect(executor.executeWithLock(task, opts())).resolves.toEqual({ executed: false, reason: 'closed' })
    expect(task).not.toHaveBeenCalled()
    expect(provider.configurations).toHaveLength(0)
  })

  it('a call still taking its lock when close() is called releases it unused, and close() waits for that', async () => {
    const gate = deferred()
    const log: string[] = []
    const inner = recordingProvider(log)
    const provider: LockProvider = {
      async lock(configuration) {
        await gate.promise
        return inner.lock(configuration)
      },
    }
    const executor = createLockingTaskExecutor(provider)
    const task = vi.fn()
    const call = executor.executeWithLock(task, opts())
    await sleep(5)
    let closed = false
    const closing = executor.close().then(() => {
      closed = true
    })
    await sleep(5)
    expect(closed).toBe(false)
    gate.resolve()
    await closing
    await expect(call).resolves.toEqual({ executed: false, reason: 'closed' })
    expect(task).not.toHaveBeenCalled()
    expect(log).toEqual(['provider.lock job', 'provider.unlock job'])
  })

  it('a task that ignores its signal keeps its lock: close() resolves after its timeout without releasing it', async () => {
    const provider = inMemoryLockProvider()
    const executor = createLockingTaskExecutor(provider)
    const mayEnd = deferred()
    const started = deferred()
    const result = executor.executeWithLock(async () => {
      started.resolve()
      await mayEnd.promise
    }, opts())
    await started.promise
    const before = Date.now()
    await executor.close({ timeout: 50 })
    expect(Date.now() - before).toBeGreaterThanOrEqual(45)
    // Still running, so still held: another node must not start beside it.
    expect(await provider.lock(lockConfiguration(opts()))).toBeUndefined()
    mayEnd.resolve()
    await result
    expect(await provider.lock(lockConfiguration(opts()))).toBeDefined()
  })

  it('refuses a signal that is not an AbortSignal', async () => {
    const executor = createLockingTaskExecutor(recordingProvider())
    await expect(
      executor.executeWithLock(() => {}, { ...opts(), signal: 'stop' as unknown as AbortSignal }),
    ).rejects.toThrow(LockConfigurationError)
  })
})
