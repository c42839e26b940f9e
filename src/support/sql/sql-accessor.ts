import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { StoreLimits } from '../lock-request.ts'

// The contract between sqlLockProvider and a SQL dialect: what a dialect implements, nothing that runs.

/** What the lock table can hold, as {@link SqlAccessor.readLimits} found it. */
export interface SqlTableLimits extends StoreLimits {
  /** The longest name the name column holds, in characters (Unicode code points). `undefined`: no limit (a `text` column). */
  readonly maxNameLength?: number
  /** Where the limit comes from, for the error message, e.g. `column name of shedlock, VARCHAR(64)`. */
  readonly nameColumn?: string
}

/** The three statements of one SQL dialect. Each is a single statement, run outside any caller transaction. */
export interface SqlAccessor {
  /**
   * Reads what the table can hold, before the first acquire; later acquires reuse the answer.
   * Resolves to `undefined` when it cannot tell (the table is missing, say): the answer is then
   * not kept, and the acquire statement runs, so that it reports the problem as it always does.
   * A rejection reaches the caller as the acquire's `LockProviderError`. Omitted: no limits.
   */
  readLimits?(): Promise<SqlTableLimits | undefined>
  /**
   * Throws `LockConfigurationError` for a name the table cannot keep apart from another (say,
   * one with a trailing space where the store ignores them), before anything is sent. Omitted:
   * every name is kept apart.
   */
  checkName?(name: string): void
  /**
   * Inserts the row, or takes over an expired one. Resolves to `false` when another holds the
   * lock; else to the acquisition's fencing token when the table's `fencingTokens` is on, `true`
   * when it is off.
   */
  acquire(configuration: LockConfiguration, owner: string): Promise<boolean | bigint>
  /**
   * Optional: takes `first` and, in the same statement only if it took it, `second` (a slot's
   * record and its task's lock: see `LockPair`). Resolves to what {@link acquire} would have
   * resolved to for each, `second` `false` when `first` is. Omitted: slot runs take them one
   * after the other.
   */
  acquirePair?(
    first: LockConfiguration,
    firstOwner: string,
    second: LockConfiguration,
    secondOwner: string,
  ): Promise<readonly [boolean | bigint, boolean | bigint]>
  /**
   * Optional: {@link unlock}, sent with the other releases of this turn of the event loop in one
   * statement. The task locks of paired acquires (slot runs) are released so: a scheduled tick
   * releases them together. Omitted: `unlock`.
   */
  unlockInBatch?(current: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<void>
  /** Moves `lock_until` of a row this acquisition still holds. Resolves to `true` when it did. */
  extend(next: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<boolean>
  /** Sets `lock_until` to `max(now, lockAtLeastUntil)` on a row this acquisition holds; other rows are untouched. */
  unlock(current: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<void>
  /**
   * Optional: whether an acquire that rejected with `error` may still have committed, because
   * its reply was lost (a dropped or reset connection, a client-side `query_timeout`) rather than
   * refused by the server. Such an acquisition, and one whose provider timeout passed, is given
   * back (see `GIVE_BACK_DELAYS_MS` in give-back.ts). Omitted: a rejected acquire wrote nothing (SQLite).
   */
  replyLost?(error: unknown): boolean
}
