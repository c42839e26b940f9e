import { type Clock, systemClock } from '../../core/clock.ts'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { LockProvider, SimpleLock } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { addedValue } from '../../support/added-value.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { type TimedStoreCall, timedStoreCall } from '../../support/with-timeout.ts'
import {
  DEFAULT_ENVIRONMENT,
  describeMemcachedError,
  encodeKey,
  memcachedKeyPrefix,
  PROVIDER,
  textOf,
} from './format.ts'

/**
 * The part of a `memjs` 1.3 `Client` that this provider calls (the promise forms). We don't
 * import memjs: pass your `memjs.Client.create(...)` as is. Keep its default (no-op) serializer:
 * the provider writes and compares plain strings.
 */
export interface MemcachedClient {
  /** Resolves to `{ value: null }` when the key is missing; memjs gives the value as a Buffer. */
  get(key: string): Promise<{ value: unknown }>
  /** Stores `value` only if `key` is missing; resolves to `false` if it exists. `expires` in seconds, see memcached's rules. */
  add(key: string, value: string, options: { expires: number }): Promise<boolean>
  /** Stores `value` only if `key` exists; resolves to `false` if it is missing. */
  replace(key: string, value: string, options: { expires: number }): Promise<boolean>
  /** Resolves to `false` if the key was missing. */
  delete(key: string): Promise<boolean>
}

/** Options of {@link memcachedLockProvider}. */
export interface MemcachedLockProviderOptions {
  /** Your memjs 1.3 client. The provider never opens or closes connections. */
  client: MemcachedClient
  /**
   * The middle part of every key, `shedlock:<environment>:<name>`, to keep apart fleets that share
   * a memcached (Java ShedLock's `env`). No spaces, control characters or `:`. @default "default"
   */
  environment?: string
  /**
   * Longest wait for one lock operation, as a duration (milliseconds or a string such as `"5s"`):
   * an acquire's `add`, or a release's `get` and `delete` (or `replace`) together. Past it, the
   * operation rejects with `LockProviderError`. memjs normally gives up sooner by itself
   * (its `timeout`, `conntimeout` and `retries` options: about 2.5 s with its defaults), but a
   * connection that the server closes while a request is in flight never calls back.
   * @default "5s"
   */
  timeout?: Duration
  /** The clock of the `ADDED:<time>` part of the value and of expiries beyond 30 days. @default systemClock */
  clock?: Clock
}

// memcached reads an expiration above 30 days as an absolute Unix time, not as seconds from now.
const RELATIVE_LIMIT_S = 2_592_000
// Expirations travel as 32-bit unsigned integers: the latest is 2106-02-07T06:28:15Z (memjs
// throws a RangeError for a larger one).
const MAX_EXPIRATION = 0xffff_ffff
const LATEST_DEADLINE = {
  ms: MAX_EXPIRATION * 1000,
  why: 'memcached expirations are 32-bit Unix times, the last one 2106-02-07T06:28:15Z',
} as const
const LIMITS = { latestDeadline: LATEST_DEADLINE }
// memcached's clock ticks in whole seconds, so a record may vanish up to 1 s before
// lockAtMostUntil, and another node may add its own at once. An unlock this close to
// lockAtMostUntil leaves the record to expire by itself rather than risk deleting a newer lock
// in the gap between its get and its delete (memjs 1.3 has no compare-and-swap).
const UNLOCK_GUARD_MS = 2_000

/**
 * The expiration memcached needs for a record that must live until `untilMs`: whole seconds,
 * rounded up and at least 1 (0 would mean "never expires"), or the absolute Unix time in seconds
 * when that is more than 30 days away. lock() refuses deadlines past MAX_EXPIRATION.
 */
function expiration(untilMs: number, nowMs: number): number {
  const seconds = Math.max(1, Math.ceil((untilMs - nowMs) / 1000))
  if (seconds <= RELATIVE_LIMIT_S) return seconds
  return Math.ceil(untilMs / 1000)
}

/**
 * Locks as memcached keys in Java ShedLock's format (`shedlock:<environment>:<name>`, one `add`
 * per acquisition), through your memjs client. Not extensible, like Java's; no fencing tokens.
 * memcached may evict a held lock or lose it on a restart, and expires in whole seconds (a lock
 * may end up to 1 s early): use it only where an occasional double run is acceptable.
 *
 * ```ts
 * import memjs from 'memjs'
 * import { memcachedLockProvider } from 'shedlock/memcached'
 * const provider = memcachedLockProvider({ client: memjs.Client.create('127.0.0.1:11211') })
 * ```
 *
 * See docs/providers/memcached.md.
 *
 * @throws LockConfigurationError for a missing client, an invalid `environment` or `timeout`.
 */
export function memcachedLockProvider(options: MemcachedLockProviderOptions): LockProvider {
  const { client } = options ?? {}
  if (
    !client ||
    (['get', 'add', 'replace', 'delete'] as const).some((method) => typeof client[method] !== 'function')
  ) {
    throw new LockConfigurationError(
      "memcached: pass your memjs client as { client }, e.g. memjs.Client.create('127.0.0.1:11211')",
    )
  }
  const prefix = memcachedKeyPrefix(options.environment ?? DEFAULT_ENVIRONMENT)
  const timeoutMs = parseDuration(options.timeout ?? '5s')
  if (timeoutMs <= 0) throw new LockConfigurationError('memcached: timeout must be longer than 0 ms')
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('memcached: clock must have a now() method returning epoch milliseconds')

  // One promise per operation, its timeout in the shared heap of pending calls (measured in
  // core/deadline.ts), and the error mapping folded in.
  const call: TimedStoreCall<unknown> = {
    store: 'memcached',
    timeoutMs,
    describe: (error, action, name) => describeMemcachedError(error, action, name),
  }

  // Checked before anything is sent: a key memcached refuses stalls the connection.
  const keyOf = (name: string): string => {
    const key = encodeKey(prefix, name)
    if (typeof key !== 'string') throw key
    return key
  }

  return {
    name: PROVIDER,
    lock(configuration: LockConfiguration): Promise<SimpleLock | undefined> {
      let now: number
      let key: string
      try {
        now = checkLockRequest(PROVIDER, configuration, clock, LIMITS)
        key = keyOf(configuration.name)
      } catch (error) {
        return Promise.reject(error)
      }
      const owner = lockOwner()
      const value = addedValue(now, owner)
      const expires = expiration(configuration.lockAtMostUntil.getTime(), now)
      return timedStoreCall(call, 'acquire', configuration.name, () => client.add(key, value, { expires }), {
        map: (added: unknown): SimpleLock | undefined =>
          added === true
            ? defineLock(configuration, {
                clock,
                lockedBy: owner,
                // The release's get and its delete (or replace) under one timeout: a release is
                // bounded as one operation, whichever of its steps the store stalls in. What it
                // throws (a custom clock's error too) is described like a store's error.
                unlock: (held) =>
                  timedStoreCall(call as TimedStoreCall<void>, 'release', configuration.name, () =>
                    releaseIfOwned(client, clock, key, value, held),
                  ),
              })
            : undefined,
      })
    },
  }
}

/**
 * Frees `key` if it still holds `value` (this acquisition's), or keeps it until
 * `lockAtLeastUntil`; a record that is someone else's by now, or gone, is left alone.
 */
async function releaseIfOwned(
  client: MemcachedClient,
  clock: Clock,
  key: string,
  value: string,
  held: LockConfiguration,
): Promise<void> {
  const lockAtMostUntil = held.lockAtMostUntil.getTime()
  if (lockAtMostUntil - clock.now() < UNLOCK_GUARD_MS) return
  const { value: stored } = await client.get(key)
  // Someone else's record (this one expired or was evicted, and another node took the lock), or none.
  if (textOf(stored) !== value) return
  const now = clock.now()
  if (lockAtMostUntil - now < UNLOCK_GUARD_MS) return
  const lockAtLeastUntil = held.lockAtLeastUntil.getTime()
  if (Math.ceil((lockAtLeastUntil - now) / 1000) <= 0) await client.delete(key)
  else await client.replace(key, value, { expires: expiration(lockAtLeastUntil, now) })
}
