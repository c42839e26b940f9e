import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { atDeadline, beforeDeadline } from '../../src/core/deadline.ts'
import { dateClock, deferred, manualClock } from '../helpers/fakes.ts'

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

describe('the deadlines of one clock (one timer)', () => {
  it('fire in the order of their times, whatever the order they were set in, and never once cancelled', () => {
    vi.useFakeTimers()
    const start = Date.now()
    const fired: number[] = []
    const cancels = new Map<number, () => void>()
    // Shuffled offsets, 10 ms apart; every third is cancelled, some from the middle of the heap.
    const offsets = Array.from({ length: 40 }, (_, i) => ((i * 17) % 40) * 10 + 10)
    for (const offset of offsets)
      cancels.set(
        offset,
        atDeadline(start + offset, dateClock, () => fired.push(Date.now() - start)),
      )
    const cancelled = offsets.filter((offset) => offset % 30 === 0)
    for (const offset of cancelled) cancels.get(offset)!()
    vi.advanceTimersByTime(400)
    const expected = offsets.filter((offset) => !cancelled.includes(offset)).sort((a, b) => a - b)
    expect(fired).toEqual(expected)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('fires deadlines of one time in the order they were set', () => {
    vi.useFakeTimers()
    const start = Date.now()
    const fired: number[] = []
    for (let i = 0; i < 20; i++) atDeadline(start + 10 + (i % 2) * 10, dateClock, () => fired.push(i))
    vi.advanceTimersByTime(20)
    expect(fired).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19])
  })

  it('fires a deadline set earlier than the one the timer waits for at its own time', () => {
    vi.useFakeTimers()
    const start = Date.now()
    const late = vi.fn()
    const early = vi.fn()
    atDeadline(start + 60_000, dateClock, late)
    atDeadline(start + 50, dateClock, early)
    vi.advanceTimersByTime(49)
    expect(early).not.toHaveBeenCalled()
    vi.advanceTimersByTime(1)
    expect(early).toHaveBeenCalledOnce()
    expect(late).not.toHaveBeenCalled()
    vi.advanceTimersByTime(60_000)
    expect(late).toHaveBeenCalledOnce()
  })

  it('fires every deadline that is due even when one of them throws, and rethrows the first error', () => {
    vi.useFakeTimers()
    const start = Date.now()
    const other = vi.fn()
    atDeadline(start + 10, dateClock, () => {
      throw new Error('fire failed')
    })
    atDeadline(start + 10, dateClock, other)
    expect(() => vi.advanceTimersByTime(10)).toThrow('fire failed')
    expect(other).toHaveBeenCalledOnce()
  })

  it("keeps its deadlines apart from another clock's", async () => {
    const stopped = manualClock(0)
    const neverFires = vi.fn()
    const cancel = atDeadline(10, stopped, neverFires)
    const fired = deferred()
    atDeadline(Date.now() + 10, dateClock, fired.resolve)
    await fired.promise
    await sleep(30)
    expect(neverFires).not.toHaveBeenCalled()
    cancel()
  })
})

describe('beforeDeadline', () => {
  it('settles like the promise when it settles first', async () => {
    await expect(
      beforeDeadline(Promise.resolve('value'), Date.now() + 1_000, dateClock, () => new Error('late')),
    ).resolves.toBe('value')
    const failure = new Error('store failed')
    await expect(
      beforeDeadline(Promise.reject(failure), Date.now() + 1_000, dateClock, () => new Error('late')),
    ).rejects.toBe(failure)
  })

  it('rejects with what expired() returns once the deadline passes first', async () => {
    const never = new Promise<never>(() => {})
    const late = new Error('no answer by the deadline')
    await expect(beforeDeadline(never, Date.now() + 20, dateClock, () => late)).rejects.toBe(late)
  })
})
