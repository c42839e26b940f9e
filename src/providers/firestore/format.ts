import { LockConfigurationError } from '../../core/errors.ts'
import { nameTooLong, utf8LengthOver } from '../../support/lock-request.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'
import { OperationTimeoutError } from '../../support/with-timeout.ts'

// Java ShedLock's lock documents in Firestore (its FirestoreStorageAccessor): one document per
// lock in the collection `shedlock`, whose id is the lock name, with the fields lockUntil and
// lockedAt (Firestore Timestamps) and lockedBy (a string, Java's host name). The provider, the
// inspector and the CLI read the format and the client's error codes from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'firestore'

/** Java ShedLock's default collection name. */
export const DEFAULT_COLLECTION = 'shedlock'

/** The run history's default collection (shedlock's own; Java ShedLock keeps none). */
export const DEFAULT_RUNS_COLLECTION = 'shedlock_runs'

/** Field names, Java ShedLock's defaults (its `FieldNames("lockUntil", "lockedAt", "lockedBy")`). */
export const LOCK_UNTIL = 'lockUntil'
export const LOCKED_AT = 'lockedAt'
export const LOCKED_BY = 'lockedBy'
/**
 * The document's fencing counter, an integer: shedlock's own field. Java ShedLock neither reads
 * nor writes it (its takeover `update()`s only the three lock fields, so the counter survives).
 */
export const FENCING_TOKEN = 'fencingToken'

/** gRPC status codes the Firestore client's errors carry as `code`. */
export const CODE = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const

/** Does `error` carry gRPC status `code`? */
export function hasCode(error: unknown, code: number): boolean {
  return (error as { code?: unknown } | null)?.code === code
}

/** Epoch milliseconds of a Firestore Timestamp as the client returns it; `undefined` for anything else. */
export function millisOf(value: unknown): number | undefined {
  const toMillis = (value as { toMillis?: unknown } | null)?.toMillis
  if (typeof toMillis !== 'function') return undefined
  const ms = toMillis.call(value) as unknown
  return typeof ms === 'number' && Number.isFinite(ms) ? ms : undefined
}

// Firestore's limit on a document id: 1,500 bytes of UTF-8.
const MAX_ID_BYTES = 1500
// A name escaped for a document id escapes these: '/' (Firestore would take it as a path), '%'
// (the escape character) and lone surrogates (not UTF-8).
const ESCAPED = /[%/]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const RESERVED = /^__.*__$/s

/** Can `name` be a document id as it is (what Java ShedLock uses)? */
function holdable(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !RESERVED.test(name) && !LONE_SURROGATE.test(name)
}

function escapeName(name: string): string {
  if (name === '.' || name === '..') return name.replaceAll('.', '%2E')
  const escaped = name.replace(ESCAPED, (character) => {
    if (character === '%') return '%25'
    if (character === '/') return '%2F'
    return `%u${character.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`
  })
  // Ids of the form __…__ are Firestore's own: the first underscore goes escaped.
  return RESERVED.test(escaped) ? `%5F${escaped.slice(1)}` : escaped
}

function unescapeName(id: string): string {
  return id.replace(/%(?:u([0-9A-F]{4})|(2E|25|2F|5F))/g, (_, unit: string | undefined, byte: string | undefined) =>
    String.fromCharCode(Number.parseInt(unit ?? byte!, 16)),
  )
}

/** The name whose escaped id `id` is, or `undefined` when `id` is the name itself. */
function escapedName(id: string): string | undefined {
  if (!id.includes('%')) return undefined
  const decoded = unescapeName(id)
  // Only the escaping's own output decodes: names Firestore holds as they are are never escaped.
  return decoded !== id && !holdable(decoded) && escapeName(decoded) === id ? decoded : undefined
}

/**
 * The document id that holds lock `name`. Every name Firestore accepts as an id is its own id,
 * the document Java ShedLock uses. A name it cannot hold (one with `/`, `.`, `..`, a name of the
 * reserved form `__…__`, or one with a lone UTF-16 surrogate) is escaped: `/` as `%2F`, `%` as
 * `%25`, a lone surrogate as `%u` and four hex digits, `.` as `%2E`, the first `_` of `__…__` as
 * `%5F`. A name that is exactly the escaped id of another name (`a%2Fb`) is refused, so that no
 * two names share a document. {@link firestoreLockName} is its inverse.
 *
 * @throws LockConfigurationError for such a name, for an empty one, and for an id over Firestore's
 *   1,500 bytes.
 */
export function firestoreDocumentId(name: string): string {
  if (name === '') throw new LockConfigurationError(`${PROVIDER}: a lock name must not be empty`)
  let id = name
  if (!holdable(name)) id = escapeName(name)
  else {
    const decoded = escapedName(name)
    if (decoded !== undefined) {
      throw new LockConfigurationError(
        `Lock ${JSON.stringify(name)} is the Firestore document id of the lock name ${JSON.stringify(decoded)}, which Firestore cannot hold as it is; use another name (shedlock refuses it so that no two names share a document)`,
      )
    }
  }
  const bytes = utf8LengthOver(id, MAX_ID_BYTES)
  if (bytes !== undefined) throw nameTooLong(PROVIDER, name, bytes, MAX_ID_BYTES, 'bytes', 'its document id')
  return id
}

/** The lock name a document id holds: the inverse of {@link firestoreDocumentId}. */
export function firestoreLockName(id: string): string {
  return escapedName(id) ?? id
}

/** What `shedlock schema firestore` prints: the document format; Firestore needs nothing created. */
export function firestoreSchema(collection: string = DEFAULT_COLLECTION): string {
  return [
    `// Firestore needs no schema: collections appear with their first document, and no index is needed.`,
    `// One document per lock in collection ${JSON.stringify(collection)}, its id the lock name:`,
    `// { lockUntil: Timestamp, lockedAt: Timestamp, lockedBy: string, fencingToken: integer }`,
    `// The run history (firestoreRunLedger), in collection ${JSON.stringify(DEFAULT_RUNS_COLLECTION)} by default: one document per`,
    `// task, { name: string, lastStartedAt: Timestamp }, and its runs in its subcollection "runs".`,
  ].join('\n')
}

/** What a Firestore client error means for the lock (or the listing) and what to do about it; `where` names the collection. */
export function describeFirestoreError(where: string): DescribeStoreError {
  return (error, action, lockName) => {
    const detail = redactUrlPasswords(messageOf(error))
    const code = (error as { code?: unknown } | null)?.code
    const writes = action === 'acquire' || action === 'extend' || action === 'release'
    let advice: string
    if (error instanceof OperationTimeoutError || code === CODE.UNAVAILABLE || code === CODE.DEADLINE_EXCEEDED) {
      advice = `Firestore did not answer (${detail}); ${outcomeOf(action)}. Check the network and the project; the provider recovers by itself once Firestore answers`
    } else if (/terminated/i.test(detail)) {
      advice = `the Firestore client was terminated (${detail}); ${outcomeOf(action)}. Keep the client open while locks are used`
    } else if (code === CODE.PERMISSION_DENIED || code === CODE.UNAUTHENTICATED) {
      advice = `the credentials may not ${writes ? 'write' : 'read'} ${where} (${detail}); grant the service account the Cloud Datastore User role (roles/datastore.user)`
    } else if (code === CODE.NOT_FOUND) {
      advice = `the Firestore database was not found (${detail}); create it (gcloud firestore databases create) or pass the right projectId and databaseId to the client`
    } else if (code === CODE.RESOURCE_EXHAUSTED || code === CODE.ABORTED) {
      advice = `Firestore refused the request under load or contention (${detail}); ${outcomeOf(action)}. The next attempt retries`
    } else {
      advice = `${detail}; ${outcomeOf(action)}`
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}

/** How messages name a collection. */
export function collectionLabel(collection: { readonly id?: unknown }): string {
  return typeof collection.id === 'string' ? `collection "${collection.id}"` : 'the lock collection'
}
