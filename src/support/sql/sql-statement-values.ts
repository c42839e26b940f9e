import type { Clock } from '../../core/clock.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'

// Values the dialects' statements write or read back: the lockAtLeastFor of a release, the fencing token.

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
export function lockAtLeastAnchor(
  current: LockConfiguration,
  acquired: LockConfiguration,
  clock: Clock,
): LockAtLeastAnchor {
  if (current === acquired) return { from: 'lockedAt', seconds: current.lockAtLeastFor / 1000 }
  return { from: 'now', seconds: Math.max(0, current.lockAtLeastUntil.getTime() - clock.now()) / 1000 }
}

/**
 * The fencing token an acquire statement returned (a BIGINT column: a number, a bigint or a
 * numeric string, depending on the driver), as a bigint.
 * @throws TypeError for anything else (no row, NULL): the statement did not return the column.
 */
export function fencingTokenOf(value: unknown): bigint {
  if (typeof value === 'bigint') return value
  if ((typeof value === 'number' && Number.isSafeInteger(value)) || (typeof value === 'string' && /^\d+$/.test(value)))
    return BigInt(value)
  throw new TypeError(
    `the acquire statement returned ${value === undefined ? 'no fencing token' : `the fencing token ${String(value)}`}, where it writes a positive integer; does the client return the rows of INSERT ... RETURNING (or MySQL's insertId)?`,
  )
}
