import { LockConfigurationError } from '../../core/errors.ts'
import { nameTooLong } from '../../support/lock-request.ts'
import { type DescribeStoreError, messageOf, outcomeOf, storeError } from '../../support/store-errors.ts'

// A lock in Deno KV: key [prefix, name], value { lockUntil, lockedAt, lockedBy } (Dates and a
// string, which KV stores as they are). Here: the parts of Deno.Kv that the provider and the
// inspector call, the key and value, and what KV's errors mean.

/** The provider's name, as messages and diagnostics give it. */
export const PROVIDER = 'deno-kv'

/** The default first part of every lock key. */
export const DEFAULT_PREFIX = 'shedlock'

/** A key of Deno KV, as the provider writes it: `[prefix, name]`. */
export type DenoKvLockKey = readonly [string, string]

/** An entry as `Deno.Kv.get()` and `list()` return it; `versionstamp` is `null` when the key is missing. */
export interface DenoKvLockEntry {
  readonly key: readonly unknown[]
  readonly value: unknown
  readonly versionstamp: string | null
}

/** The part of `Deno.AtomicOperation` that the provider calls. */
export interface DenoKvLockAtomic {
  check(...checks: { key: DenoKvLockKey; versionstamp: string | null }[]): DenoKvLockAtomic
  set(key: DenoKvLockKey, value: unknown, options?: { expireIn?: number }): DenoKvLockAtomic
  delete(key: DenoKvLockKey): DenoKvLockAtomic
  /** `versionstamp` is the commit's (20 hex digits, increasing per database), when `ok`. */
  commit(): Promise<{ readonly ok: boolean; readonly versionstamp?: string }>
}

/**
 * The part of a `Deno.Kv` (from `Deno.openKv()`) that the provider and the inspector call. We
 * import no Deno types: pass the `Deno.Kv` as it is.
 */
export interface DenoKvLockDatabase {
  get(key: DenoKvLockKey): Promise<DenoKvLockEntry>
  list(selector: { prefix: readonly [string] }): AsyncIterable<DenoKvLockEntry>
  atomic(): DenoKvLockAtomic
}

/** A lock value as the provider writes it. */
export interface DenoKvLockValue {
  lockUntil: Date
  lockedAt: Date
  lockedBy: string
}

/** The error for a `kv` that is not a `Deno.Kv`. */
export const NOT_A_KV =
  'deno-kv: pass your Deno.Kv as { kv }, e.g. await Deno.openKv() (an object with get, list and atomic)'

/** Checks `kv` and `prefix`; the prefix to use. */
export function checkOptions(kv: unknown, prefix: unknown): string {
  const database = kv as Partial<DenoKvLockDatabase> | null | undefined
  if (
    !database ||
    typeof database.get !== 'function' ||
    typeof database.atomic !== 'function' ||
    typeof database.list !== 'function'
  )
    throw new LockConfigurationError(NOT_A_KV)
  if (prefix === undefined) return DEFAULT_PREFIX
  if (typeof prefix !== 'string' || prefix === '')
    throw new LockConfigurationError(
      `deno-kv: keyPrefix must be a non-empty string (the first part of every lock key), got ${JSON.stringify(prefix)}`,
    )
  return prefix
}

/** Deno KV refuses keys over 2048 bytes in writes. */
export const MAX_KEY_BYTES = 2048

const encoder = new TextEncoder()

/** The size of a string key part as KV encodes it: a type byte, the UTF-8 bytes with each NUL escaped by one more byte, a terminating NUL. */
function partBytes(part: string): number {
  let nuls = 0
  for (let i = part.indexOf('\0'); i !== -1; i = part.indexOf('\0', i + 1)) nuls++
  return 2 + encoder.encode(part).length + nuls
}

/**
 * The key of lock `name`.
 * @throws LockConfigurationError when the key is longer than KV holds, before anything is sent.
 */
export function lockKey(prefix: string, name: string): DenoKvLockKey {
  const size = partBytes(prefix) + partBytes(name)
  if (size > MAX_KEY_BYTES)
    throw nameTooLong(PROVIDER, name, size, MAX_KEY_BYTES, 'bytes', `the key [${JSON.stringify(prefix)}, name]`)
  return [prefix, name]
}

/** The value of an entry if it is a lock value of this provider; `undefined` for anything else. */
export function lockValue(value: unknown): DenoKvLockValue | undefined {
  const v = value as Partial<DenoKvLockValue> | null
  if (v === null || typeof v !== 'object' || !(v.lockUntil instanceof Date) || Number.isNaN(v.lockUntil.getTime()))
    return undefined
  return v as DenoKvLockValue
}

/** What a Deno KV error means for the lock. A closed `Deno.Kv` throws `BadResource`. */
export const describeDenoKvError: DescribeStoreError = (error, action, lockName) => {
  const detail = messageOf(error)
  const closed = (error as { name?: unknown } | null)?.name === 'BadResource'
  const advice = closed
    ? `the Deno.Kv is closed (${detail}); ${outcomeOf(action)}. Keep it open while the provider is in use`
    : `${detail}; ${outcomeOf(action)}`
  return storeError(PROVIDER, action, lockName, advice, error)
}

/**
 * Deno KV on a local file (SQLite) answers `TypeError: database is locked` to an atomic
 * operation with checks when another handle on the file (another process) writes at the same
 * moment: SQLite refuses to turn the operation's read into a write, and nothing is written.
 */
export function isBusy(error: unknown): boolean {
  return error instanceof Error && /\bdatabase is locked\b/i.test(error.message)
}

/** How long {@link retryBusy} keeps retrying, in ms. */
export const BUSY_RETRY_MS = 2_000

/**
 * Runs `operation` (a read and an owner- or versionstamp-checked commit, so running it again is
 * safe) again while it fails with {@link isBusy}, after a short random pause that grows, for at
 * most {@link BUSY_RETRY_MS}; then the last error is thrown.
 */
export async function retryBusy<T>(operation: () => Promise<T>): Promise<T> {
  const started = Date.now()
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation()
    } catch (error) {
      if (!isBusy(error) || Date.now() - started > BUSY_RETRY_MS) throw error
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 * attempt)))
    }
  }
}
