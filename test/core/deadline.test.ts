import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { atDeadline, beforeDeadline } from '../../src/core/deadline.ts'
import { dateClock, deferred, manualClock } from '../support/fakes.ts'

afterEach(() => {
  vi.useRealTimers()
})

describe('atDeadline', () => {
  it('fires once the clock reaches the deadline, not when the timer wakes before it on that clock', async () => {
    const clock = manualClock(0)
    const fired = vi.fn()
    atDeadline(20, clock, fired)
    // The timer wakes after 20 ms of real time, but this clock has not moved: it re-arms.
    await sleep(60)
    expect(fired).not.toHaveBeenCalled()
    clock.set(20)
    await vi.waitFor(() => expect(fired).toHaveBeenCalledTimes(1), { timeout: 2_000 })
  })

  it('fires at once for a deadline that has passed', async () => {
    const fired = deferred()
    atDeadline(Date.now() - 1_000, dateClock, fired.resolve)
    await fired.promise
  })

  it('waits out a deadline past the 24.8-day limit of setTimeout, in steps', () => {
    vi.useFakeTimers()
    const fired = vi.fn()
    const days = 30
    atDeadline(Date.now() + days * 86_400_000, dateClock, fired)
    vi.advanceTimersByTime((days - 1) * 86_400_000)
    expect(fired).not.toHaveBeenCalled()
    vi.advanceTimersByTime(86_400_000)
    expect(fired).toHaveBeenCalledTimes(1)
  })

  it('does not fire once cancelled, and a second cancel does nothing', async () => {
    const fired = vi.fn()
    const cancel = atDeadline(Date.now() + 10, dateClock, fired)
    cancel()
    cancel()
    await sleep(40)
    expect(fired).not.toHaveBeenCalled()
  })
})

describe('beforeDeadline', () => {
  it('settles like the promise when it settles first', async () => {
    await expect(beforeDeadline(Promise.resolve('value'), Date.now() + 1_000, dateClock, () => new Error('late'))).resolves.toBe('value')
    const failure = new Error('store failed')
    await expect(beforeDeadline(Promise.reject(failure), Date.now() + 1_000, dateClock, () => new Error('late'))).rejects.toBe(failure)
  })

  it('rejects with what expired() returns once the deadline passes first', async () => {
    const never = new Promise<never>(() => {})
    const late = new Error('no answer by the deadline')
    await expect(beforeDeadline(never, Date.now() + 20, dateClock, () => late)).rejects.toBe(late)
  })
})
