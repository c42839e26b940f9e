import { type Clock, systemClock } from '../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { defineLock } from '../support/define-lock.ts'

/** One entry as a `@nats-io/kv` 3 bucket returns it from `get()`. */
export interface NatsKvEntry {
  /** The stored bytes; empty for a delete or purge marker. */
  readonly value: Uint8Array
  /** The stream sequence of this entry: what `update()` and `delete({ previousSeq })` compare against. */
  readonly revision: number
  /** `DEL` and `PURGE` entries are markers left by a delete: the key counts as missing. */
  readonly operation: 'PUT' | 'DEL' | 'PURGE'
}

/**
 * The part of a JetStream KV bucket (`KV` from `@nats-io/kv` 3) that this provider calls. We
 * don't import `@nats-io/kv`: pass the bucket that `new Kvm(nc).create('shedlock-locks')` or
 * `new Kvm(nc).open('shedlock-locks')` resolves to.
 */
export interface NatsKv {
  /** The last entry of `key`, a delete marker included, or `null` if it has none. */
  get(key: string): Promise<NatsKvEntry | null>
  /** Writes `key` if it has no entry, or only a delete marker; resolves to the new revision. */
  create(key: string, data: Uint8Array): Promise<number>
  /** Writes `key` if its last revision is `version`; resolves to the new revision. */
  update(key: string, data: Uint8Array, version: number): Promise<number>
  /** Leaves a delete marker on `key`, if its last revision is `previousSeq`. */
  delete(key: string, options: { previousSeq: number }): Promise<void>
}

/** Options of {@link natsLockProvider}. */
export interface NatsLockProviderOptions {
  /**
   * Your JetStream KV bucket, from `@nats-io/kv` 3. Java ShedLock's bucket is named
   * {@link NATS_LOCK_BUCKET} (`shedlock-locks`); use it to share locks with Java nodes.
   */
  kv: NatsKv
  /** Decides when locks expire: the stored `lockUntil` is this clock's time. @default systemClock */
  clock?: Clock
}

/** Java ShedLock's default bucket name, `shedlock-locks`. */
export const NATS_LOCK_BUCKET = 'shedlock-locks'

const PROVIDER = 'nats'
// JetStream's "wrong last sequence": an expected-revision write found another revision. 10164 is
// the variant newer servers send when the subject's last sequence is unknown; @nats-io/kv's own
// create() treats both the same way.
const WRONG_LAST_SEQUENCE = new Set([10071, 10164])
const STREAM_NOT_FOUND = 10059
// Characters a plain name may contain: what KV keys accept (@nats-io/kv's /^[-/=.\w]+$/).
const PLAIN = /^[-/=.\w]+$/
// Characters written as themselves inside an encoded key; everything else becomes =XX per UTF-8 byte.
const KEPT = /[-/\w]/
const LONE_SURROGATE = /\p{Cs}/u

/**
 * The KV key of lock `name`. A name made only of `A–Z a–z 0–9 - _ / = .` that does not start
 * with `=` or `.`, does not end with `.` and has no `..` is its own key, as Java ShedLock writes
 * it. Any other name becomes `=` followed by the name with every character outside
 * `A–Z a–z 0–9 - _ /` written as `=XX` per UTF-8 byte (uppercase hex): `report:daily` →
 * `=report=3Adaily`, `été` → `==C3=A9t=C3=A9`. Plain keys never start with `=`, so two names never
 * share a key.
 *
 * @throws LockConfigurationError for a name that is not well-formed Unicode (a lone surrogate).
 */
export function natsLockKey(name: string): string {
  const key = encodeKey(name)
  if (key === undefined) throw new LockConfigurationError(`Lock name ${JSON.stringify(name)} is not well-formed Unicode (it has a lone surrogate); NATS keys cannot hold it`)
  return key
}

function encodeKey(name: string): string | undefined {
  // NATS keys are subject tokens joined by dots: an empty token (leading, trailing or double dot)
  // is not a key the server can store, so such names are encoded too.
  if (PLAIN.test(name) && !name.startsWith('=') && !name.startsWith('.') && !name.endsWith('.') && !name.includes('..')) return name
  // UTF-8 cannot represent a lone surrogate: TextEncoder would turn every one into U+FFFD and
  // make distinct names collide.
  if (LONE_SURROGATE.test(name)) return undefined
  let key = '='
  for (const char of name) {
    if (KEPT.test(char)) key += char
    else for (const byte of Buffer.from(char, 'utf8')) key += `=${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return key
}

/**
 * Locks in a NATS JetStream KV bucket, in Java ShedLock's format: the key is the lock name (see
 * {@link natsLockKey}), the value `lockUntil` as an 8-byte big-endian count of epoch
 * milliseconds, nothing else. Extensible.
 *
 * Every write is conditional on the entry's revision, so of several nodes exactly one takes a
 * free or expired lock. The provider remembers the revision of its own write and makes unlock and
 * extend conditional on it: a node whose lock expired and was taken by another cannot release or
 * prolong the newer lock, although no owner is stored (Java ShedLock compares `lockUntil`
 * values instead). Expiry is decided on this process's clock (`clock`), as Java does: keep the
 * clocks of all nodes in sync.
 *
 * Create the bucket once, with one value per key (the default) and no TTL:
 *
 * ```ts
 * import { connect } from '@nats-io/transport-node'
 * import { Kvm } from '@nats-io/kv'
 * import { natsLockProvider, NATS_LOCK_BUCKET } from 'shedlock/nats'
 * const nc = await connect({ servers: 'nats://127.0.0.1:4222', maxReconnectAttempts: -1 })
 * const provider = natsLockProvider({ kv: await new Kvm(nc).create(NATS_LOCK_BUCKET) })
 * ```
 *
 * - A bucket `ttl` (stream `max_age`) shorter than `lockAtMostFor` deletes held locks early, and
 *   another node may then run the task: leave it unset. History above 1 is never read.
 * - Each call waits at most the JetStream client's timeout (5 s by default; pass
 *   `jetstream(nc, { timeout })` to `new Kvm()` to change it), then rejects with
 *   `LockProviderError`. Connect with `maxReconnectAttempts: -1`: by default the client gives up
 *   reconnecting after 10 attempts and closes, and the provider would then fail until restarted.
 * - A write whose reply is lost (timeout) may still have been stored: an acquisition then stays
 *   held until `lockAtMostFor`, and an unlock or extension that timed out leaves the lock as the
 *   server has it (the handle can be unlocked again, which does nothing if the revision moved).
 * - Reads may come from a stale replica (direct get); the conditional writes make that safe.
 *
 * @throws LockConfigurationError when `kv` lacks `get`, `create`, `update` or `delete`.
 */
export function natsLockProvider(options: NatsLockProviderOptions): ExtensibleLockProvider {
  const { kv } = options ?? {}
  if (!kv || (['get', 'create', 'update', 'delete'] as const).some((method) => typeof kv[method] !== 'function')) {
    throw new LockConfigurationError('nats: pass your JetStream KV bucket as { kv }, e.g. await new Kvm(nc).create("shedlock-locks") from @nats-io/kv')
  }
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function') throw new LockConfigurationError('nats: clock must have a now() method returning epoch milliseconds')
  // @nats-io/kv's Bucket has a `bucket` name, which only improves error messages.
  const bucketName: unknown = (kv as { bucket?: unknown }).bucket
  const bucket = typeof bucketName === 'string' ? bucketName : undefined

  const guard = async <T>(action: Action, name: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      throw error instanceof LockProviderError ? error : describeNatsError(error, action, name, bucket)
    }
  }

  // Resolves to the new revision, or undefined when another write came first.
  const conditional = async (write: () => Promise<number>): Promise<number | undefined> => {
    try {
      return await write()
    } catch (error) {
      if (isWrongLastSequence(error)) return undefined
      throw error
    }
  }

  const keyOf = (name: string): string => {
    const key = encodeKey(name)
    if (key === undefined) {
      throw new LockProviderError(`nats: could not acquire lock "${name}": the name is not well-formed Unicode (it has a lone surrogate); use another name`, {
        provider: PROVIDER,
        lockName: name,
      })
    }
    return key
  }

  return {
    name: PROVIDER,
    async lock(configuration: LockConfiguration) {
      const { name } = configuration
      const key = keyOf(name)
      const value = encodeLockUntil(configuration.lockAtMostUntil.getTime())
      const revision = await guard('acquire', name, async () => {
        const entry = await kv.get(key)
        if (!entry || entry.operation !== 'PUT') {
          // create() also writes over a delete marker, conditionally on the marker's revision.
          return conditional(() => kv.create(key, value))
        }
        if (decodeLockUntil(entry.value, key) > clock.now()) return undefined
        return conditional(() => kv.update(key, value, entry.revision))
      })
      if (revision === undefined) return undefined

      // The revision of this acquisition's last write: if the entry has another one now, another
      // node took the lock after it expired, and this acquisition must not touch it.
      let current = revision
      return defineLock(configuration, {
        clock,
        unlock: (held) =>
          guard('release', name, async () => {
            const lockAtLeastUntil = held.lockAtLeastUntil.getTime()
            if (lockAtLeastUntil > clock.now()) await conditional(() => kv.update(key, encodeLockUntil(lockAtLeastUntil), current))
            else {
              await conditional(async () => {
                await kv.delete(key, { previousSeq: current })
                return current
              })
            }
          }),
        extend: (next, held) =>
          guard('extend', name, async () => {
            // An expired lock is not extended even if no other node took it yet: the caller was
            // told it may lose the lock at lockAtMostUntil, and another node may be acquiring it now.
            if (held.lockAtMostUntil.getTime() <= clock.now()) return false
            const written = await conditional(() => kv.update(key, encodeLockUntil(next.lockAtMostUntil.getTime()), current))
            if (written === undefined) return false
            current = written
            return true
          }),
      })
    },
  }
}

type Action = 'acquire' | 'extend' | 'release'

/** Java's `ByteBuffer.putLong`: 8 bytes, big-endian, signed. */
function encodeLockUntil(ms: number): Uint8Array {
  const bytes = new Uint8Array(8)
  new DataView(bytes.buffer).setBigInt64(0, BigInt(ms))
  return bytes
}

function decodeLockUntil(value: Uint8Array, key: string): number {
  if (value.length !== 8) {
    throw new Error(
      `the entry of key "${key}" holds ${value.length} bytes, not the 8-byte big-endian lockUntil that Java ShedLock and shedlock write; delete the key (it is not a lock record) or use another bucket`,
    )
  }
  return Number(new DataView(value.buffer, value.byteOffset, 8).getBigInt64(0))
}

function isWrongLastSequence(error: unknown): boolean {
  return WRONG_LAST_SEQUENCE.has((error as { code?: unknown } | null)?.code as number)
}

// The names and codes of an error and its causes: nats.js wraps transport errors in RequestError.
function chainOf(error: unknown): { names: Set<string>; codes: Set<unknown> } {
  const names = new Set<string>()
  const codes = new Set<unknown>()
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { name, code } = e as { name?: unknown; code?: unknown }
    if (typeof name === 'string') names.add(name)
    if (code !== undefined) codes.add(code)
  }
  return { names, codes }
}

function describeNatsError(error: unknown, action: Action, lockName: string, bucket: string | undefined): LockProviderError {
  const detail = error instanceof Error ? error.message : String(error)
  const { names, codes } = chainOf(error)
  const kvName = bucket === undefined ? 'the bucket' : `bucket "${bucket}"`
  let advice: string
  if (codes.has(STREAM_NOT_FOUND) || /stream not found/i.test(detail)) {
    advice = `${kvName} does not exist (${detail}); create it once with await new Kvm(nc).create(${JSON.stringify(bucket ?? NATS_LOCK_BUCKET)}) from @nats-io/kv`
  } else if (names.has('ClosedConnectionError') || names.has('DrainingConnectionError')) {
    advice = `the NATS connection is closed (${detail}); the task was not run. Pass a connection that stays open, and connect with maxReconnectAttempts: -1 so that it never stops reconnecting`
  } else if (names.has('TimeoutError') || names.has('NoResponders') || names.has('NoRespondersError') || codes.has('TIMEOUT') || codes.has(503)) {
    advice = `NATS JetStream did not answer (${detail}); the task was not run. Check the server and that JetStream is enabled; the provider recovers by itself once the client reconnects`
  } else {
    advice = detail
  }
  return new LockProviderError(`nats: could not ${action} lock "${lockName}": ${advice}`, { cause: error, provider: PROVIDER, lockName })
}
