import { type Duration, formatDuration, parseDuration } from './duration.ts'
import { LockConfigurationError } from './errors.ts'

const LONE_SURROGATE = /\p{Cs}/u

/** What you pass to {@link lockConfiguration}. */
export interface LockConfigurationOptions {
  /** The lock's name, shared by every node that runs the task. Must not be blank. */
  name: string
  /**
   * How long the lock is held at most, if the holder never releases it (for example because the
   * process died). Set it well above the task's normal duration. Milliseconds or a duration string.
   */
  lockAtMostFor: Duration
  /**
   * How long the lock is held at least, even if the task finishes sooner, so that a node whose
   * clock or scheduler is late cannot run the same tick again. @default 0
   */
  lockAtLeastFor?: Duration
  /** When the attempt starts; both deadlines count from here. @default new Date() */
  createdAt?: Date
}

/**
 * A validated, frozen lock request. Durations are milliseconds; the deadlines are absolute.
 * Build a fresh one for every attempt: the deadlines count from `createdAt`.
 */
export interface LockConfiguration {
  readonly name: string
  readonly createdAt: Date
  /** Milliseconds. */
  readonly lockAtMostFor: number
  /** Milliseconds. */
  readonly lockAtLeastFor: number
  /** `createdAt + lockAtMostFor`: the lock expires then unless extended. */
  readonly lockAtMostUntil: Date
  /** `createdAt + lockAtLeastFor`: an unlock before then keeps the lock until then. */
  readonly lockAtLeastUntil: Date
}

/**
 * Validates a lock request and returns it frozen, with durations in milliseconds.
 *
 * ```ts
 * const config = lockConfiguration({ name: 'nightly-report', lockAtMostFor: '10m', lockAtLeastFor: '30s' })
 * ```
 *
 * @throws LockConfigurationError for a blank name or one with a lone surrogate, an invalid or
 *   negative duration, `lockAtLeastFor` longer than `lockAtMostFor`, or a `lockAtMostUntil` past
 *   the last JavaScript date; the message names the lock and the fix.
 */
export function lockConfiguration(options: LockConfigurationOptions): LockConfiguration {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('Lock configuration is missing: pass { name, lockAtMostFor, lockAtLeastFor? }')
  }
  const { name } = options
  if (typeof name !== 'string') {
    throw new LockConfigurationError(`Lock name must be a string, got ${name === null ? 'null' : typeof name}: give every lock a non-empty name, e.g. "nightly-report"`)
  }
  if (name.trim() === '') {
    throw new LockConfigurationError(`Lock name ${JSON.stringify(name)} is blank: give every lock a non-empty name, e.g. "nightly-report"`)
  }
  // Stores keep names as UTF-8, where a lone surrogate becomes U+FFFD: "a\uD800" and "a\uFFFD"
  // would be one lock.
  if (LONE_SURROGATE.test(name)) {
    throw new LockConfigurationError(`Lock name ${JSON.stringify(name)} is not well-formed Unicode (it has a lone surrogate), so stores cannot keep it apart from other names; fix the string`)
  }
  if (options.lockAtMostFor === undefined || options.lockAtMostFor === null) {
    throw new LockConfigurationError(`Lock "${name}": lockAtMostFor is required; set it well above the task's normal duration, e.g. "10m"`)
  }
  const lockAtMostFor = durationOf(name, 'lockAtMostFor', options.lockAtMostFor)
  const lockAtLeastFor = durationOf(name, 'lockAtLeastFor', options.lockAtLeastFor ?? 0)
  if (lockAtLeastFor > lockAtMostFor) {
    throw new LockConfigurationError(
      `Lock "${name}": lockAtLeastFor (${show(options.lockAtLeastFor, lockAtLeastFor)}) is longer than lockAtMostFor (${show(options.lockAtMostFor, lockAtMostFor)}); make lockAtMostFor at least as long as lockAtLeastFor`,
    )
  }
  const createdAt = options.createdAt ?? new Date()
  if (!(createdAt instanceof Date) || Number.isNaN(createdAt.getTime())) {
    throw new LockConfigurationError(`Lock "${name}": createdAt must be a valid Date`)
  }
  const start = createdAt.getTime()
  // A Date ends at ±8.64e15 ms: later deadlines would be Invalid Dates, which every timer and
  // store comparison reads as "already expired".
  if (!Number.isFinite(new Date(start + lockAtMostFor).getTime())) {
    throw new LockConfigurationError(`Lock "${name}": createdAt + lockAtMostFor is past the last date JavaScript can hold (+275760-09-13); use a shorter lockAtMostFor`)
  }
  return Object.freeze({
    name,
    createdAt: new Date(start),
    lockAtMostFor,
    lockAtLeastFor,
    lockAtMostUntil: new Date(start + lockAtMostFor),
    lockAtLeastUntil: new Date(start + lockAtLeastFor),
  })
}

/** True when `value` is a configuration built by {@link lockConfiguration} (or looks exactly like one). */
export function isLockConfiguration(value: unknown): value is LockConfiguration {
  const v = value as LockConfiguration | null
  return typeof v === 'object' && v !== null && v.lockAtMostUntil instanceof Date && v.lockAtLeastUntil instanceof Date && v.createdAt instanceof Date
}

function durationOf(name: string, field: string, value: Duration): number {
  try {
    return parseDuration(value)
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error)
    throw new LockConfigurationError(`Lock "${name}": ${field} is invalid. ${reason}`)
  }
}

function show(input: Duration | undefined, ms: number): string {
  return typeof input === 'string' ? input : formatDuration(ms)
}
