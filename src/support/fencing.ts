import type { Clock } from '../core/clock.ts'

// Fencing tokens kept as counters in lock records (docs/fencing.md). A counter that lives in the
// record goes when the record goes: an inspector's removeExpired(), an operator's delete, or a
// Java ShedLock node that rewrites the record wholesale (S3). So a counter that starts afresh
// starts from a floor, the node's clock in microseconds, which is above every count an earlier
// record reached (a count grows by one per acquisition, and each acquisition takes at least a
// round trip, far more than a microsecond) unless the clocks of the nodes disagree by more than
// the time between the two acquisitions. The lock's expiry already needs the clocks in sync.

/** The floor a fresh counter starts above: `clock` in microseconds since the epoch. */
export function fencingFloor(clock: Clock): bigint {
  return BigInt(Math.floor(clock.now())) * 1000n
}

/** A counter as a store returns it (a decimal string or a number), or `undefined` when it is missing or not a whole number ≥ 0. */
export function parseFencingToken(value: unknown): bigint | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? BigInt(value) : undefined
  if (typeof value !== 'string' || !/^\d{1,30}$/.test(value)) return undefined
  return BigInt(value)
}

/**
 * The token of an acquisition that read `previous` (the record's counter, if any) and writes the
 * result with a condition on the version it read: one more than the larger of `previous` and the
 * floor of {@link fencingFloor}, so that a counter lost with its record restarts above the old one.
 */
export function nextFencingToken(previous: bigint | undefined, clock: Clock): bigint {
  const floor = fencingFloor(clock)
  return (previous !== undefined && previous > floor ? previous : floor) + 1n
}
