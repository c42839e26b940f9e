import { LockConfigurationError } from '../../core/errors.ts'
import { nameTooLong } from '../../support/lock-request.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'

// Java ShedLock's layout in a NATS JetStream KV bucket: the key of each lock name (and its
// inverse), the 8-byte lockUntil value, the key length the server takes, and what JetStream's
// errors mean. The provider, the inspector and the CLI read it from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'nats'

/** One entry as a `@nats-io/kv` 3 bucket returns it from `get()`. */
export interface NatsKvEntry {
  /** The stored bytes; empty for a delete or purge marker. */
  readonly value: Uint8Array
  /** The stream sequence of this entry: what `update()` and `delete({ previousSeq })` compare against. */
  readonly revision: number
  /** `DEL` and `PURGE` entries are markers left by a delete: the key counts as missing. */
  readonly operation: 'PUT' | 'DEL' | 'PURGE'
}

/** Java ShedLock's default bucket name, `shedlock-locks`. */
export const NATS_LOCK_BUCKET = 'shedlock-locks'

// JetStream's "wrong last sequence": an expected-revision write found another revision. 10164 is
// the variant newer servers send when the subject's last sequence is unknown; @nats-io/kv's own
// create() treats both the same way.
const WRONG_LAST_SEQUENCE = new Set([10071, 10164])
/** JetStream's "stream not found": the bucket does not exist. */
export const STREAM_NOT_FOUND = 10059

// Characters a key may contain: what KV keys accept (@nats-io/kv's /^[-/=.\w]+$/).
const KEY_CHARACTERS = /^[-/=.\w]+$/
// Characters written as themselves inside an encoded key; everything else becomes =XX per UTF-8 byte.
const KEPT = /[-/\w]/
const LONE_SURROGATE = /\p{Cs}/u
const HEX_BYTE = /^[0-9A-F]{2}$/

// The server closes the whole connection, failing every request on it, when a client sends a
// control line (command, subject, reply inbox, sizes) longer than its max_control_line: 4,096
// bytes by default. Measured on nats-server 2.9.10 with @nats-io/kv 3.4: a direct get breaks
// from a subject of 4,056 characters, whatever the bucket name. The longest subject the provider
// sends is the direct get's, $JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<key>; it is kept within
// MAX_SUBJECT, which leaves 256 bytes for the rest of the line: "PUB ", the reply inbox (52
// characters with the default _INBOX prefix), the sizes, and a longer inbox prefix or a
// JetStream domain in the API prefix.
const MAX_SUBJECT = 4_096 - 256
// "$JS.API.DIRECT.GET.KV_" + "." + "$KV." + ".": the direct get's subject without bucket and key.
const DIRECT_GET_OVERHEAD = 28
// Assumed for a `kv` that does not say its bucket name (`kv.bucket`).
const UNKNOWN_BUCKET_LENGTH = 255

/**
 * The longest KV key sent to `bucket` (a bucket name, or `undefined` when unknown): 3,812
 * characters minus twice the bucket name's length, 3,784 for `shedlock-locks`.
 */
export function maxKeyLength(bucket: string | undefined): number {
  return MAX_SUBJECT - DIRECT_GET_OVERHEAD - 2 * (bucket?.length ?? UNKNOWN_BUCKET_LENGTH)
}

/** The bucket name a `@nats-io/kv` bucket carries (`kv.bucket`), if it says; it only sets the key limit and improves messages. */
export function bucketNameOf(kv: object): string | undefined {
  const name: unknown = (kv as { bucket?: unknown }).bucket
  return typeof name === 'string' ? name : undefined
}

/**
 * The bucket name of `kv` (see {@link bucketNameOf}), checked to leave room for a key.
 * @throws LockConfigurationError when the name is so long (over 1,905 characters) that no key fits in a subject.
 */
export function checkBucketName(kv: object): string | undefined {
  const bucket = bucketNameOf(kv)
  if (maxKeyLength(bucket) < 1) {
    throw new LockConfigurationError(
      `nats: bucket name ${JSON.stringify(bucket)} is too long: its subjects leave no room for a key within the server's 4 KB control line; use a shorter bucket name`,
    )
  }
  return bucket
}

/**
 * The KV key of lock `name`. A name the server holds as a key is its own key, as Java ShedLock
 * writes it: made only of `A–Z a–z 0–9 - _ / = .`, not starting or ending with `.`, without `..`.
 * Any other name becomes `=` followed by the name with every character outside
 * `A–Z a–z 0–9 - _ /` written as `=XX` per UTF-8 byte (uppercase hex): `report:daily` →
 * `=report=3Adaily`, `été` → `==C3=A9t=C3=A9`. {@link natsLockName} is its inverse.
 *
 * No two names share a key: a name the server could hold but that is exactly the encoded key of
 * another name (such as `==3A`, the key of `:`) is refused.
 *
 * ```ts
 * natsLockKey('nightly-report') // 'nightly-report'
 * natsLockKey('report:daily')   // '=report=3Adaily'
 * ```
 *
 * @throws LockConfigurationError for a name that is the encoded key of another name, or that is
 *   not well-formed Unicode (a lone surrogate).
 */
export function natsLockKey(name: string): string {
  if (isKey(name)) {
    // Raw keys map to themselves, so the encoded key of a name the server cannot hold must never
    // be taken as a raw one.
    const decoded = escapedName(name)
    if (decoded !== undefined) {
      throw new LockConfigurationError(
        `Lock name ${JSON.stringify(name)} is the NATS key of the lock name ${JSON.stringify(decoded)}, which NATS cannot hold as it is; use another name (shedlock refuses it so that no two names share a key)`,
      )
    }
    return name
  }
  // UTF-8 cannot represent a lone surrogate: TextEncoder would turn every one into U+FFFD and
  // make distinct names collide.
  if (LONE_SURROGATE.test(name))
    throw new LockConfigurationError(
      `Lock name ${JSON.stringify(name)} is not well-formed Unicode (it has a lone surrogate); NATS keys cannot hold it`,
    )
  return escapeKey(name)
}

/**
 * The lock name of a KV key: the inverse of {@link natsLockKey}. A key is the encoded form of a
 * name only when `natsLockKey()` gives exactly that key for the decoded name; every other key
 * (all keys Java ShedLock writes, `=daily` included) is the name itself.
 *
 * ```ts
 * natsLockName('=report=3Adaily') // 'report:daily'
 * natsLockName('nightly-report')  // 'nightly-report'
 * natsLockName('=daily')          // '=daily'
 * ```
 */
export function natsLockName(key: string): string {
  return escapedName(key) ?? key
}

/**
 * The name whose encoded key `key` is, or `undefined` when `key` is no name's encoded key (it is
 * then a raw key, the name itself). The one decoder of the encoding: {@link natsLockKey} refuses
 * raw names for which it finds one, {@link natsLockName} reads keys with it.
 */
function escapedName(key: string): string | undefined {
  if (!key.startsWith('=')) return undefined
  const bytes: number[] = []
  const rest = key.slice(1)
  for (let i = 0; i < rest.length; i++) {
    const char = rest[i]!
    if (char === '=' && HEX_BYTE.test(rest.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(rest.slice(i + 1, i + 3), 16))
      i += 2
    } else {
      bytes.push(...Buffer.from(char, 'utf8'))
    }
  }
  let decoded: string
  try {
    decoded = new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes))
  } catch {
    return undefined
  }
  // ("=" alone decodes to "", which is no lock name.) Names the server holds as they are are
  // never encoded, and the encoding is unique: only its own output decodes.
  return decoded !== '' && !isKey(decoded) && escapeKey(decoded) === key ? decoded : undefined
}

function isKey(name: string): boolean {
  // NATS keys are subject tokens joined by dots: an empty token (leading, trailing or double dot)
  // is not a key the server can store.
  return KEY_CHARACTERS.test(name) && !name.startsWith('.') && !name.endsWith('.') && !name.includes('..')
}

function escapeKey(name: string): string {
  let key = '='
  for (const char of name) {
    if (KEPT.test(char)) key += char
    else for (const byte of Buffer.from(char, 'utf8')) key += `=${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return key
}

/**
 * The key of lock `name` in `bucket`, checked before anything is sent: a name the server cannot
 * take must not reach the connection (an oversized subject closes it for every lock).
 * @throws LockConfigurationError for a refused name or a key over {@link maxKeyLength}.
 */
export function checkedKey(name: string, bucket: string | undefined): string {
  const key = natsLockKey(name)
  const max = maxKeyLength(bucket)
  if (key.length > max)
    throw nameTooLong(
      PROVIDER,
      name,
      key.length,
      max,
      'characters',
      `its key in ${bucket === undefined ? 'a bucket of unknown name' : `bucket "${bucket}"`}`,
    )
  return key
}

/** Java's `ByteBuffer.putLong`: 8 bytes, big-endian, signed epoch milliseconds. */
export function encodeLockUntil(ms: number): Uint8Array {
  const bytes = new Uint8Array(8)
  new DataView(bytes.buffer).setBigInt64(0, BigInt(ms))
  return bytes
}

/** The `lockUntil` (epoch ms) of an entry's value, or `undefined` when it is not the 8 bytes Java ShedLock and shedlock write. */
export function decodeLockUntil(value: Uint8Array): number | undefined {
  if (value.length !== 8) return undefined
  return Number(new DataView(value.buffer, value.byteOffset, 8).getBigInt64(0))
}

/** The error for an entry that is not a lock record (the provider cannot decide whether it is held). */
export function notALockRecord(key: string, value: Uint8Array): Error {
  return new Error(
    `the entry of key "${key}" holds ${value.length} bytes, not the 8-byte big-endian lockUntil that Java ShedLock and shedlock write; delete the key (it is not a lock record) or use another bucket`,
  )
}

/** The JetStream API error code of `error` or one of its causes (nats.js wraps errors). */
export function natsErrorCode(error: unknown): number | undefined {
  for (
    let e = error, depth = 0;
    e && typeof e === 'object' && depth < 5;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { api_error?: { err_code?: unknown } }).api_error?.err_code ?? (e as { code?: unknown }).code
    if (typeof code === 'number') return code
  }
  return undefined
}

/** A conditional write or delete found another revision than the one it compared: another write came first. */
export function isWrongLastSequence(error: unknown): boolean {
  const code = natsErrorCode(error)
  return code !== undefined && WRONG_LAST_SEQUENCE.has(code)
}

/** The bucket does not exist. */
export function isStreamNotFound(error: unknown): boolean {
  return natsErrorCode(error) === STREAM_NOT_FOUND || /stream not found/i.test(messageOf(error))
}

/** What `shedlock schema nats` prints: the nats CLI command that creates Java ShedLock's bucket. */
export function natsSchema(bucket: string = NATS_LOCK_BUCKET): string {
  return [
    `# One key per lock (the lock name, see natsLockKey), value: lockUntil as 8 bytes, big-endian epoch ms.`,
    `# Keep one value per key and no TTL: a TTL shorter than lockAtMostFor would drop held locks.`,
    `nats kv add ${bucket} --history 1`,
  ].join('\n')
}

// The names and codes of an error and its causes: nats.js wraps transport errors in RequestError.
function chainOf(error: unknown): { names: Set<string>; codes: Set<unknown> } {
  const names = new Set<string>()
  const codes = new Set<unknown>()
  for (
    let e = error, depth = 0;
    e && typeof e === 'object' && depth < 5;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const { name, code } = e as { name?: unknown; code?: unknown }
    if (typeof name === 'string') names.add(name)
    if (code !== undefined) codes.add(code)
  }
  return { names, codes }
}

/** What a NATS error means for the lock (or the listing) and what to do about it. */
export function describeNatsError(bucket: string | undefined): DescribeStoreError {
  return (error, action, lockName) => {
    const detail = redactUrlPasswords(messageOf(error))
    const { names, codes } = chainOf(error)
    const kvName = bucket === undefined ? 'the bucket' : `bucket "${bucket}"`
    let advice: string
    if (isStreamNotFound(error)) {
      advice = `${kvName} does not exist (${detail}); create it once with await new Kvm(nc).create(${JSON.stringify(bucket ?? NATS_LOCK_BUCKET)}) from @nats-io/kv`
    } else if (names.has('ClosedConnectionError') || names.has('DrainingConnectionError')) {
      advice = `the NATS connection is closed (${detail}); ${outcomeOf(action)}. Pass a connection that stays open, and connect with maxReconnectAttempts: -1 so that it never stops reconnecting`
    } else if (
      names.has('TimeoutError') ||
      names.has('NoResponders') ||
      names.has('NoRespondersError') ||
      codes.has('TIMEOUT') ||
      codes.has(503)
    ) {
      advice = `NATS JetStream did not answer (${detail}); ${outcomeOf(action)}. Check the server and that JetStream is enabled; the provider recovers by itself once the client reconnects`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}
