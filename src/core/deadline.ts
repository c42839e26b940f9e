import type { Clock } from './clock.ts'

// The largest delay setTimeout accepts; later deadlines are re-armed in steps.
const MAX_TIMER_MS = 2 ** 31 - 1

/** Stops a deadline from firing; calling it again, or after it fired, does nothing. */
export type CancelDeadline = () => void

interface Entry {
  readonly at: number
  readonly fire: () => void
  /** Its place in the heap; -1 once it fired or was cancelled. */
  index: number
}

type TimerHandle = ReturnType<typeof setTimeout>

/**
 * The deadlines of one clock, in a binary heap watched by a single unref'd timer armed for the
 * earliest. Every execution sets two deadlines (the lock-lost watchdog and the release's), each
 * for a duration of its own; a timer apiece made Node build, queue and drop a timer list for
 * each, which showed in `executeWithLock()`'s CPU. Deadlines mostly come later than the one the
 * timer is armed for, so adding one rarely touches the timer; cancelling one never does (the
 * timer, unref'd, fires once more at most and re-arms for what is left). Measured against a
 * timer per deadline (`npm run bench -- --only executor`, 2026-11-27): executeWithLock() p50
 * 3.37–3.52 µs against 3.68–3.83 µs, CPU 3.70–3.90 µs against 4.11–4.21 µs per execution.
 */
class DeadlineHeap {
  readonly #clock: Clock
  readonly #heap: Entry[] = []
  #timer: TimerHandle | undefined
  #armedFor = Number.POSITIVE_INFINITY
  #armedWith: typeof setTimeout | undefined
  #clear: typeof clearTimeout | undefined

  constructor(clock: Clock) {
    this.#clock = clock
  }

  add(at: number, fire: () => void): Entry {
    const entry: Entry = { at, fire, index: this.#heap.length }
    this.#heap.push(entry)
    this.#up(entry.index)
    // A replaced setTimeout (fake timers in a test) gets a timer of its own.
    if (at < this.#armedFor || this.#armedWith !== setTimeout) this.#arm()
    return entry
  }

  cancel(entry: Entry): void {
    const { index } = entry
    if (index < 0) return
    entry.index = -1
    const last = this.#heap.pop()!
    if (last === entry) return
    this.#heap[index] = last
    last.index = index
    this.#down(index)
    this.#up(last.index)
  }

  #arm(): void {
    if (this.#timer !== undefined) this.#clear!(this.#timer)
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    const first = this.#heap[0]
    if (first === undefined) return
    this.#armedFor = first.at
    this.#armedWith = setTimeout
    this.#clear = clearTimeout
    const timer = setTimeout(this.#wake, Math.min(Math.max(first.at - this.#clock.now(), 0), MAX_TIMER_MS))
    ;(timer as { unref?: () => unknown }).unref?.()
    this.#timer = timer
  }

  // Fires what is due on the clock; a timer that woke early on it (an injected or skewed clock,
  // a deadline past setTimeout's limit) only re-arms.
  readonly #wake = (): void => {
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    const now = this.#clock.now()
    const due: Entry[] = []
    while (this.#heap.length > 0 && this.#heap[0]!.at <= now) {
      const first = this.#heap[0]!
      this.cancel(first)
      due.push(first)
    }
    this.#arm()
    // After the heap is consistent, so that a deadline may set another. One that throws does not
    // keep the others from firing; the first error is rethrown, as a timer of its own would have.
    let failed = false
    let failure: unknown
    for (const entry of due) {
      try {
        entry.fire()
      } catch (error) {
        if (!failed) failure = error
        failed = true
      }
    }
    if (failed) throw failure
  }

  #up(index: number): void {
    const heap = this.#heap
    const entry = heap[index]!
    while (index > 0) {
      const parentIndex = (index - 1) >> 1
      const parent = heap[parentIndex]!
      if (parent.at <= entry.at) break
      heap[index] = parent
      parent.index = index
      index = parentIndex
    }
    heap[index] = entry
    entry.index = index
  }

  #down(index: number): void {
    const heap = this.#heap
    const entry = heap[index]!
    const { length } = heap
    for (;;) {
      let child = 2 * index + 1
      if (child >= length) break
      if (child + 1 < length && heap[child + 1]!.at < heap[child]!.at) child++
      const smaller = heap[child]!
      if (smaller.at >= entry.at) break
      heap[index] = smaller
      smaller.index = index
      index = child
    }
    heap[index] = entry
    entry.index = index
  }
}

const heaps = new WeakMap<Clock, DeadlineHeap>()

function deadlinesOf(clock: Clock): DeadlineHeap {
  let heap = heaps.get(clock)
  if (heap === undefined) {
    heap = new DeadlineHeap(clock)
    heaps.set(clock, heap)
  }
  return heap
}

/**
 * Calls `fire` once `clock` reaches `at` (epoch ms). The timer is re-armed when it wakes early on
 * `clock` (an injected or skewed clock, or a deadline past setTimeout's 24.8-day limit), and it is
 * unref'd: a deadline never keeps the process alive by itself. The deadlines of one clock share
 * one timer.
 */
export function atDeadline(at: number, clock: Clock, fire: () => void): CancelDeadline {
  const heap = deadlinesOf(clock)
  const entry = heap.add(at, fire)
  return () => heap.cancel(entry)
}

/**
 * Settles like `promise`, or rejects with `expired()` once `clock` reaches `at`, whichever comes
 * first: for calls to a store that may never answer (a partitioned network, a client without a
 * timeout). `promise` itself keeps running.
 */
export function beforeDeadline<T>(promise: Promise<T>, at: number, clock: Clock, expired: () => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = atDeadline(at, clock, () => reject(expired()))
    promise.then(
      (value) => {
        cancel()
        resolve(value)
      },
      (error: unknown) => {
        cancel()
        reject(error)
      },
    )
  })
}
