import { afterEach, describe, expect, it, vi } from 'vitest'
import { LockProviderError } from '../../src/core/errors.ts'
import { OperationTimeoutError, timedStoreCall } from '../../src/support/with-timeout.ts'

const describeError = (error: unknown, action: string, name: string): LockProviderError =>
  new LockProviderError(`test: could not ${action} lock "${name}": ${error instanceof Error ? error.message : String(error)}`, { cause: error })

describe('timedStoreCall', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('resolves with the value and leaves no timer behind', async () => {
    vi.useFakeTimers()
    const value = timedStoreCall({ store: 'Test', timeoutMs: 1000, describe: describeError }, 'acquire', 'a', async () => 42)
    await expect(value).resolves.toBe(42)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('describes a rejection and a synchronous throw; passes a LockProviderError as it is', async () => {
    const call = { store: 'Test', timeoutMs: 1000, describe: describeError }
    await expect(timedStoreCall(call, 'release', 'a', async () => Promise.reject(new Error('boom')))).rejects.toThrow('test: could not release lock "a": boom')
    await expect(
      timedStoreCall(call, 'acquire', 'b', () => {
        throw new Error('sync')
      }),
    ).rejects.toThrow('test: could not acquire lock "b": sync')
    const own = new LockProviderError('already described')
    await expect(timedStoreCall(call, 'acquire', 'c', async () => Promise.reject(own))).rejects.toBe(own)
  })

  it('rejects after the timeout, calls onTimeout, and hands a late value to late()', async () => {
    vi.useFakeTimers()
    let answer!: (value: string) => void
    const onTimeout = vi.fn()
    const late = vi.fn()
    const pending = timedStoreCall(
      { store: 'Test', timeoutMs: 500, describe: describeError, onTimeout },
      'acquire',
      'slow',
      () => new Promise<string>((resolve) => (answer = resolve)),
      late,
    )
    const outcome = pending.catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(500)
    const error = (await outcome) as LockProviderError
    expect(error).toBeInstanceOf(LockProviderError)
    expect(error.cause).toBeInstanceOf(OperationTimeoutError)
    expect(error.message).toContain('no reply from Test within 500ms')
    expect(onTimeout).toHaveBeenCalledOnce()
    answer('late')
    await vi.advanceTimersByTimeAsync(0)
    expect(late).toHaveBeenCalledWith('late')
  })
})
