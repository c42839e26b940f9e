import { randomBytes } from 'node:crypto'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import { type LockMetadata, readLockMetadata } from '../../support/conditional-objects.ts'
import { nameTooLong } from '../../support/lock-request.ts'
import { type DescribeStoreError, outcomeOf, SOCKET_FAILURE_CODES } from '../../support/store-errors.ts'
import { errorName, SdkLoadError, sdkErrorDetail, statusOf } from './sdk.ts'

// Java ShedLock's lock objects in S3 (its S3LockProvider): one object per lock, key = prefix +
// name, the lock in three user metadata entries (and shedlock's fencing counter in a fourth), a
// body of 16 random bytes so that every write gets a new ETag. The provider, the inspector and
// the CLI read it from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 's3'

/** The key prefix unless `prefix` says otherwise: Java ShedLock's `S3LockProvider` default. */
export const DEFAULT_PREFIX = 'shedlock/'

/**
 * The user metadata entries (`x-amz-meta-*`) of a lock object: Java ShedLock's three, and
 * shedlock's fencing counter `fencing-token`, which Java neither reads nor keeps (its writes
 * replace all the metadata).
 */
export const META = {
  lockUntil: 'lock-until',
  lockedAt: 'locked-at',
  lockedBy: 'locked-by',
  fencingToken: 'fencing-token',
} as const

// S3's limit for an object key, in bytes of UTF-8.
const MAX_KEY_BYTES = 1024
// Bucket names: 3-63 of [a-z0-9.-] on AWS; other servers allow more (upper case, '_'), so only
// what no server takes is refused here.
const BUCKET = /^[A-Za-z0-9._-]{3,255}$/
const CONTROL = /[\u0000-\u001f\u007f]/
const LONE_SURROGATE = /\p{Cs}/u

/**
 * The body of a lock object: 16 random bytes, as Java ShedLock writes (a UUID's). S3's ETag of a
 * single-part upload is the MD5 of the body, and metadata does not enter it: with a constant body
 * every version of the object would have the same ETag and `If-Match` would not tell them apart.
 */
export function lockBody(): Uint8Array {
  return randomBytes(16)
}

export type { LockMetadata }

/** Reads the four entries; others are ignored. */
export function readMetadata(metadata: Record<string, string> | undefined): LockMetadata {
  return readLockMetadata(META, metadata)
}

/** @throws LockConfigurationError for a bucket name no S3 server accepts. */
export function checkBucket(bucket: unknown): asserts bucket is string {
  if (typeof bucket !== 'string' || !BUCKET.test(bucket)) {
    throw new LockConfigurationError(
      `s3: bucket ${JSON.stringify(bucket)} is not a bucket name; use 3 to 63 lower-case letters, digits, '.' or '-' (e.g. "my-app-locks")`,
    )
  }
}

/**
 * The key prefix, `shedlock/` unless given ('' puts the locks at the bucket's root).
 * @throws LockConfigurationError for a non-string or one that leaves no room for a name.
 */
export function checkPrefix(prefix: unknown = DEFAULT_PREFIX): string {
  // Lone surrogates would be sent as U+FFFD (two prefixes, one place); control characters are
  // legal in keys but break XML listings on some servers.
  if (
    typeof prefix !== 'string' ||
    Buffer.byteLength(prefix) >= MAX_KEY_BYTES - 1 ||
    LONE_SURROGATE.test(prefix) ||
    CONTROL.test(prefix)
  ) {
    throw new LockConfigurationError(
      `s3: prefix must be a string of fewer than ${MAX_KEY_BYTES - 1} bytes of well-formed Unicode without control characters (e.g. "shedlock/"), got ${JSON.stringify(prefix)}`,
    )
  }
  return prefix
}

/**
 * Checks `name` before anything is sent.
 * @throws LockConfigurationError when prefix + name is over 1024 bytes of UTF-8, the longest S3
 *   key, or when the name holds U+0000.
 */
export function checkName(prefix: string, name: string): void {
  // XML (every S3 error and listing) cannot carry NUL, and Ceph RGW 16.2 answers a HEAD of such a
  // key with a body that corrupts the connection: the next request on it fails, whatever its lock.
  if (name.includes('\u0000')) {
    const shown = name.length > 80 ? `${JSON.stringify(name.slice(0, 80))}…` : JSON.stringify(name)
    throw new LockConfigurationError(
      `Lock ${shown}: s3 cannot hold a name with the character U+0000 (NUL) in an object key; use a name without it`,
    )
  }
  const bytes = Buffer.byteLength(prefix) + Buffer.byteLength(name)
  if (bytes > MAX_KEY_BYTES) {
    const room = MAX_KEY_BYTES - Buffer.byteLength(prefix)
    throw nameTooLong(
      PROVIDER,
      name,
      Buffer.byteLength(name),
      room,
      'bytes',
      `the name (after the ${Buffer.byteLength(prefix)}-byte prefix, in an object key of at most ${MAX_KEY_BYTES} bytes)`,
    )
  }
}

/** A precondition that failed: 412 (`If-Match`/`If-None-Match`), 409 (a concurrent conditional write), 404 on `If-Match` of a missing object. */
export function isConditionFailure(error: unknown): boolean {
  const name = errorName(error)
  if (name === 'NoSuchBucket') return false
  const status = statusOf(error)
  return (
    status === 412 ||
    status === 409 ||
    name === 'PreconditionFailed' ||
    name === 'ConditionalRequestConflict' ||
    name === 'NoSuchKey'
  )
}

/**
 * A server error (5xx) on a write: the write may have been applied or not (Ceph RGW answers a
 * contended conditional PutObject with 500 now and then), so only a read of the object tells.
 */
export function isServerError(error: unknown): boolean {
  const status = statusOf(error)
  return status !== undefined && status >= 500
}

/** `HeadObject` found no object (HEAD has no body, so a missing bucket reads the same; the write that follows says which). */
export function isNotFound(error: unknown): boolean {
  return statusOf(error) === 404 || errorName(error) === 'NotFound' || errorName(error) === 'NoSuchKey'
}

// Socket-level failures the SDK passes on after its retries.
const UNREACHABLE_CODES: ReadonlySet<string> = new Set([...SOCKET_FAILURE_CODES, 'EPROTO'])
const UNREACHABLE_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'NetworkingError',
  'ServiceUnavailable',
  'InternalError',
  'SlowDown',
])
const DENIED = new Set([
  'AccessDenied',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'CredentialsProviderError',
  'InvalidToken',
])

/**
 * Turns an SDK error into a `LockProviderError` that says what failed (`what`, e.g. `acquire lock
 * "x"`), what that means (`outcome`), names the lock when there is one, and says what to do.
 */
export function s3Error(
  error: unknown,
  what: string,
  outcome: string,
  lockName: string | undefined,
  bucket: string,
): LockProviderError {
  if (error instanceof LockProviderError) return error
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown }
  const detail = sdkErrorDetail(error)
  const options = (cause: unknown) =>
    lockName === undefined ? { cause, provider: PROVIDER } : { cause, provider: PROVIDER, lockName }
  if (error instanceof SdkLoadError)
    return new LockProviderError(`s3: could not ${what}: ${error.message}`, options(error.cause))
  let advice: string
  if (name === 'NoSuchBucket') {
    advice = `bucket "${bucket}" does not exist at the client's endpoint and region (${detail}); create it (aws s3 mb s3://${bucket}) or pass the right bucket`
  } else if (
    (typeof code === 'string' && UNREACHABLE_CODES.has(code)) ||
    (typeof name === 'string' && UNREACHABLE_NAMES.has(name))
  ) {
    advice = `S3 is unreachable (${detail}); ${outcome}. Check the endpoint and the network; the provider recovers by itself once S3 answers again`
  } else if ((typeof name === 'string' && DENIED.has(name)) || statusOf(error) === 403) {
    advice = `S3 refused the client's credentials or permissions (${detail}); the lock objects need s3:GetObject (HEAD) and s3:PutObject (the inspector also s3:ListBucket and s3:DeleteObject)`
  } else if (isServerError(error)) {
    advice = `S3 failed the request with a server error (${detail}); ${outcome}. Check the server if it persists`
  } else {
    advice = detail
  }
  return new LockProviderError(`s3: could not ${what}: ${advice}`, options(error))
}

/** {@link s3Error} for a provider's or inspector's action on a lock, or the listing. */
export function describeS3Error(bucket: string): DescribeStoreError {
  return (error, action, lockName) =>
    action === 'list'
      ? s3Error(error, 'list the locks', outcomeOf(action), undefined, bucket)
      : s3Error(error, `${action} lock "${lockName}"`, outcomeOf(action), lockName, bucket)
}
