/**
 * Where shedlock reads the time. Inject one in tests, or to simulate a node whose clock is
 * skewed; the default is the system clock.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number
}

/** The system clock (`Date.now()`). */
export const systemClock: Clock = Object.freeze({ now: () => Date.now() })
