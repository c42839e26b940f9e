import { type Clock, systemClock } from '../core/clock.ts'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'

/**
 * A `slot` function for `setInterval` (and `@Interval`): the start of the current interval on
 * this host's clock, `floor(now / period) * period`, the same on every node whose clock agrees.
 *
 * ```ts
 * setInterval(withLock(provider, { name: 'sync', lockAtMostFor: '4m', slot: intervalSlot('5m'), onError }, sync), 5 * 60_000)
 * ```
 *
 * Limits: `setInterval` timers are not aligned across nodes; each node's tick falls somewhere in
 * the interval, and every tick of one interval is the same slot, so the task runs once per
 * interval (as long as some node ticks in it). A tick close to an interval's boundary is counted
 * in the neighbouring interval by a node whose clock is off by more than the tick's distance to
 * the boundary (the interval's slack): two runs may then come closer together than `period`, or
 * an interval may get none. Keep clocks synchronized (NTP), and prefer a cron schedule when runs
 * must fall at given times. See docs/slots.md.
 *
 * @param period the interval, in milliseconds or a duration string; more than 0.
 * @param clock the clock to read (tests). @default systemClock
 * @throws LockConfigurationError for a period that is not a positive duration.
 */
export function intervalSlot(period: Duration, clock: Clock = systemClock): () => Date {
  let ms: number
  try {
    ms = parseDuration(period)
  } catch (error) {
    throw new LockConfigurationError(`intervalSlot(): ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
  if (!(ms > 0))
    throw new LockConfigurationError(`intervalSlot(): the period must be more than 0, got ${JSON.stringify(period)}`)
  return () => new Date(Math.floor(clock.now() / ms) * ms)
}
