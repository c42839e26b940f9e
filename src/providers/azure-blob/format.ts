import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import { type LockMetadata, readLockMetadata } from '../../support/conditional-objects.ts'
import { nameTooLong } from '../../support/lock-request.ts'
import { type DescribeStoreError, messageOf, outcomeOf, SOCKET_FAILURE_CODES } from '../../support/store-errors.ts'

// Lock blobs in an Azure Storage container: one block blob per lock, name = prefix + lock name,
// the lock in three metadata entries and the fencing counter in a fourth, an empty body (Azure
// gives every write a new ETag). The same shape as Java ShedLock's S3 objects; the metadata names
// are camelCase because Azure metadata names must be C# identifiers (no '-'). The provider and
// the inspector read it here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'azure-blob'

/** The blob name prefix unless `prefix` says otherwise. */
export const DEFAULT_PREFIX = 'shedlock/'

/** The metadata entries (`x-ms-meta-*`) of a lock blob. Azure keeps their case but compares names without it (azurite returns them lower-case). */
export const META = {
  lockUntil: 'lockUntil',
  lockedAt: 'lockedAt',
  lockedBy: 'lockedBy',
  /** The fencing counter, a decimal string. */
  fencingToken: 'fencingToken',
} as const

// Azure's limit for a blob name, in characters.
const MAX_NAME_CHARS = 1024
const CONTROL = /[\u0000-\u001f\u007f]/
const LONE_SURROGATE = /\p{Cs}/u

/** Reads the four entries, whatever their case; others are ignored. */
export function readMetadata(metadata: Record<string, string> | undefined): LockMetadata {
  return readLockMetadata(META, metadata)
}

/**
 * The blob name prefix, `shedlock/` unless given ('' puts the locks at the container's root).
 * @throws LockConfigurationError for a non-string or one that leaves no room for a name.
 */
export function checkPrefix(prefix: unknown = DEFAULT_PREFIX): string {
  // Lone surrogates would be sent as U+FFFD (two prefixes, one place); Azure refuses control characters in blob names.
  if (
    typeof prefix !== 'string' ||
    prefix.length >= MAX_NAME_CHARS - 1 ||
    LONE_SURROGATE.test(prefix) ||
    CONTROL.test(prefix)
  ) {
    throw new LockConfigurationError(
      `azure-blob: prefix must be a string of fewer than ${MAX_NAME_CHARS - 1} characters of well-formed Unicode without control characters (e.g. "shedlock/"), got ${JSON.stringify(prefix)}`,
    )
  }
  return prefix
}

// Characters the container's listing cannot give back as sent: those XML cannot carry make it
// fail (azurite answers 500), a carriage return comes back as "&#xD;". Either way the inspector
// and `shedlock list` could no longer read the locks.
const UNLISTABLE = /[\u0000-\u001f\u007f\ufffe\uffff]/
// The SDK resolves "." and ".." segments of a blob's URL: "x/../y" would be the blob "y", one lock for two names.
const DOT_SEGMENT = /(^|[/\\])\.\.?($|[/\\])/

/**
 * Checks `name` before anything is sent.
 * @throws LockConfigurationError when prefix + name is over 1024 characters, the longest blob
 *   name; when the name holds a control character, U+FFFE or U+FFFF; or when prefix + name has a
 *   "." or ".." path segment.
 */
export function checkName(prefix: string, name: string): void {
  const shown = (): string => (name.length > 80 ? `${JSON.stringify(name.slice(0, 80))}…` : JSON.stringify(name))
  const bad = UNLISTABLE.exec(name)
  if (bad) {
    const code = `U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`
    throw new LockConfigurationError(
      `Lock ${shown()}: azure-blob cannot hold a name with the character ${code} (the container's listing cannot give it back); use a name without control characters`,
    )
  }
  if (DOT_SEGMENT.test(prefix + name)) {
    throw new LockConfigurationError(
      `Lock ${shown()}: azure-blob cannot hold a name with a "." or ".." path segment (the blob's URL resolves it, so two names would share one blob); use a name without one`,
    )
  }
  if (prefix.length + name.length > MAX_NAME_CHARS) {
    throw nameTooLong(
      PROVIDER,
      name,
      name.length,
      MAX_NAME_CHARS - prefix.length,
      'characters',
      `the name (after the ${prefix.length}-character prefix, in a blob name of at most ${MAX_NAME_CHARS})`,
    )
  }
}

/** The HTTP status of a `RestError`, when the service answered. */
export function statusOf(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown } | null)?.statusCode
  return typeof status === 'number' ? status : undefined
}

/** The service's error code (`ConditionNotMet`, `BlobAlreadyExists`, `ContainerNotFound`, ...) or a socket error code. */
export function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code
}

/** A condition that failed: 412 (`If-Match`), 409 `BlobAlreadyExists` (`If-None-Match: *`); 404 of the blob on `If-Match`. */
export function isConditionFailure(error: unknown): boolean {
  const code = codeOf(error)
  if (code === 'ContainerNotFound') return false
  const status = statusOf(error)
  return (
    status === 412 ||
    code === 'BlobAlreadyExists' ||
    code === 'ConditionNotMet' ||
    code === 'BlobNotFound' ||
    (status === 409 && code !== 'LeaseIdMissing')
  )
}

/** The blob is missing (HEAD has no body: a missing container reads the same; the write that follows says which). */
export function isNotFound(error: unknown): boolean {
  return statusOf(error) === 404 && codeOf(error) !== 'ContainerNotFound'
}

const UNREACHABLE_CODES: ReadonlySet<string> = new Set([...SOCKET_FAILURE_CODES, 'EPROTO', 'REQUEST_SEND_ERROR'])
const DENIED = new Set([
  'AuthenticationFailed',
  'AuthorizationFailure',
  'AuthorizationPermissionMismatch',
  'InsufficientAccountPermissions',
  'InvalidAuthenticationInfo',
])

/**
 * Turns an SDK error into a `LockProviderError` that says what failed (`what`, e.g. `acquire lock
 * "x"`), what that means (`outcome`), names the lock when there is one, and says what to do.
 */
export function azureError(
  error: unknown,
  what: string,
  outcome: string,
  lockName: string | undefined,
  container: string,
): LockProviderError {
  if (error instanceof LockProviderError) return error
  const code = codeOf(error)
  const status = statusOf(error)
  // The SDK's messages carry the request id and time, never the account key or a SAS signature.
  const detail = `${typeof code === 'string' ? `${code}: ` : ''}${messageOf(error).split('\n')[0]}`
  let advice: string
  if (code === 'ContainerNotFound') {
    advice = `container "${container}" does not exist (${detail}); create it (await containerClient.createIfNotExists()) or pass the right ContainerClient`
  } else if ((typeof code === 'string' && UNREACHABLE_CODES.has(code)) || status === 503 || status === 500) {
    advice = `Azure Storage is unreachable (${detail}); ${outcome}. Check the endpoint and the network; the provider recovers by itself once it answers again`
  } else if ((typeof code === 'string' && DENIED.has(code)) || status === 403) {
    advice = `Azure Storage refused the client's credentials or permissions (${detail}); the lock blobs need read and write (the inspector also list and delete) on the container`
  } else {
    advice = detail
  }
  const options =
    lockName === undefined ? { cause: error, provider: PROVIDER } : { cause: error, provider: PROVIDER, lockName }
  return new LockProviderError(`azure-blob: could not ${what}: ${advice}`, options)
}

/** {@link azureError} for a provider's or inspector's action on a lock, or the listing. */
export function describeAzureError(container: string): DescribeStoreError {
  return (error, action, lockName) =>
    action === 'list'
      ? azureError(error, 'list the locks', outcomeOf(action), undefined, container)
      : azureError(error, `${action} lock "${lockName}"`, outcomeOf(action), lockName, container)
}
