import type { Clock } from './clock.ts'

// The largest delay setTimeout accepts; later deadlines are re-armed in steps.
const MAX_TIMER_MS = 2 ** 31 - 1

/** Stops a deadline from firing; calling it again, or after it fired, does nothing. */
export type CancelDeadline = () => void

type TimerHandle = ReturnType<typeof setTimeout>

/**
 * One deadline of a {@link Deadlines} heap. An object made per call anyway (a store call) can be
 * its own deadline, so that watching the call allocates nothing more.
 */
export interface Deadline {
  /** When it passes, on the clock of its heap. */
  at: number
  /** Set by the heap: its place there, -1 when it is in none (not added, fired or cancelled). */
  index: number
  /** Set by the heap: deadlines of one time fire in the order they were added. */
  order: number
  /** Runs once, when `at` passes before the deadline is cancelled. */
  fire(): void
}

/**
 * The deadlines of one clock, in a binary heap watched by a single timer armed for the earliest:
 * the executor's (a lock's watchdog, its release) and every store call's timeout. A `setTimeout`
 * apiece made Node build, queue and drop a timer list per deadline; counted against that
 * (scripts/instructions.mjs, 2026-12-07), it costs +12 % for `executeWithLock()` (execute),
 * +10 % for a slot run, +29 % for a Redis and +26 % for a PostgreSQL lock() and unlock().
 * Deadlines mostly come later than the one the timer is armed for, so adding one rarely touches
 * the timer; cancelling one never does (the timer fires once more at most and re-arms for what
 * is left).
 *
 * With `keepAlive`, the timer keeps the process alive while a deadline is pending, as a timer of
 * its own would (a store call that has not answered); otherwise it is unref'd.
 */
export class Deadlines {
  readonly #clock: Clock
  readonly #keepAlive: boolean
  readonly #heap: Deadline[] = []
  #added = 0
  #timer: TimerHandle | undefined
  #armedFor = Number.POSITIVE_INFINITY
  #armedWith: typeof setTimeout | undefined
  #clear: typeof clearTimeout | undefined

  constructor(clock: Clock, keepAlive: boolean) {
    this.#clock = clock
    this.#keepAlive = keepAlive
  }

  /** Fires `deadline` once the clock reaches its `at`, unless it is cancelled first. */
  add(deadline: Deadline): void {
    const heap = this.#heap
    deadline.order = this.#added++
    deadline.index = heap.length
    heap.push(deadline)
    if (deadline.index > 0) this.#up(deadline.index)
    // A replaced setTimeout (fake timers in a test) gets a timer of its own.
    if (deadline.at < this.#armedFor || this.#armedWith !== setTimeout) this.#arm()
    else if (this.#keepAlive && heap.length === 1) (this.#timer as { ref?: () => unknown }).ref?.()
  }

  /** `false` when `deadline` was not pending: it fired, or was cancelled or never added. */
  cancel(deadline: Deadline): boolean {
    const { index } = deadline
    if (index < 0) return false
    deadline.index = -1
    const heap = this.#heap
    const last = heap.pop()!
    if (last !== deadline) {
      heap[index] = last
      last.index = index
      this.#down(index)
      this.#up(last.index)
    }
    if (heap.length === 0 && this.#keepAlive) this.#idle()
    return true
  }

  // Nothing pending: the timer must not keep the process alive.
  #idle(): void {
    const timer = this.#timer as { unref?: () => unknown } | undefined
    if (timer === undefined) return
    if (typeof timer.unref === 'function') timer.unref()
    else {
      this.#clear!(this.#timer)
      this.#timer = undefined
      this.#armedFor = Number.POSITIVE_INFINITY
    }
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
    if (!this.#keepAlive) (timer as { unref?: () => unknown }).unref?.()
    this.#timer = timer
  }

  // Fires what is due on the clock. A timer that woke early on it only re-arms: an injected or
  // skewed clock, a deadline past setTimeout's limit, or a whole-millisecond timer that fires a
  // fraction before performance.now() reaches the deadline.
  readonly #wake = (): void => {
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    const now = this.#clock.now()
    const due: Deadline[] = []
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
    for (const deadline of due) {
      try {
        deadline.fire()
      } catch (error) {
        if (!failed) failure = error
        failed = true
      }
    }
    if (failed) throw failure
  }

  #up(index: number): void {
    const heap = this.#heap
    const deadline = heap[index]!
    while (index > 0) {
      const parentIndex = (index - 1) >> 1
      const parent = heap[parentIndex]!
      if (parent.at < deadline.at || (parent.at === deadline.at && parent.order < deadline.order)) break
      heap[index] = parent
      parent.index = index
      index = parentIndex
    }
    heap[index] = deadline
    deadline.index = index
  }

  #down(index: number): void {
    const heap = this.#heap
    const deadline = heap[index]!
    const { length } = heap
    for (;;) {
      let child = 2 * index + 1
      if (child >= length) break
      if (child + 1 < length) {
        const left = heap[child]!
        const right = heap[child + 1]!
        if (right.at < left.at || (right.at === left.at && right.order < left.order)) child++
      }
      const smaller = heap[child]!
      if (deadline.at < smaller.at || (deadline.at === smaller.at && deadline.order < smaller.order)) break
      heap[index] = smaller
      smaller.index = index
      index = child
    }
    heap[index] = deadline
    deadline.index = index
  }
}

const heaps = new WeakMap<Clock, Deadlines>()

/**
 * Calls `fire` once `clock` reaches `at` (epoch ms). The timer is re-armed when it wakes early on
 * `clock` (an injected or skewed clock, or a deadline past setTimeout's 24.8-day limit), and it is
 * unref'd: a deadline never keeps the process alive by itself. The deadlines of one clock share
 * one timer.
 */
export function atDeadline(at: number, clock: Clock, fire: () => void): CancelDeadline {
  let heap = heaps.get(clock)
  if (heap === undefined) {
    heap = new Deadlines(clock, false)
    heaps.set(clock, heap)
  }
  const deadline: Deadline = { at, index: -1, order: 0, fire }
  heap.add(deadline)
  return () => {
    heap.cancel(deadline)
  }
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

/** Resolves to true once `promise` settles, or to false after `ms`; never rejects. */
export function waitAtMost(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    timer.unref()
    const settled = (): void => {
      clearTimeout(timer)
      resolve(true)
    }
    promise.then(settled, settled)
  })
}
