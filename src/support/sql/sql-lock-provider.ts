import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../define-lock.ts'
import { lockOwner } from '../lock-owner.ts'
import type { SqlTableOptions } from './sql-table.ts'

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
}

/** The three statements of one SQL dialect. Each is a single statement, run outside any caller transaction. */
export interface SqlAccessor {
  /** Inserts the row, or takes over an expired one. Resolves to `true` when this acquisition now holds the lock. */
  acquire(configuration: LockConfiguration, owner: string): Promise<boolean>
  /** Moves `lock_until` of a row this acquisition still holds. Resolves to `true` when it did. */
  extend(next: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<boolean>
  /** Sets `lock_until` to `max(now, lockAtLeastUntil)` on a row this acquisition holds; other rows are untouched. */
  unlock(current: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<void>
}

/** Turns a driver error into a `LockProviderError` that names the lock and says what to do. */
export type DescribeSqlError = (error: unknown, action: 'acquire' | 'extend' | 'release', lockName: string) => LockProviderError

/**
 * The `LockProvider` around a dialect's {@link SqlAccessor}: one statement per acquire attempt,
 * one per release, no cache of known rows (a row deleted by hand is simply recreated), and a
 * `locked_by` value unique to each acquisition.
 */
export function sqlLockProvider(name: string, accessor: SqlAccessor, options: SqlLockProviderOptions, describe: DescribeSqlError): ExtensibleLockProvider {
  if (options.lockedBy !== undefined && (typeof options.lockedBy !== 'string' || options.lockedBy.trim() === '')) {
    throw new LockConfigurationError(`lockedBy must be a non-empty string (it prefixes the locked_by column), got ${JSON.stringify(options.lockedBy)}`)
  }
  const clock = options.clock ?? systemClock
  const guard = async <T>(action: 'acquire' | 'extend' | 'release', name: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      throw error instanceof LockProviderError ? error : describe(error, action, name)
    }
  }

  return {
    name,
    async lock(configuration) {
      const owner = lockOwner(options.lockedBy)
      const acquired = await guard('acquire', configuration.name, () => accessor.acquire(configuration, owner))
      if (!acquired) return undefined
      return defineLock(configuration, {
        clock,
        unlock: (current) => guard('release', current.name, () => accessor.unlock(current, owner, configuration)),
        extend: (next) => guard('extend', next.name, () => accessor.extend(next, owner, configuration)),
      })
    },
  }
}

/**
 * Where a release with database time counts `lockAtLeastFor` from, and how many seconds.
 * - The handle of the acquisition itself: from `locked_at`, the database's clock at acquisition,
 *   as Java ShedLock does. No app clock is involved.
 * - An extended handle: its `lockAtLeastFor` counts from the extension's start, which the
 *   database never saw. What is left of it, measured on this process's clock (only a difference
 *   of two readings, so skew does not matter), counts from the database's now. Anchoring it at
 *   `locked_at` plus an offset would add the acquisition's latency: an extended lock released
 *   with `lockAtLeastFor` 0 would stay held that much longer.
 */
export interface LockAtLeastAnchor {
  readonly from: 'lockedAt' | 'now'
  readonly seconds: number
}

/** See {@link LockAtLeastAnchor}. */
export function lockAtLeastAnchor(current: LockConfiguration, acquired: LockConfiguration, clock: Clock): LockAtLeastAnchor {
  if (current === acquired) return { from: 'lockedAt', seconds: current.lockAtLeastFor / 1000 }
  return { from: 'now', seconds: Math.max(0, current.lockAtLeastUntil.getTime() - clock.now()) / 1000 }
}

/** The message of an unknown thrown value, for error texts. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
