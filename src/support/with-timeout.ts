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
