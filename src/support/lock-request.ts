import type { Clock } from '../core/clock.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { isLockConfiguration, type LockConfiguration } from '../core/lock-configuration.ts'

/** What one store cannot hold, checked before it is asked. */
export interface StoreLimits {
  /** The latest `lockAtMostUntil` the store can hold (epoch ms), and how to say so, e.g. "MySQL TIMESTAMP columns end at 2038-01-19T03:14:07Z". */
  readonly latestDeadline?: { readonly ms: number; readonly why: string }
}

// A constant, not a default `{}`: that would be a new object on every acquisition.
const NO_LIMITS: StoreLimits = {}

/**
 * Checks a configuration on its way into a provider's `lock()`: every provider calls it first, so
 * that no store is ever asked for a lock that would not exclude anybody.
 *
 * @throws LockConfigurationError for an object not built by `lockConfiguration()` (a look-alike
 *   may hold a blank name or a negative duration), for a configuration whose `lockAtMostUntil`
 *   has passed on `clock` (a configuration kept from an earlier tick: the store would take an
 *   already-expired lock, and another node could run the task at once), or for a deadline past
 *   what the store can hold.
 * @returns the time read from `clock` (epoch milliseconds), for the provider to reuse.
 */
export function checkLockRequest(
  provider: string,
  configuration: LockConfiguration,
  clock: Clock,
  limits: StoreLimits = NO_LIMITS,
): number {
  if (!isLockConfiguration(configuration)) {
    const name = (configuration as { name?: unknown } | null)?.name
    throw new LockConfigurationError(
      `${provider}: lock${typeof name === 'string' ? ` "${name}"` : ''}: lock() needs a configuration built by lockConfiguration({ name, lockAtMostFor, lockAtLeastFor }), not an object that looks like one`,
    )
  }
  const until = configuration.lockAtMostUntil.getTime()
  const now = clock.now()
  if (until <= now) {
    throw new LockConfigurationError(
      `Lock "${configuration.name}": its configuration expired at ${configuration.lockAtMostUntil.toISOString()} (createdAt + lockAtMostFor) before the ${provider} provider was asked, so the lock would exclude nobody; build a fresh configuration for every attempt (lockConfiguration(), or pass options to executeWithLock())`,
    )
  }
  const latest = limits.latestDeadline
  if (latest && until > latest.ms) {
    throw new LockConfigurationError(
      `Lock "${configuration.name}": lockAtMostUntil ${configuration.lockAtMostUntil.toISOString()} is later than ${provider} can hold (${latest.why}); use a shorter lockAtMostFor`,
    )
  }
  return now
}

/**
 * The error for a lock name longer than the store holds, thrown before anything is sent.
 * `size` and `limit` count `unit`s of `what` (the name itself, or the key built from it).
 */
export function nameTooLong(
  provider: string,
  name: string,
  size: number,
  limit: number,
  unit: 'bytes' | 'characters',
  what: string,
): LockConfigurationError {
  const shown = name.length > 80 ? `${JSON.stringify(name.slice(0, 80))}…` : JSON.stringify(name)
  return new LockConfigurationError(
    `Lock ${shown}: ${what} is ${size} ${unit}, and ${provider} holds at most ${limit}; use a shorter lock name`,
  )
}

/**
 * The error for a lock whose store key, `key` (`prefix` and then the name), is over `maxBytes` of
 * UTF-8; `undefined` when it fits. For stores that break a connection on an oversized key, so it
 * is checked before anything is sent.
 */
export function keyTooLong(
  provider: string,
  name: string,
  key: string,
  maxBytes: number,
  prefix: string,
): LockConfigurationError | undefined {
  const bytes = utf8LengthOver(key, maxBytes)
  if (bytes === undefined) return undefined
  return nameTooLong(provider, name, bytes, maxBytes, 'bytes', `its key ${JSON.stringify(`${prefix}…`)}`)
}

/**
 * The UTF-8 length of `text` in bytes when it is over `limit`, otherwise `undefined`. Only a
 * string that could be that long is measured (UTF-8 takes at most 3 bytes per UTF-16 code unit):
 * `Buffer.byteLength()` of a freshly concatenated key on every acquisition made most of the Redis
 * provider's per-lock garbage outlive the young generation, 10 times the memory promoted per
 * collection with 16 callers (`node --trace-gc-nvp`).
 */
export function utf8LengthOver(text: string, limit: number): number | undefined {
  if (text.length * 3 <= limit) return undefined
  const bytes = Buffer.byteLength(text)
  return bytes > limit ? bytes : undefined
}
