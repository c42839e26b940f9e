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
 * The floors of one provider's fresh counters: {@link fencingFloor} of its clock, but never at or
 * below a token the provider has seen. The clock counts whole milliseconds, so within one
 * millisecond it repeats its floor: a record deleted and taken again within the millisecond of
 * its last token (an embedded or nearby store does both in well under one) would repeat that
 * token. One per provider, not per process: a provider on a test's fixed clock keeps its floors.
 */
export class FencingFloor {
  #seen = 0n
  readonly #clock: Clock

  constructor(clock: Clock) {
    this.#clock = clock
  }

  /** The floor of a fresh counter: `micros` (by default the clock's, in microseconds), or the greatest token seen if that is higher. */
  at(micros: bigint = fencingFloor(this.#clock)): bigint {
    return micros > this.#seen ? micros : this.#seen
  }

  /** One more than the greatest token seen: the least first token of a store that computes its floor itself. */
  aboveSeen(): bigint {
    return this.#seen + 1n
  }

  /** Notes a token the store handed out (`false` or `undefined`: none) and returns it as it is. */
  saw<T extends bigint | boolean | undefined>(token: T): T {
    if (typeof token === 'bigint' && token > this.#seen) this.#seen = token
    return token
  }

  /**
   * The token of an acquisition that read `previous` (the record's counter, if any) and writes
   * the result with a condition on the version it read: one more than the larger of `previous`
   * and the floor, so that a counter lost with its record restarts above the old one.
   */
  next(previous: bigint | undefined): bigint {
    const floor = this.at()
    return this.saw((previous !== undefined && previous > floor ? previous : floor) + 1n)
  }
}
