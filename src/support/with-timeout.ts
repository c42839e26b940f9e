import { type Deadline, Deadlines } from '../core/deadline.ts'
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

/** What {@link withTimeout} does around the timeout. */
export interface WithTimeoutOptions<T> {
  /** The store's name, for the error message. */
  store: string
  /** Called when the timeout passes, before the returned promise rejects. */
  onTimeout?: () => void
  /** Receives the value if it still arrives after the timeout (say, to release a late acquisition). */
  late?: (value: T) => void
}

// The timeout of every pending call, in one heap on one timer (its cost measured in
// core/deadline.ts) that keeps the process alive while a call is pending, as a timer per call
// did. The global performance, not node:perf_hooks': fake timers replace both it and setTimeout.
const calls = new Deadlines({ now: () => performance.now() }, true)

/** A call that is its own deadline: pending until it settles (`calls.cancel()`) or `fire()` runs. */
abstract class Watched implements Deadline {
  at = 0
  index = -1
  order = 0

  /** Runs once, when the call is still pending at its deadline. */
  abstract fire(): void
}

class TimedPromise<T> extends Watched {
  resolve!: (value: T) => void
  reject!: (error: unknown) => void
  readonly ms: number
  readonly options: WithTimeoutOptions<T>

  constructor(ms: number, options: WithTimeoutOptions<T>) {
    super()
    this.ms = ms
    this.options = options
  }

  fire(): void {
    this.options.onTimeout?.()
    this.reject(new OperationTimeoutError(this.options.store, this.ms))
  }

  fulfilled(value: T): void {
    if (calls.cancel(this)) this.resolve(value)
    else this.options.late?.(value)
  }

  rejected(error: unknown): void {
    if (calls.cancel(this)) this.reject(error)
  }
}

/**
 * Resolves like `promise`, or rejects with an {@link OperationTimeoutError} after `ms`. Clients
 * that queue commands while disconnected would otherwise keep a lock attempt waiting without
 * end; `promise` itself keeps running, which is why `late` exists.
 */
export function withTimeout<T>(promise: PromiseLike<T>, ms: number, options: WithTimeoutOptions<T>): Promise<T> {
  const timed = new TimedPromise(ms, options)
  const result = new Promise<T>((resolve, reject) => {
    timed.resolve = resolve
    timed.reject = reject
  })
  timed.at = performance.now() + ms
  calls.add(timed)
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
  readonly call: TimedStoreCall<T>
  readonly action: StoreAction
  readonly lockName: string
  readonly steps: TimedStoreCallSteps<T, R> | undefined

  constructor(
    call: TimedStoreCall<T>,
    action: StoreAction,
    lockName: string,
    steps: TimedStoreCallSteps<T, R> | undefined,
  ) {
    super()
    this.call = call
    this.action = action
    this.lockName = lockName
    this.steps = steps
  }

  fire(): void {
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
    if (!calls.cancel(this)) {
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
    // Timed out already.
    if (this.index < 0) return
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
    calls.cancel(this)
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
 * timer of its own (its deadline in the heap of every pending call): the shape of every call a
 * provider makes to take or release a lock. A `LockProviderError` passes as it is; anything else (a synchronous
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
  const pending = new StoreCall(call, action, lockName, typeof run === 'function' ? steps : run)
  const result = new Promise<R>((resolve, reject) => {
    pending.resolve = resolve
    pending.reject = reject
  })
  let reply: PromiseLike<T>
  try {
    reply = typeof run === 'function' ? run() : run.start()
  } catch (error) {
    pending.fail(error)
    return result
  }
  // A client's own promise as it is; a plain value (a test double's) as a resolved one.
  if (typeof (reply as { then?: unknown } | null)?.then !== 'function') reply = Promise.resolve(reply as T)
  pending.at = performance.now() + call.timeoutMs
  calls.add(pending)
  pending.await(reply)
  return result
}
