import { type Duration, formatDuration, parseDuration } from './duration.ts'
import { LockConfigurationError } from './errors.ts'

const LONE_SURROGATE = /\p{Cs}/u
// 9999-12-31T23:59:59.999Z: the last instant every store can hold and that ISO-8601 strings keep
// in time order (a later one is written "+010000-…", which sorts before "2026-…").
const LATEST_DEADLINE_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

// Configurations built by lockConfiguration() are instances of this class, recognised by its
// private brand, which no other object can carry: everything else is re-validated or refused, so
// an object that only looks like one (a blank name, a negative duration) never reaches a store.
// (A WeakSet of built configurations did the same at several times the cost, one per attempt.)
class BuiltLockConfiguration implements LockConfiguration {
  readonly #built = true
  readonly name: string
  readonly createdAt: Date
  readonly lockAtMostFor: number
  readonly lockAtLeastFor: number
  readonly lockAtMostUntil: Date
  readonly lockAtLeastUntil: Date

  constructor(name: string, start: number, lockAtMostFor: number, lockAtLeastFor: number) {
    this.name = name
    this.createdAt = new Date(start)
    this.lockAtMostFor = lockAtMostFor
    this.lockAtLeastFor = lockAtLeastFor
    this.lockAtMostUntil = new Date(start + lockAtMostFor)
    this.lockAtLeastUntil = new Date(start + lockAtLeastFor)
    Object.freeze(this)
  }

  static is(value: unknown): value is LockConfiguration {
    return typeof value === 'object' && value !== null && #built in value
  }
}

/** What you pass to {@link lockConfiguration}. */
export interface LockConfigurationOptions {
  /** The lock's name, shared by every node that runs the task. Must not be blank. */
  name: string
  /**
   * How long the lock is held at most, if the holder never releases it (for example because the
   * process died). Set it well above the task's normal duration. Milliseconds or a duration
   * string; more than 0 (a lock that expires as it is taken excludes nobody).
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
 *   negative duration, a `lockAtMostFor` of 0, `lockAtLeastFor` longer than `lockAtMostFor`, or
 *   a `lockAtMostUntil` after 9999-12-31T23:59:59.999Z; the message names the lock and the fix.
 */
export function lockConfiguration(options: LockConfigurationOptions): LockConfiguration {
  return configurationAt(options, undefined)
}

// Names found valid, so that a task's lock, built again at every call, is checked once: the
// checks (a trim, a Unicode regular expression) cost 1.0 k of the 93.6 k instructions of a
// PostgreSQL lock() + unlock() (scripts/instructions.mjs, 2026-12-08). Bounded: cleared when full.
const CHECKED_NAMES = new Set<string>()
const CHECKED_NAMES_MAX = 1024

/** Throws for a blank name or one that is not well-formed Unicode; remembers a good one. */
function checkName(name: string): void {
  if (name.trim() === '') {
    throw new LockConfigurationError(
      `Lock name ${JSON.stringify(name)} is blank: give every lock a non-empty name, e.g. "nightly-report"`,
    )
  }
  // Stores keep names as UTF-8, where a lone surrogate becomes U+FFFD: "a\uD800" and "a\uFFFD"
  // would be one lock.
  if (LONE_SURROGATE.test(name)) {
    throw new LockConfigurationError(
      `Lock name ${JSON.stringify(name)} is not well-formed Unicode (it has a lone surrogate), so stores cannot keep it apart from other names; fix the string`,
    )
  }
  if (CHECKED_NAMES.size >= CHECKED_NAMES_MAX) CHECKED_NAMES.clear()
  CHECKED_NAMES.add(name)
}

/**
 * {@link lockConfiguration} with `createdAt` defaulting to `nowMs` (epoch ms, an injected
 * clock's) instead of the system time. Internal: the executor builds one per call, and copying
 * the caller's options only to add `createdAt` cost more than the rest of the validation.
 */
export function configurationAt(options: LockConfigurationOptions, nowMs: number | undefined): LockConfiguration {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('Lock configuration is missing: pass { name, lockAtMostFor, lockAtLeastFor? }')
  }
  const { name } = options
  if (typeof name !== 'string') {
    throw new LockConfigurationError(
      `Lock name must be a string, got ${name === null ? 'null' : typeof name}: give every lock a non-empty name, e.g. "nightly-report"`,
    )
  }
  if (!CHECKED_NAMES.has(name)) checkName(name)
  if (options.lockAtMostFor === undefined || options.lockAtMostFor === null) {
    throw new LockConfigurationError(
      `Lock "${name}": lockAtMostFor is required; set it well above the task's normal duration, e.g. "10m"`,
    )
  }
  const lockAtMostFor = durationOf(name, 'lockAtMostFor', options.lockAtMostFor)
  if (lockAtMostFor === 0) {
    throw new LockConfigurationError(
      `Lock "${name}": lockAtMostFor is 0, so the lock would expire as it is taken and another node could run the task at the same time; set it well above the task's normal duration, e.g. "10m"`,
    )
  }
  const lockAtLeastFor = durationOf(name, 'lockAtLeastFor', options.lockAtLeastFor ?? 0)
  if (lockAtLeastFor > lockAtMostFor) {
    throw new LockConfigurationError(
      `Lock "${name}": lockAtLeastFor (${show(options.lockAtLeastFor, lockAtLeastFor)}) is longer than lockAtMostFor (${show(options.lockAtMostFor, lockAtMostFor)}); make lockAtMostFor at least as long as lockAtLeastFor`,
    )
  }
  const { createdAt } = options
  let start: number
  if (createdAt === undefined || createdAt === null) start = nowMs ?? Date.now()
  else if (!(createdAt instanceof Date) || Number.isNaN(createdAt.getTime())) {
    throw new LockConfigurationError(`Lock "${name}": createdAt must be a valid Date`)
  } else start = createdAt.getTime()
  // Later deadlines are Invalid Dates (past +275760) or ISO strings that sort before today's
  // (past 9999): stores that compare them would read a held lock as expired.
  if (start + lockAtMostFor > LATEST_DEADLINE_MS) {
    throw new LockConfigurationError(
      `Lock "${name}": createdAt + lockAtMostFor is after 9999-12-31T23:59:59.999Z, the last time the stores can hold; use a shorter lockAtMostFor`,
    )
  }
  return new BuiltLockConfiguration(name, start, lockAtMostFor, lockAtLeastFor)
}

/**
 * A configuration of a name known to be valid (a checked lock name with an ASCII suffix, such as a
 * slot record's), from epoch ms and durations in ms: the name's checks are skipped, the rest goes
 * through {@link configurationAt}'s when a duration or deadline is out of bounds. Internal: the
 * slot record's configuration of every slot run (the checks were 2 % of a profile of slot runs).
 */
export function configurationOfChecked(
  name: string,
  start: number,
  lockAtMostFor: number,
  lockAtLeastFor: number,
): LockConfiguration {
  if (
    lockAtMostFor > 0 &&
    lockAtLeastFor >= 0 &&
    lockAtLeastFor <= lockAtMostFor &&
    start + lockAtMostFor <= LATEST_DEADLINE_MS
  )
    return new BuiltLockConfiguration(name, start, lockAtMostFor, lockAtLeastFor)
  return configurationAt({ name, lockAtMostFor, lockAtLeastFor, createdAt: new Date(start) }, undefined)
}

/** True when `value` was built by {@link lockConfiguration}; an object that only looks like one is not. */
export function isLockConfiguration(value: unknown): value is LockConfiguration {
  return BuiltLockConfiguration.is(value)
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
