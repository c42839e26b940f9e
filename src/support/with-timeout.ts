import { asStoreError, type DescribeStoreError, type StoreAction } from './store-errors.ts'

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

/**
 * When the calls that share it time out: one per call that starts with none pending, one per
 * burst of calls otherwise (see {@link DeadlineQueue}).
 */
class Stamp {
  /** `performance.now()` value after which the calls have timed out; Infinity until it is read. */
  deadline = Number.POSITIVE_INFINITY
}

/**
 * One call watched by a {@link DeadlineQueue}: the call's own state object, so that watching it
 * allocates nothing more.
 */
abstract class Watched {
  stamp: Stamp | undefined = undefined
  state: typeof PENDING | typeof SETTLED | typeof EXPIRED = PENDING
  next: Watched | undefined = undefined

  /** Runs once, when the call is still pending at its deadline. */
  abstract expire(): void
}

type TimerHandle = ReturnType<typeof setTimeout>

// A native promise's reaction, not queueMicrotask(): fake timers may replace that one, and a
// burst whose deadline is never read would never time out.
const SETTLED_PROMISE = Promise.resolve()

/**
 * The timeouts of every pending call that shares one duration, watched by a single timer.
 *
 * A `setTimeout` and `clearTimeout` per call cost more than the rest of a Redis provider's own
 * work for a lock when calls run one at a time: Node builds a timer list for the duration,
 * queues it, and drops it again each time the last timer of that duration is cleared. Calls of
 * one duration expire in the order they start, so a FIFO and one timer armed for its oldest
 * pending call do the same job.
 *
 * Reading the clock for each call showed in the client's CPU per lock with many callers (two
 * reads per lock, 0.1 µs of about 1.5), so only a call that starts when none is pending reads
 * it. The others join a burst, the calls started in one run of JavaScript (one socket read's
 * replies and the callers they resume), whose deadline is read once, in a microtask after the
 * last of them started: a call of a burst times out at most that run's length late, never early.
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
  #burst: Stamp | undefined
  #timer: TimerHandle | undefined
  #armedFor = 0
  #armedWith: typeof setTimeout | undefined
  #clear: typeof clearTimeout | undefined

  constructor(ms: number) {
    this.#ms = ms
  }

  /** Watches a call that starts now: its `expire()` runs once, if it is still pending after the duration. */
  watch(watched: Watched): void {
    if (this.#tail === undefined) this.#head = watched
    else this.#tail.next = watched
    this.#tail = watched
    if (this.#pending++ === 0) {
      const stamp = new Stamp()
      // The global performance, not node:perf_hooks': fake timers replace both it and setTimeout.
      stamp.deadline = performance.now() + this.#ms
      watched.stamp = stamp
      this.#wake(stamp.deadline)
      return
    }
    let burst = this.#burst
    if (burst === undefined) {
      burst = this.#burst = new Stamp()
      void SETTLED_PROMISE.then(this.#read)
    }
    watched.stamp = burst
  }

  // Runs after every call of the burst has started: their deadline is read no earlier than any
  // of them started.
  readonly #read = (): void => {
    this.#burst!.deadline = performance.now() + this.#ms
    this.#burst = undefined
  }

  /** The call settled. `false` when its timeout had already passed (and `expire()` ran). */
  settle(watched: Watched): boolean {
    if (watched.state !== PENDING) return false
    watched.state = SETTLED
    if (--this.#pending === 0) this.#idle()
    // Calls settle mostly in the order they started: drop the settled ones at the front.
    let head = this.#head
    while (head !== undefined && head.state !== PENDING) head = unlink(head)
    this.#head = head
    if (head === undefined) this.#tail = undefined
    return true
  }

  // The first pending call after none: the timer must keep the process alive again.
  #wake(deadline: number): void {
    if (this.#timer !== undefined && this.#armedWith === setTimeout) {
      ;(this.#timer as { ref?: () => unknown }).ref?.()
      return
    }
    if (this.#timer !== undefined) this.#clear!(this.#timer)
    this.#arm(this.#ms, deadline)
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
    const expired: Watched[] = []
    let head = this.#head
    while (head !== undefined && (head.state !== PENDING || head.stamp!.deadline <= now)) {
      if (head.state === PENDING) {
        head.state = EXPIRED
        expired.push(head)
        this.#pending--
      }
      head = unlink(head)
    }
    this.#head = head
    if (head === undefined) this.#tail = undefined
    else {
      const { deadline } = head.stamp!
      // Not expected: a burst's deadline is read in a microtask, before any timer can fire. Should
      // it be missing, the timer fires no later than the deadline will be, and checks again.
      if (deadline === Number.POSITIVE_INFINITY) this.#arm(this.#ms, 0)
      else this.#arm(deadline - now, deadline)
    }
    // After the queue is consistent, so that an expiry may start (and watch) another call. One
    // that throws does not keep the others from running; the first error is rethrown, as an
    // exception in a timer of its own would have been.
    let failed = false
    let failure: unknown
    for (const watched of expired) {
      try {
        watched.expire()
      } catch (error) {
        if (!failed) failure = error
        failed = true
      }
    }
    if (failed) throw failure
  }
}

// Returns the next entry and cuts the link to it, so that an entry that reached the old
// generation does not keep the later ones, and the calls they belong to, alive through the young
// generation's collections.
function unlink(watched: Watched): Watched | undefined {
  const { next } = watched
  watched.next = undefined
  return next
}

const queues = new Map<number, DeadlineQueue>()
// The queue found last: a process mostly has one provider timeout, so most calls need no Map lookup.
let lastQueue: DeadlineQueue | undefined
let lastMs = Number.NaN

function deadlines(ms: number): DeadlineQueue {
  if (ms === lastMs) return lastQueue!
  let queue = queues.get(ms)
  if (queue === undefined) {
    queue = new DeadlineQueue(ms)
    queues.set(ms, queue)
  }
  lastMs = ms
  lastQueue = queue
  return queue
}

// One executor for every promise made here: it runs synchronously inside `new Promise`, so it
// hands the resolving functions to the call set just before, and no closure is built per call.
let capturing: { resolve: (value: never) => void; reject: (error: unknown) => void } | undefined
function capture(resolve: (value: never) => void, reject: (error: unknown) => void): void {
  capturing!.resolve = resolve
  capturing!.reject = reject
  capturing = undefined
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

class TimedPromise<T> extends Watched {
  resolve!: (value: T) => void
  reject!: (error: unknown) => void
  readonly queue: DeadlineQueue
  readonly ms: number
  readonly options: WithTimeoutOptions<T>

  constructor(queue: DeadlineQueue, ms: number, options: WithTimeoutOptions<T>) {
    super()
    this.queue = queue
    this.ms = ms
    this.options = options
  }

  expire(): void {
    this.options.onTimeout?.()
    this.reject(new OperationTimeoutError(this.options.store, this.ms))
  }

  fulfilled(value: T): void {
    if (this.queue.settle(this)) this.resolve(value)
    else this.options.late?.(value)
  }

  rejected(error: unknown): void {
    if (this.queue.settle(this)) this.reject(error)
  }
}

/**
 * Resolves like `promise`, or rejects with an {@link OperationTimeoutError} after `ms`. Clients
 * that queue commands while disconnected would otherwise keep a lock attempt waiting without
 * end; `promise` itself keeps running, which is why `late` exists.
 */
export function withTimeout<T>(promise: PromiseLike<T>, ms: number, options: WithTimeoutOptions<T>): Promise<T> {
  const queue = deadlines(ms)
  const timed = new TimedPromise(queue, ms, options)
  capturing = timed
  const result = new Promise<T>(capture)
  queue.watch(timed)
  promise.then(
    (value) => timed.fulfilled(value),
    (error: unknown) => timed.rejected(error),
  )
  return result
}

/** What {@link timedStoreCall} needs besides the call itself. */
// biome-ignore lint/correctness/noUnusedVariables: T only names at the call sites what the call returns; dropping it means editing every provider that uses it.
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

/** The optional parts of one {@link timedStoreCall}. */
export interface TimedStoreCallSteps<T, R> {
  /** Receives the value if it still arrives after the timeout (say, to release a late acquisition). */
  readonly late?: (value: T) => void
  /**
   * Turns the store's reply into the call's result (say, a reply into a lock handle), in the same
   * promise. What it throws rejects the call as it is, not described: it is not the store's error.
   */
  readonly map?: (value: T) => R
  /**
   * Given the store's error, returns a second attempt to wait for instead (say, `EVAL` after a
   * `NOSCRIPT` reply), within the same timeout; `undefined` to fail with the error.
   */
  readonly recover?: (error: unknown) => PromiseLike<T> | undefined
  /**
   * Called when the timeout passes, after the call's own `onTimeout` and before the returned
   * promise rejects (say, to tell a multi-step attempt to stop at its next step).
   */
  readonly onTimeout?: () => void
  /**
   * Called once, synchronously, just before the returned promise settles: `true` when it
   * resolves, `false` when it rejects (say, to tell a lock handle whether its release is done).
   */
  readonly settled?: (ok: boolean) => void
}

class StoreCall<T, R> extends Watched {
  resolve!: (value: R) => void
  reject!: (error: unknown) => void
  readonly queue: DeadlineQueue
  readonly call: TimedStoreCall<T>
  readonly action: StoreAction
  readonly lockName: string
  readonly steps: TimedStoreCallSteps<T, R> | undefined

  constructor(
    queue: DeadlineQueue,
    call: TimedStoreCall<T>,
    action: StoreAction,
    lockName: string,
    steps: TimedStoreCallSteps<T, R> | undefined,
  ) {
    super()
    this.queue = queue
    this.call = call
    this.action = action
    this.lockName = lockName
    this.steps = steps
  }

  expire(): void {
    this.call.onTimeout?.()
    this.steps?.onTimeout?.()
    this.fail(new OperationTimeoutError(this.call.store, this.call.timeoutMs))
  }

  fail(error: unknown): void {
    this.steps?.settled?.(false)
    this.reject(asStoreError(error, this.call.describe, this.action, this.lockName))
  }

  await(reply: PromiseLike<T>): void {
    reply.then(
      (value) => this.fulfilled(value),
      (error: unknown) => this.rejected(error),
    )
  }

  // The steps' functions are called on `steps`, which may be an object with methods.
  fulfilled(value: T): void {
    const { steps } = this
    if (!this.queue.settle(this)) {
      steps?.late?.(value)
      return
    }
    if (steps?.map === undefined) {
      steps?.settled?.(true)
      this.resolve(value as unknown as R)
      return
    }
    let result: R
    try {
      result = steps.map(value)
    } catch (error) {
      steps.settled?.(false)
      this.reject(error)
      return
    }
    steps.settled?.(true)
    this.resolve(result)
  }

  rejected(error: unknown): void {
    if (this.state !== PENDING) return
    const { steps } = this
    if (steps?.recover !== undefined) {
      let retry: PromiseLike<T> | undefined
      try {
        retry = steps.recover(error)
      } catch (thrown) {
        error = thrown
      }
      if (retry !== undefined) {
        this.await(retry)
        return
      }
    }
    this.queue.settle(this)
    this.fail(error)
  }
}

/** {@link TimedStoreCallSteps} that send the call themselves, so that a call needs no closure. */
export interface StartingSteps<T, R> extends TimedStoreCallSteps<T, R> {
  /** Sends the call; called once, on the steps object. */
  start(): PromiseLike<T>
}

/**
 * `storeGuard(describe)(action, lockName, () => withTimeout(run(), ...))` in one promise and no
 * timer of its own: the shape of every call a Redis, memcached or ZooKeeper provider makes to
 * take or release a lock, where each extra promise layer, closure and timer showed in the
 * client's CPU per lock. A `LockProviderError` passes as it is; anything else (a synchronous
 * throw of `run`, a rejection, an {@link OperationTimeoutError}) goes through `describe`. `steps`
 * maps the reply, retries after an error, or takes a value that arrives after the timeout; steps
 * with a `start()` method stand for `run` too.
 */
export function timedStoreCall<T, R = T>(
  call: TimedStoreCall<T>,
  action: StoreAction,
  lockName: string,
  run: () => PromiseLike<T>,
  steps?: TimedStoreCallSteps<T, R>,
): Promise<R>
export function timedStoreCall<T, R>(
  call: TimedStoreCall<T>,
  action: StoreAction,
  lockName: string,
  steps: StartingSteps<T, R>,
): Promise<R>
export function timedStoreCall<T, R>(
  call: TimedStoreCall<T>,
  action: StoreAction,
  lockName: string,
  run: (() => PromiseLike<T>) | StartingSteps<T, R>,
  steps?: TimedStoreCallSteps<T, R>,
): Promise<R> {
  const queue = deadlines(call.timeoutMs)
  const pending = new StoreCall(queue, call, action, lockName, typeof run === 'function' ? steps : run)
  capturing = pending
  const result = new Promise<R>(capture)
  let reply: PromiseLike<T>
  try {
    reply = typeof run === 'function' ? run() : run.start()
  } catch (error) {
    pending.fail(error)
    return result
  }
  // A client's own promise as it is; a plain value (a test double's) as a resolved one.
  if (typeof (reply as { then?: unknown } | null)?.then !== 'function') reply = Promise.resolve(reply as T)
  queue.watch(pending)
  pending.await(reply)
  return result
}
