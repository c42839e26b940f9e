import { type Clock, systemClock } from '../../core/clock.ts'
import type { Duration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { type ExtensibleLockProvider, withLockPair } from '../../core/lock-provider.ts'
import { lockOwner } from '../lock-owner.ts'
import type { DescribeStoreError } from '../store-errors.ts'
import type { TimedStoreCall } from '../with-timeout.ts'
import { sqlGiveBack } from './give-back.ts'
import type { SqlAccessor } from './sql-accessor.ts'
import { type AcquireParts, sqlLock } from './sql-acquire.ts'
import { sqlLockHandles } from './sql-lock-handle.ts'
import { sqlLockPair } from './sql-lock-pair.ts'
import type { SqlTableOptions } from './sql-table.ts'
import { tableLimitChecks } from './sql-table-limits.ts'
import { describeTimed, sqlTimeoutMs } from './sql-timeout.ts'

// The SQL stores' entry point: each store imports from here what it needs to build its provider
// over its dialect; the parts live in the modules re-exported below.
export { GIVE_BACK_DELAYS_MS, unlockNow } from './give-back.ts'
export type { SqlAccessor, SqlTableLimits } from './sql-accessor.ts'
export { acquireOneAfterOther } from './sql-lock-pair.ts'
export { fencingTokenOf, type LockAtLeastAnchor, lockAtLeastAnchor } from './sql-statement-values.ts'
export { DEFAULT_SQL_TIMEOUT } from './sql-timeout.ts'

/** Options shared by the SQL providers. */
export interface SqlLockProviderOptions extends SqlTableOptions {
  /**
   * Prefix of the `locked_by` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * Let the database clock decide when locks expire, so that clock skew between app nodes cannot
   * run a task twice. `false` uses this process's clock (see `clock`), stored as UTC.
   * @default true
   */
  useDbTime?: boolean
  /** The app clock, used when `useDbTime` is `false`. @default systemClock */
  clock?: Clock
  /**
   * How long one lock statement (acquire, release, extend; the wait for a free pool connection
   * included) may take, in milliseconds or a duration string; then it rejects with
   * `LockProviderError` and the task does not run. A connection to a server that vanished (a
   * failover, a cut link) otherwise waits until the operating system gives the socket up, which
   * is minutes. An acquire that still commits after its timeout is given back as soon as it lands;
   * one whose reply never comes, or is lost (a dropped or reset connection, the pool's own
   * `query_timeout`), is given back on another connection of the pool, owner-checked, at once and
   * then on the schedule of `GIVE_BACK_DELAYS_MS`.
   * @default "10s"
   */
  timeout?: Duration
}

/**
 * The `LockProvider` around a dialect's {@link SqlAccessor}: one statement per acquire attempt
 * (the first acquire of a provider also runs {@link SqlAccessor.readLimits}), one per release, no
 * cache of known rows (a row deleted by hand is simply recreated), and a `locked_by` value unique
 * to each acquisition (and, with `fencingTokens`, its token from the acquire statement). A name or
 * a deadline past the table's limits rejects with `LockConfigurationError` before the acquire or
 * extend statement is sent.
 */
export function sqlLockProvider(
  name: string,
  accessor: SqlAccessor,
  options: SqlLockProviderOptions,
  describe: DescribeStoreError,
): ExtensibleLockProvider {
  if (options.lockedBy !== undefined && (typeof options.lockedBy !== 'string' || options.lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `lockedBy must be a non-empty string (it prefixes the locked_by column), got ${JSON.stringify(options.lockedBy)}`,
    )
  }
  const clock = options.clock ?? systemClock
  const timeoutMs = sqlTimeoutMs(name, options.timeout)
  const describeWithTimeout = describeTimed(name, timeoutMs, describe)
  const call: TimedStoreCall<unknown> = { store: name, timeoutMs, describe: describeWithTimeout }
  const checks = tableLimitChecks(name, accessor, clock, timeoutMs, describeWithTimeout)
  const parts: AcquireParts = {
    accessor,
    call,
    checks,
    giveBack: sqlGiveBack(accessor, name, timeoutMs, clock),
    handleOf: sqlLockHandles(accessor, clock, call, checks),
    newOwner: () => lockOwner(options.lockedBy),
  }
  const provider: ExtensibleLockProvider = { name, lock: sqlLock(parts) }
  return accessor.acquirePair ? withLockPair(provider, sqlLockPair(parts)) : provider
}
