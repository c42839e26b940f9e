import { type DeadlineQueue, deadlines, PENDING, Watched } from './deadline-queue.ts'
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
      this.resolve(value as unknown as R)
      return
    }
    let result: R
    try {
      result = steps.map(value)
    } catch (error) {
      this.reject(error)
      return
    }
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
 * timer of its own (its deadline in the shared queue of deadline-queue.ts, measured there): the
 * shape of every call a provider makes to take or release a lock. A `LockProviderError` passes as it is; anything else (a synchronous
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
