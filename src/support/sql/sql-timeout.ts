import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { type DescribeStoreError, outcomeOf, type StoreAction, storeError } from '../store-errors.ts'
import { OperationTimeoutError } from '../with-timeout.ts'

// The provider's timeout on each lock statement: its setting, and what a statement that hit it tells the caller.

/** The default of `SqlLockProviderOptions.timeout`. */
export const DEFAULT_SQL_TIMEOUT = '10s'

/**
 * The `timeout` option of the store `store` in milliseconds ({@link DEFAULT_SQL_TIMEOUT} when
 * `undefined`). @throws LockConfigurationError when it is not longer than 0ms.
 */
export function sqlTimeoutMs(store: string, timeout: Duration | undefined): number {
  const timeoutMs = parseDuration(timeout ?? DEFAULT_SQL_TIMEOUT)
  if (!(timeoutMs > 0))
    throw new LockConfigurationError(
      `${store}: timeout must be longer than 0ms, got ${JSON.stringify(timeout)}; it bounds each lock statement, e.g. "10s"`,
    )
  return timeoutMs
}

/**
 * `describe`, but an {@link OperationTimeoutError} of the provider's own timeout gets a message
 * that says what to change.
 */
export function describeTimed(store: string, timeoutMs: number, describe: DescribeStoreError): DescribeStoreError {
  return (error, action, lockName) =>
    error instanceof OperationTimeoutError
      ? timedOut(store, action, lockName, timeoutMs, error)
      : describe(error, action, lockName)
}

// What a timed-out statement means for the caller, and the two settings that end the wait sooner.
function timedOut(
  store: string,
  action: StoreAction,
  lockName: string,
  timeoutMs: number,
  error: OperationTimeoutError,
): ReturnType<DescribeStoreError> {
  return storeError(
    store,
    action,
    lockName,
    `no reply within the provider's timeout (${timeoutMs}ms): the server is down or unreachable, a failover is under way, or the pool has no free connection; ${outcomeOf(action)}. Give the pool's connections a timeout of their own below this one (pg: query_timeout), so that a connection to a vanished server is dropped rather than kept busy, or raise timeout`,
    error,
  )
}
