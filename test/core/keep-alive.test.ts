import type { Duration } from '../../src/core/duration.ts'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  LockCannotBeExtendedError,
  LockConfigurationError,
  LockLostError,
  LockStateError,
} from '../../src/core/errors.ts'
import { keepAliveLockProvider } from '../../src/core/keep-alive.ts'
import { type LockConfiguration, lockConfiguration } from '../../src/core/lock-configuration.ts'
import { extendActiveLock } from '../../src/core/lock-context.ts'
import {
  type ExtensibleLock,
  type ExtensibleLockProvider,
  isKeepAliveLock,
  type KeepAliveLock,
} from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { dateClock, deferred, manualClock, recordingListener, fakeHandle } from '../helpers/fakes.ts'

type ExtendBehaviour = (atMost: number | string, atLeast: number | string) => Promise<boolean>

/**
 * An extensible provider whose handles are numbered (#1, #2, ...) and log, with the fake time
 * elapsed since `t0`, every extend and unlock. `behaviour` decides whether an extension succeeds.
 */
function scriptedProvider(t0: () => number) {
  const log: string[] = []
  const configurations: LockConfiguration[] = []
  let counter = 0
  let behaviour: ExtendBehaviour = async () => true
  const handle = (id: number): ExtensibleLock =>
    fakeHandle({
      async unlock() {
        log.push(`${Date.now() - t0()}: unlock #${id}`)
      },
      async extend(atMost: number | string, atLeast: number | string) {
        log.push(`${Date.now() - t0()}: extend #${id} (${atMost}, ${atLeast})`)
        return (await behaviour(atMost, atLeast)) ? handle(++counter) : undefined
      },
    })
  const provider: ExtensibleLockProvider = {
    async lock(configuration) {
      configurations.push(configuration)
      return handle(++counter)
    },
  }
  return {
    provider,
    log,
    configurations,
    setBehaviour(next: ExtendBehaviour) {
      behaviour = next
    },
  }
}

let t0 = 0
const config = (lockAtMostFor: Duration, lockAtLeastFor: Duration = 0, name = 'job') =>
  lockConfiguration({ name, lockAtMostFor, lockAtLeastFor, createdAt: new Date(Date.now()) })

async function mustLock(
  provider: { lock(c: LockConfiguration): Promise<unknown> },
  configuration: LockConfiguration,
): Promise<KeepAliveLock> {
  const lock = await provider.lock(configuration)
  expect(lock).toBeDefined()
  expect(isKeepAliveLock(lock as KeepAliveLock)).toBe(true)
  return lock as KeepAliveLock
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
  t0 = Date.now()
})

afterEach(() => {
  vi.useRealTimers()
})

describe('keepAliveLockProvider', () => {
  it('rejects lockAtMostFor below the 30 s default minimum with LockConfigurationError naming the lock, before the store', async () => {
    const inner = scriptedProvider(() => t0)
    const provider = keepAliveLockProvider(inner.provider)
    await expect(provider.lock(config('29999ms', 0, 'nightly'))).rejects.toThrow(LockConfigurationError)
    await expect(provider.lock(config('29999ms', 0, 'nightly'))).rejects.toThrow(/"nightly".*29999ms.*30000ms/)
    expect(inner.configurations).toHaveLength(0)
    const lock = await mustLock(provider, config('30s'))
    expect(inner.configurations).toHaveLength(1)
    await lock.unlock()
  })

  it('await using stops the keep-alive and releases the lock when the block ends; a second dispose does nothing', async () => {
    const inner = scriptedProvider(() => t0)
    const provider = keepAliveLockProvider(inner.provider)
    let kept: KeepAliveLock | undefined
    {
      await using lock = await mustLock(provider, config('30s'))
      kept = lock
      await vi.advanceTimersByTimeAsync(15_000)
    }
    expect(inner.log).toEqual(['15000: extend #1 (30000, 0)', '15000: unlock #2'])
    await kept![Symbol.asyncDispose]()
    await vi.advanceTimersByTimeAsync(60_000)
    expect(inner.log).toHaveLength(2)
  })

  it('honours a smaller minLockAtMostFor', async () => {
    const inner = scriptedProvider(() => t0)
    const provider = keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s' })
    await expect(provider.lock(config(999))).rejects.toThrow(LockConfigurationError)
    await (await mustLock(provider, config(1000))).unlock()
  })

  it('rejects an invalid minLockAtMostFor at once', () => {
    expect(() =>
      keepAliveLockProvider(scriptedProvider(() => t0).provider, { minLockAtMostFor: '10foo' as Duration }),
    ).toThrow(LockConfigurationError)
  })

  it('resolves to undefined when the inner provider does not grant the lock, and schedules nothing', async () => {
    const provider = keepAliveLockProvider({ lock: async () => undefined }, { minLockAtMostFor: '1s' })
    expect(await provider.lock(config('3s'))).toBeUndefined()
    expect(vi.getTimerCount()).toBe(0)
  })

  it('passes the configuration through to the inner provider', async () => {
    const inner = scriptedProvider(() => t0)
    const configuration = config('1m')
    await (await mustLock(keepAliveLockProvider(inner.provider), configuration)).unlock()
    expect(inner.configurations).toEqual([configuration])
  })

  it('extends every lockAtMostFor / 2, counting down lockAtLeastFor', async () => {
    const inner = scriptedProvider(() => t0)
    // The keep-alive's own clock follows fake time.
    const provider = keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock })
    const lock = await mustLock(provider, config('3s', '2s'))
    await vi.advanceTimersByTimeAsync(1_499)
    expect(inner.log).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(inner.log).toEqual(['1500: extend #1 (3000, 500)'])
    await vi.advanceTimersByTimeAsync(1_500)
    expect(inner.log).toEqual(['1500: extend #1 (3000, 500)', '3000: extend #2 (3000, 0)'])
    await vi.advanceTimersByTimeAsync(1_500)
    expect(inner.log.at(-1)).toBe('4500: extend #3 (3000, 0)')
    expect(lock.signal.aborted).toBe(false)
    await lock.unlock()
    expect(inner.log.at(-1)).toBe('4500: unlock #4')
  })

  it('reports each extension to onExtended with the new deadlines', async () => {
    const inner = scriptedProvider(() => t0)
    const lock = await mustLock(
      keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
      config('3s', '2s'),
    )
    const seen: LockConfiguration[] = []
    lock.onExtended = (c) => seen.push(c)
    await vi.advanceTimersByTimeAsync(3_000)
    expect(
      seen.map((c) => [
        c.createdAt.getTime() - t0,
        c.lockAtMostFor,
        c.lockAtLeastFor,
        c.lockAtMostUntil.getTime() - t0,
        c.lockAtLeastUntil.getTime() - t0,
      ]),
    ).toEqual([
      [1500, 3000, 500, 4500, 2000],
      [3000, 3000, 0, 6000, 3000],
    ])
    expect(seen.every((c) => c.name === 'job' && Object.isFrozen(c))).toBe(true)
    await lock.unlock()
  })

  it('a failed extension (lock expired) aborts the signal with LockLostError and stops', async () => {
    const inner = scriptedProvider(() => t0)
    inner.setBehaviour(async () => false)
    const lock = await mustLock(
      keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
      config('3s'),
    )
    await vi.advanceTimersByTimeAsync(1_500)
    expect(lock.signal.aborted).toBe(true)
    expect(lock.signal.reason).toBeInstanceOf(LockLostError)
    expect((lock.signal.reason as Error).message).toContain('"job"')
    await vi.advanceTimersByTimeAsync(60_000)
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)'])
    // The spent handle is not unlocked.
    await lock.unlock()
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)'])
  })

  it('a rejected extension aborts the signal, stops, and unlock releases the still-valid old handle', async () => {
    const inner = scriptedProvider(() => t0)
    const failure = new Error('store down')
    inner.setBehaviour(async () => {
      throw failure
    })
    const lock = await mustLock(
      keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
      config('3s'),
    )
    await vi.advanceTimersByTimeAsync(1_500)
    expect(lock.signal.aborted).toBe(true)
    expect(lock.signal.reason).toBeInstanceOf(LockLostError)
    expect((lock.signal.reason as Error).cause).toBe(failure)
    await vi.advanceTimersByTimeAsync(60_000)
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)'])
    await lock.unlock()
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)', '61500: unlock #1'])
  })

  it('an extension that comes after lockAtMostUntil is not attempted: the lock is lost', async () => {
    const inner = scriptedProvider(() => t0)
    // The process stalled: by the keep-alive clock, the first tick comes after the lock expired.
    const clock = manualClock(Date.now())
    const lock = await mustLock(keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock }), config('3s'))
    clock.advance(3_001)
    await vi.advanceTimersByTimeAsync(1_500)
    expect(inner.log).toEqual([])
    expect(lock.signal.aborted).toBe(true)
    expect((lock.signal.reason as Error).message).toMatch(/after lockAtMostUntil/)
    await vi.advanceTimersByTimeAsync(60_000)
    expect(inner.log).toEqual([])
  })

  it('unlock stops the schedule', async () => {
    const inner = scriptedProvider(() => t0)
    const lock = await mustLock(
      keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
      config('3s'),
    )
    await vi.advanceTimersByTimeAsync(1_000)
    await lock.unlock()
    // The schedule is cancelled; the deadlines' shared timer (unref'd) may fire once more, to find nothing.
    await vi.advanceTimersByTimeAsync(60_000)
    expect(inner.log).toEqual(['1000: unlock #1'])
    expect(vi.getTimerCount()).toBe(0)
    expect(lock.signal.aborted).toBe(false)
  })

  it('unlock waits for an in-flight extension and releases the handle it returned', async () => {
    const inner = scriptedProvider(() => t0)
    const gate = deferred<boolean>()
    inner.setBehaviour(() => gate.promise)
    const lock = await mustLock(
      keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
      config('3s'),
    )
    await vi.advanceTimersByTimeAsync(1_500)
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)'])
    let unlocked = false
    const unlocking = lock.unlock().then(() => {
      unlocked = true
    })
    await vi.advanceTimersByTimeAsync(100)
    expect(unlocked).toBe(false)
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)'])
    gate.resolve(true)
    await unlocking
    expect(inner.log).toEqual(['1500: extend #1 (3000, 0)', '1600: unlock #2'])
    await vi.advanceTimersByTimeAsync(60_000)
    expect(inner.log).toHaveLength(2)
  })

  it('unlocking twice throws LockStateError; a failed unlock can be retried', async () => {
    const inner = scriptedProvider(() => t0)
    const lock = await mustLock(
      keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
      config('3s'),
    )
    await lock.unlock()
    await expect(lock.unlock()).rejects.toThrow(LockStateError)

    const failing: ExtensibleLockProvider = {
      async lock() {
        let attempts = 0
        return fakeHandle({
          async unlock() {
            if (attempts++ === 0) throw new Error('store down')
          },
          extend: async () => undefined,
        })
      },
    }
    const other = await mustLock(keepAliveLockProvider(failing, { minLockAtMostFor: '1s' }), config('3s'))
    await expect(other.unlock()).rejects.toThrow('store down')
    await other.unlock()
    await expect(other.unlock()).rejects.toThrow(LockStateError)
  })

  describe('through the executor', () => {
    it('a task runs past its original lockAtMostFor without its signal aborting; onLockExtended fires', async () => {
      const store = inMemoryLockProvider({ clock: dateClock })
      const provider = keepAliveLockProvider(store, { minLockAtMostFor: '1s', clock: dateClock })
      const listener = recordingListener()
      const executor = createLockingTaskExecutor(provider, { listener, clock: dateClock })
      const heldDuringTask: boolean[] = []
      const running = executor.executeWithLock(
        async ({ signal }) => {
          for (let i = 0; i < 10; i++) {
            await new Promise((resolve) => setTimeout(resolve, 1_000))
            heldDuringTask.push(store.inspect('job')!.lockUntil.getTime() > Date.now())
          }
          return signal.aborted
        },
        { name: 'job', lockAtMostFor: '3s' },
      )
      await vi.advanceTimersByTimeAsync(10_000)
      await expect(running).resolves.toEqual({ executed: true, result: false })
      expect(heldDuringTask).toEqual(Array(10).fill(true))
      const extended = listener.events.filter((e) => e.hook === 'onLockExtended')
      expect(extended.length).toBe(6)
      expect(extended.at(-1)!.configuration.lockAtMostUntil.getTime()).toBe(t0 + 9_000 + 3_000)
      expect(listener.log).not.toContain('onLockLost job')
      expect(listener.log.at(-1)).toBe('onUnlocked job')
      expect(store.inspect('job')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
      // No keep-alive timer is left behind.
      await vi.advanceTimersByTimeAsync(60_000)
      expect(listener.events.filter((e) => e.hook === 'onLockExtended')).toHaveLength(6)
    })

    it("a lost keep-alive lock aborts the task's signal and reports onLockLost", async () => {
      const inner = scriptedProvider(() => t0)
      inner.setBehaviour(async () => false)
      const listener = recordingListener()
      const executor = createLockingTaskExecutor(
        keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
        {
          listener,
          clock: dateClock,
        },
      )
      const running = executor.executeWithLock(
        ({ signal }) =>
          new Promise((resolve) => {
            signal.addEventListener('abort', () => resolve(signal.reason))
          }),
        { name: 'job', lockAtMostFor: '3s' },
      )
      await vi.advanceTimersByTimeAsync(1_500)
      const result = await running
      expect(result.executed && result.result).toBeInstanceOf(LockLostError)
      expect(listener.log.slice(0, 5)).toEqual([
        'onLockAttempt job',
        'onLockAcquired job',
        'onTaskStarted job',
        'onLockLost job',
        'onTaskFinished job',
      ])
      expect(listener.log).not.toContain('onUnlockFailed job')
      expect(inner.log).toEqual(['1500: extend #1 (3000, 0)'])
    })

    it('extendActiveLock on a keep-alive lock throws LockCannotBeExtendedError', async () => {
      const inner = scriptedProvider(() => t0)
      const executor = createLockingTaskExecutor(
        keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
        { clock: dateClock },
      )
      const result = await executor.executeWithLock(
        async ({ signal }) => {
          await expect(extendActiveLock('1m')).rejects.toThrow(LockCannotBeExtendedError)
          await expect(extendActiveLock('1m')).rejects.toThrow(/keepAliveLockProvider/)
          return signal.aborted
        },
        { name: 'job', lockAtMostFor: '3s' },
      )
      expect(result).toEqual({ executed: true, result: false })
      expect(inner.log).toEqual(['0: unlock #1'])
    })

    it('an extension that hangs past lockAtMostUntil aborts the signal then: the lock can no longer be trusted', async () => {
      const inner = scriptedProvider(() => t0)
      const gate = deferred<boolean>()
      inner.setBehaviour(() => gate.promise)
      const executor = createLockingTaskExecutor(
        keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
        { clock: dateClock },
      )
      const done = deferred()
      let signal: AbortSignal | undefined
      const running = executor.executeWithLock(
        async (ctx) => {
          signal = ctx.signal
          await done.promise
        },
        { name: 'job', lockAtMostFor: '3s' },
      )
      // The first extension (at 1.5 s) hangs: until 3 s the lock holds, from then on another node may take it.
      await vi.advanceTimersByTimeAsync(2_990)
      expect(signal!.aborted).toBe(false)
      await vi.advanceTimersByTimeAsync(20)
      expect(signal!.aborted).toBe(true)
      expect(signal!.reason).toBeInstanceOf(LockLostError)
      // The extension lands late: the task is told already, and the newest handle is released.
      gate.resolve(true)
      done.resolve()
      await running
      expect(inner.log.at(-1)).toMatch(/unlock #2$/)
    })

    it('a release that gets no answer is reported after lockAtMostUntil instead of hanging', async () => {
      const inner = scriptedProvider(() => t0)
      inner.setBehaviour(() => new Promise<boolean>(() => {}))
      const listener = recordingListener()
      const executor = createLockingTaskExecutor(
        keepAliveLockProvider(inner.provider, { minLockAtMostFor: '1s', clock: dateClock }),
        {
          clock: dateClock,
          listener,
        },
      )
      const running = executor.executeWithLock(() => new Promise<void>((resolve) => setTimeout(resolve, 2_000)), {
        name: 'job',
        lockAtMostFor: '3s',
      })
      // The extension at 1.5 s never answers; the task ends at 2 s; the release waits for it 5 s at most.
      await vi.advanceTimersByTimeAsync(7_100)
      expect(await running).toEqual({ executed: true, result: undefined })
      expect(listener.log).toContain('onUnlockFailed job')
    })
  })
})
