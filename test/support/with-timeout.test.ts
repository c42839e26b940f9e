import { afterEach, describe, expect, it, vi } from 'vitest'
import { LockProviderError } from '../../src/core/errors.ts'
import { OperationTimeoutError, timedStoreCall, withTimeout } from '../../src/support/with-timeout.ts'

const describeError = (error: unknown, action: string, name: string): LockProviderError =>
  new LockProviderError(
    `test: could not ${action} lock "${name}": ${error instanceof Error ? error.message : String(error)}`,
    { cause: error },
  )

describe('timedStoreCall', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('resolves with the value and leaves no timer that keeps the process alive', async () => {
    const timers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length
    const before = timers()
    let answer!: (value: number) => void
    const value = timedStoreCall(
      { store: 'Test', timeoutMs: 1000, describe: describeError },
      'acquire',
      'a',
      () => new Promise<number>((resolve) => (answer = resolve)),
    )
    // While the call is pending, its timeout keeps the process alive, as a timer of its own would.
    expect(timers()).toBe(before + 1)
    answer(42)
    await expect(value).resolves.toBe(42)
    expect(timers()).toBe(before)
  })

  it('takes a plain value from run() as a resolved reply', async () => {
    await expect(
      timedStoreCall(
        { store: 'Test', timeoutMs: 1000, describe: describeError },
        'acquire',
        'a',
        () => 7 as unknown as Promise<number>,
      ),
    ).resolves.toBe(7)
  })

  it('describes a rejection and a synchronous throw; passes a LockProviderError as it is', async () => {
    const call = { store: 'Test', timeoutMs: 1000, describe: describeError }
    await expect(timedStoreCall(call, 'release', 'a', async () => Promise.reject(new Error('boom')))).rejects.toThrow(
      'test: could not release lock "a": boom',
    )
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
      { late },
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

  it("calls the steps' onTimeout on the steps object, after the call's, before the promise rejects", async () => {
    vi.useFakeTimers()
    const order: string[] = []
    const steps = {
      stopped: false,
      start: () => new Promise<string>(() => {}),
      onTimeout(this: { stopped: boolean }) {
        this.stopped = true
        order.push('steps')
      },
    }
    const pending = timedStoreCall(
      { store: 'Test', timeoutMs: 200, describe: describeError, onTimeout: () => order.push('call') },
      'acquire',
      'slow',
      steps,
    )
    const outcome = pending.then(
      () => 'resolved',
      () => {
        order.push('rejected')
        return 'rejected'
      },
    )
    await vi.advanceTimersByTimeAsync(199)
    expect(steps.stopped).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(await outcome).toBe('rejected')
    expect(steps.stopped).toBe(true)
    expect(order).toEqual(['call', 'steps', 'rejected'])
  })
})

describe('one timer for every pending call', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  const never = <T>(): Promise<T> => new Promise<T>(() => {})

  it('times out each pending call its own duration after it started, and no settled one', async () => {
    vi.useFakeTimers()
    const outcomes: string[] = []
    const start = (label: string, promise: Promise<string>): void => {
      withTimeout(promise, 300, { store: 'Test' }).then(
        (value) => outcomes.push(`${label}: ${value}`),
        (error: unknown) => outcomes.push(`${label}: ${(error as Error).message} at ${Date.now() - t0}`),
      )
    }
    const t0 = Date.now()
    let answerB!: (value: string) => void
    start('a', never())
    await vi.advanceTimersByTimeAsync(100)
    start('b', new Promise<string>((resolve) => (answerB = resolve)))
    await vi.advanceTimersByTimeAsync(100)
    start('c', never())
    answerB('answered')
    await vi.advanceTimersByTimeAsync(99)
    expect(outcomes).toEqual(['b: answered'])
    await vi.advanceTimersByTimeAsync(1)
    expect(outcomes).toEqual(['b: answered', 'a: no reply from Test within 300ms at 300'])
    await vi.advanceTimersByTimeAsync(199)
    expect(outcomes).toHaveLength(2)
    await vi.advanceTimersByTimeAsync(1)
    expect(outcomes).toEqual([
      'b: answered',
      'a: no reply from Test within 300ms at 300',
      'c: no reply from Test within 300ms at 500',
    ])
    expect(vi.getTimerCount()).toBe(0)
  })

  it('keeps calls of different durations, started in turns, each to its own duration', async () => {
    vi.useFakeTimers()
    const outcomes: string[] = []
    const t0 = Date.now()
    for (const [label, ms] of [
      ['a', 300],
      ['b', 100],
      ['c', 300],
      ['d', 200],
      ['e', 100],
    ] as const) {
      withTimeout(never<string>(), ms, { store: 'Test' }).catch((error: unknown) =>
        outcomes.push(`${label}: ${(error as Error).message} at ${Date.now() - t0}`),
      )
    }
    await vi.advanceTimersByTimeAsync(300)
    expect(outcomes).toEqual([
      'b: no reply from Test within 100ms at 100',
      'e: no reply from Test within 100ms at 100',
      'd: no reply from Test within 200ms at 200',
      'a: no reply from Test within 300ms at 300',
      'c: no reply from Test within 300ms at 300',
    ])
  })

  it('times out each call its own duration after it started, within one run of JavaScript too', async () => {
    vi.useFakeTimers()
    const outcomes: string[] = []
    const t0 = performance.now()
    const start = (label: string): void => {
      withTimeout(never(), 100, { store: 'Test' }).catch(() => outcomes.push(`${label} at ${performance.now() - t0}`))
    }
    start('a')
    vi.advanceTimersByTime(30)
    start('b')
    // The clock moves on within the run (a long synchronous task): c started 50 ms after a.
    vi.advanceTimersByTime(20)
    start('c')
    await vi.advanceTimersByTimeAsync(49)
    expect(outcomes).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(outcomes).toEqual(['a at 100'])
    await vi.advanceTimersByTimeAsync(29)
    expect(outcomes).toEqual(['a at 100'])
    await vi.advanceTimersByTimeAsync(1)
    expect(outcomes).toEqual(['a at 100', 'b at 130'])
    await vi.advanceTimersByTimeAsync(20)
    expect(outcomes).toEqual(['a at 100', 'b at 130', 'c at 150'])
    expect(vi.getTimerCount()).toBe(0)
  })

  it('keeps timing calls out after none was pending, and after fake timers replaced the real ones', async () => {
    // A call settles under real timers and leaves the timer armed (unref'd)...
    await expect(withTimeout(Promise.resolve('quick'), 250, { store: 'Test' })).resolves.toBe('quick')
    // ...then a test installs fake timers: the next call must get a timer that the fake clock drives.
    vi.useFakeTimers()
    const late = vi.fn()
    let answer!: (value: string) => void
    const pending = withTimeout(new Promise<string>((resolve) => (answer = resolve)), 250, {
      store: 'Test',
      late,
    }).catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(250)
    expect(await pending).toBeInstanceOf(OperationTimeoutError)
    answer('after the timeout')
    await vi.advanceTimersByTimeAsync(0)
    expect(late).toHaveBeenCalledWith('after the timeout')
  })

  it('runs every expired call even when one of their callbacks throws, and rethrows the first error', async () => {
    vi.useFakeTimers()
    const onTimeout = vi.fn()
    const first = withTimeout(never(), 400, {
      store: 'Test',
      onTimeout: () => {
        throw new Error('callback failed')
      },
    })
    const second = withTimeout(never(), 400, { store: 'Test', onTimeout }).catch((error: unknown) => error)
    await expect(vi.advanceTimersByTimeAsync(400)).rejects.toThrow('callback failed')
    expect(onTimeout).toHaveBeenCalledOnce()
    expect(await second).toBeInstanceOf(OperationTimeoutError)
    // The first call's timeout did not reject it: its callback threw before it could.
    void first
  })
})
