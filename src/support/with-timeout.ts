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
  // One promise and one timer, no Promise.race: this wraps every Redis, etcd and ZooKeeper call.
  return new Promise<T>((resolve, reject) => {
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      options.onTimeout?.()
      reject(new OperationTimeoutError(options.store, ms))
    }, ms)
    promise.then(
      (value) => {
        if (timedOut) options.late?.(value)
        else {
          clearTimeout(timer)
          resolve(value)
        }
      },
      (error: unknown) => {
        if (timedOut) return
        clearTimeout(timer)
        reject(error)
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
 * `storeGuard(describe)(action, lockName, () => withTimeout(run(), ...))` in one promise and one
 * timer: the shape of every call a Redis, memcached or ZooKeeper provider makes to take or
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
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      call.onTimeout?.()
      fail(new OperationTimeoutError(call.store, call.timeoutMs))
    }, call.timeoutMs)
    promise.then(
      (value) => {
        if (timedOut) late?.(value)
        else {
          clearTimeout(timer)
          resolve(value)
        }
      },
      (error: unknown) => {
        if (timedOut) return
        clearTimeout(timer)
        fail(error)
      },
    )
  })
}
