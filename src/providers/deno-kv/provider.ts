import { type Clock, systemClock } from '../../core/clock.ts'
import { parseDuration, type Duration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkOptions,
  type DenoKvLockDatabase,
  type DenoKvLockEntry,
  type DenoKvLockKey,
  type DenoKvLockValue,
  describeDenoKvError,
  lockKey,
  lockValue,
  PROVIDER,
  retryBusy,
} from './format.ts'
import { denoKvLockInspector } from './inspector.ts'

/** Options of {@link denoKvLockProvider}. */
export interface DenoKvLockProviderOptions {
  /** Your `Deno.Kv`, from `await Deno.openKv()`. The provider never opens or closes it. */
  kv: DenoKvLockDatabase
  /** First part of every lock key: lock `name` is the key `[keyPrefix, name]`. @default "shedlock" */
  keyPrefix?: string
  /**
   * Prefix of the `lockedBy` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * The clock that decides expiry. Deno KV has no server time a check could compare with, so
   * each node compares `lockUntil` with its own clock: keep the nodes' clocks in sync.
   * @default systemClock
   */
  clock?: Clock
  /**
   * Let Deno KV delete a lock's entry this long (ms or a duration string) after its `lockUntil`
   * (`expireIn` on every write), so that entries of lock names that are no longer used go away
   * by themselves. KV deletes an expired key at some time after it expires, never before, so a
   * held lock is never deleted. @default never: entries stay, as in the other stores
   */
  expireAfter?: Duration
}

/** Commits that lost a race against another writer of the same entry are retried this many times. */
const RETRIES = 8

/**
 * Locks in Deno KV (`Deno.openKv()`: a SQLite file locally, FoundationDB on Deno Deploy): one entry
 * per lock, key `[keyPrefix, name]`, taken by an atomic operation that checks the versionstamp it
 * read. Extensible; expiry is decided on each node's `clock`; a lock's `fencingToken` is the
 * versionstamp of the commit that took it (80 bits: fence with a `numeric(25)` column, not a
 * `bigint` one).
 *
 * ```ts
 * import { denoKvLockProvider, type DenoKvLockDatabase } from 'shedlock/deno-kv'
 * declare const kv: DenoKvLockDatabase // in Deno: const kv = await Deno.openKv()
 * const provider = denoKvLockProvider({ kv })
 * ```
 *
 * See docs/providers/deno-kv.md.
 *
 * @throws LockConfigurationError when `kv` is not a `Deno.Kv`, or for an empty `keyPrefix` or `lockedBy`, or a bad `expireAfter`.
 */
export function denoKvLockProvider(
  options: DenoKvLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { kv, lockedBy } = options ?? {}
  const prefix = checkOptions(kv, options?.keyPrefix)
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `deno-kv: lockedBy must be a non-empty string (it prefixes the lockedBy field), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const expireAfter = options.expireAfter === undefined ? undefined : parseDuration(options.expireAfter)
  const clock = options.clock ?? systemClock
  const guard = storeGuard(describeDenoKvError)

  // The entry's own deletion, if asked for: never before lockUntil (KV deletes late, never early).
  const write = (
    key: DenoKvLockKey,
    entry: DenoKvLockEntry,
    value: DenoKvLockValue,
  ): Promise<{ readonly ok: boolean; readonly versionstamp?: string }> => {
    const expireIn =
      expireAfter === undefined ? undefined : Math.max(0, value.lockUntil.getTime() - clock.now()) + expireAfter
    return kv
      .atomic()
      .check({ key, versionstamp: entry.versionstamp })
      .set(key, value, expireIn === undefined ? undefined : { expireIn })
      .commit()
  }

  /** Resolves to `false` when the lock is held, else to the fencing token: the commit's versionstamp as a number. */
  const acquire = async (
    configuration: LockConfiguration,
    key: DenoKvLockKey,
    owner: string,
  ): Promise<false | bigint | undefined> => {
    const entry = await kv.get(key)
    const now = clock.now()
    if (entry.versionstamp !== null) {
      const current = lockValue(entry.value)
      if (!current || current.lockUntil.getTime() > now) return false
    }
    const { ok, versionstamp } = await write(key, entry, {
      lockUntil: configuration.lockAtMostUntil,
      lockedAt: new Date(now),
      lockedBy: owner,
    })
    if (!ok) return false
    return typeof versionstamp === 'string' && /^[0-9a-f]{1,32}$/i.test(versionstamp)
      ? BigInt(`0x${versionstamp}`)
      : undefined
  }

  /**
   * Rewrites this acquisition's entry with `change` applied, if it still holds it (and `live`:
   * `lockUntil` is ahead of now). A commit fails only when somebody else wrote the entry since it
   * was read (an operator's force-release, a takeover after expiry): read it again, and it
   * belongs to another owner by then. Resolves to whether it wrote.
   */
  const rewrite = async (
    key: DenoKvLockKey,
    owner: string,
    live: boolean,
    change: (value: DenoKvLockValue) => Partial<DenoKvLockValue>,
  ): Promise<boolean> => {
    for (let attempt = 0; attempt <= RETRIES; attempt++) {
      const entry = await kv.get(key)
      const current = lockValue(entry.value)
      if (!current || current.lockedBy !== owner || (live && current.lockUntil.getTime() <= clock.now())) return false
      if ((await write(key, entry, { ...current, ...change(current) })).ok) return true
    }
    throw new Error(`the entry changed under ${RETRIES + 1} attempts in a row`)
  }

  return {
    name: PROVIDER,
    inspector: () => denoKvLockInspector({ kv, keyPrefix: prefix, clock }),
    async lock(configuration) {
      checkLockRequest(PROVIDER, configuration, clock)
      const key = lockKey(prefix, configuration.name)
      const owner = lockOwner(lockedBy)
      const fencingToken = await guard('acquire', configuration.name, () =>
        retryBusy(() => acquire(configuration, key, owner)),
      )
      if (fencingToken === false) return undefined
      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        ...(fencingToken === undefined ? {} : { fencingToken }),
        unlock: (current) =>
          guard('release', current.name, async () => {
            await retryBusy(() =>
              rewrite(key, owner, false, () => ({
                lockUntil: new Date(Math.max(clock.now(), current.lockAtLeastUntil.getTime())),
              })),
            )
          }),
        extend: (next) =>
          guard('extend', next.name, () =>
            retryBusy(() => rewrite(key, owner, true, () => ({ lockUntil: next.lockAtMostUntil }))),
          ),
      })
    },
  }
}
