import { LockProviderError } from '../core/errors.ts'
import type { DescribeStoreError, StoreAction } from './store-errors.ts'

/** A store gave no reply within a provider's `timeout`. */
export class OperationTimeoutError extends Error {
  override name = 'OperationTimeoutError'
  /** The timeout that passed, in milliseconds. */
  readonly timeoutMs: number

  constructor(store: string, timeoutMs: number) {
    super(`no reply from ${store} within ${timeoutMs}ms`)
    this.timeoutMs = timeoutMs
  }
}

const PENDING = 0
const SETTLED = 1
const EXPIRED = 2

/** One call watched by a {@link DeadlineQueue}. */
interface Watched {
  readonly deadline: number
  state: typeof PENDING | typeof SETTLED | typeof EXPIRED
  expire: (() => void) | undefined
  next: Watched | undefined
}

type TimerHandle = ReturnType<typeof setTimeout>

/**
 * The timeouts of every pending call that shares one duration, watched by a single timer.
 *
 * A `setTimeout` and `clearTimeout` per call cost more than the rest of a Redis provider's own
 * work for a lock when calls run one at a time: Node builds a timer list for the duration,
 * queues it, and drops it again each time the last timer of that duration is cleared. Calls of
 * one duration expire in the order they start, so a FIFO and one timer armed for its oldest
 * pending call do the same job.
 *
 * The timer keeps the process alive while a call is pending, as a timer per call did; when none
 * is, it is unref'd (or cleared, where timers cannot be unref'd) and fires once more at most, to
 * find nothing. A `setTimeout` replaced since the timer was armed (fake timers in a test) gets a
 * timer of its own with the next call.
 */
class DeadlineQueue {
  readonly #ms: number
  #head: Watched | undefined
  #tail: Watched | undefined
  #pending = 0
  #timer: TimerHandle | undefined
  #armedFor = 0
  #armedWith: typeof setTimeout | undefined
  #clear: typeof clearTimeout | undefined

  constructor(ms: number) {
    this.#ms = ms
  }

  /** Watches a call that starts now: `expire` runs once, if it is still pending after the duration. */
  watch(expire: () => void): Watched {
    const watched: Watched = { deadline: performance.now() + this.#ms, state: PENDING, expire, next: undefined }
    if (this.#tail === undefined) this.#head = watched
    else this.#tail.next = watched
    this.#tail = watched
    if (this.#pending++ === 0) this.#wake()
    return watched
  }

  /** The call settled. `false` when its timeout had already passed (and `expire` ran). */
  settle(watched: Watched): boolean {
    if (watched.state !== PENDING) return false
    watched.state = SETTLED
    watched.expire = undefined
    if (--this.#pending === 0) this.#idle()
    // Calls settle mostly in the order they started: drop the settled ones at the front.
    let head = this.#head
    while (head !== undefined && head.state !== PENDING) head = unlink(head)
    this.#head = head
    if (head === undefined) this.#tail = undefined
    return true
  }

  // The first pending call after none: the timer must keep the process alive again.
  #wake(): void {
    if (this.#timer !== undefined && this.#armedWith === setTimeout) {
      ;(this.#timer as { ref?: () => unknown }).ref?.()
      return
    }
    if (this.#timer !== undefined) this.#clear!(this.#timer)
    this.#arm(this.#ms, this.#head!.deadline)
  }

  // No call pending: the timer must not keep the process alive.
  #idle(): void {
    const timer = this.#timer as { unref?: () => unknown } | undefined
    if (timer === undefined) return
    if (typeof timer.unref === 'function') timer.unref()
    else {
      this.#clear!(this.#timer)
      this.#timer = undefined
    }
  }

  #arm(delay: number, deadline: number): void {
    this.#armedFor = deadline
    this.#armedWith = setTimeout
    this.#clear = clearTimeout
    this.#timer = setTimeout(this.#fire, Math.max(1, Math.ceil(delay)))
  }

  readonly #fire = (): void => {
    this.#timer = undefined
    // A timer may fire a fraction of a millisecond before performance.now() reaches its
    // deadline, and fake timers move one clock without the other: the deadline it was armed for
    // has passed either way.
    const now = Math.max(performance.now(), this.#armedFor)
    const expired: (() => void)[] = []
    let head = this.#head
    while (head !== undefined && (head.state !== PENDING || head.deadline <= now)) {
      if (head.state === PENDING) {
        head.state = EXPIRED
        expired.push(head.expire!)
        head.expire = undefined
        this.#pending--
      }
      head = unlink(head)
    }
    this.#head = head
    if (head === undefined) this.#tail = undefined
    else this.#arm(head.deadline - now, head.deadline)
    // After the queue is consistent, so that a callback may start (and watch) another call. One
    // that throws does not keep the others from running; the first error is rethrown, as an
    // exception in a timer of its own would have been.
    let failed = false
    let failure: unknown
    for (const expire of expired) {
      try {
        expire()
      } catch (error) {
        if (!failed) failure = error
        failed = true
      }
    }
    if (failed) throw failure
  }
}

// Returns the next entry and cuts the link to it. An entry that lived long enough to reach the
// old generation would otherwise keep every later entry (and the call state each one closes
// over) alive through the young generation's collections, until a full collection: with 16
// concurrent callers, that multiplied the memory promoted per lock by four.
function unlink(watched: Watched): Watched | undefined {
  const { next } = watched
  watched.next = undefined
  return next
}

const queues = new Map<number, DeadlineQueue>()

function deadlines(ms: number): DeadlineQueue {
  let queue = queues.get(ms)
  if (queue === undefined) {
    queue = new DeadlineQueue(ms)
    queues.set(ms, queue)
  }
  return queue
}

/** What {@link withTimeout} does around the timeout. */
export interface WithTimeoutOptions<T> {
  /** The store's name, for the error message. */
  store: string
  /** Called when the timeout passes, before the returned promise rejects. */
  onTimeout?: () => void
  /** Receives the value if it still arrives after the timeout (say, to release a late acquisition). */
  late?: (value: T) => void
}

/**
 * Resolves like `promise`, or rejects with an {@link OperationTimeoutError} after `ms`. Clients
 * that queue commands while disconnected would otherwise keep a lock attempt waiting without
 * end; `promise` itself keeps running, which is why `late` exists.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, options: WithTimeoutOptions<T>): Promise<T> {
  // One promise and no Promise.race; the timeout is one entry in the queue of its duration.
  const queue = deadlines(ms)
  return new Promise<T>((resolve, reject) => {
    const watched = queue.watch(() => {
      options.onTimeout?.()
      reject(new OperationTimeoutError(options.store, ms))
    })
    promise.then(
      (value) => {
        if (queue.settle(watched)) resolve(value)
        else options.late?.(value)
      },
      (error: unknown) => {
        if (queue.settle(watched)) reject(error)
      },
    )
  })
}

/** What {@link timedStoreCall} needs besides the call itself. */
export interface TimedStoreCall<T> {
  /** The store's name, for the timeout's message. */
  readonly store: string
  /** The provider's timeout, in milliseconds. */
  readonly timeoutMs: number
  /** Turns what the call threw (a timeout included) into the caller's error, as `storeGuard` does. */
  readonly describe: DescribeStoreError
  /** Called when the timeout passes, before the returned promise rejects. */
  readonly onTimeout?: () => void
}

/**
 * `storeGuard(describe)(action, lockName, () => withTimeout(run(), ...))` in one promise, with
 * no timer of its own (see {@link DeadlineQueue}): the shape of every call a Redis, memcached or ZooKeeper provider makes to take or
 * release a lock, where each extra promise layer showed in the client's CPU per lock. A
 * `LockProviderError` passes as it is; anything else (a synchronous throw of `run`, a rejection,
 * an {@link OperationTimeoutError}) goes through `describe`. `late` receives a value that arrives
 * after the timeout.
 */
export function timedStoreCall<T>(
  call: TimedStoreCall<T>,
  action: StoreAction,
  lockName: string,
  run: () => PromiseLike<T>,
  late?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const fail = (error: unknown): void => reject(error instanceof LockProviderError ? error : call.describe(error, action, lockName))
    let promise: PromiseLike<T>
    try {
      promise = run()
    } catch (error) {
      fail(error)
      return
    }
    const queue = deadlines(call.timeoutMs)
    const watched = queue.watch(() => {
      call.onTimeout?.()
      fail(new OperationTimeoutError(call.store, call.timeoutMs))
    })
    promise.then(
      (value) => {
        if (queue.settle(watched)) resolve(value)
        else late?.(value)
      },
      (error: unknown) => {
        if (queue.settle(watched)) fail(error)
      },
    )
  })
}
