import { nameTooLong, utf8LengthOver } from '../../support/lock-request.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'

// Java ShedLock's lock documents in MongoDB: their shape, the longest name they hold, the
// collection `shedlock schema` creates, and what the driver's errors mean. The provider, the
// inspector and the CLI read it from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'mongodb'

/**
 * The document's fencing counter, a number: shedlock's own field, which Java ShedLock neither
 * reads nor writes (its updates `$set` the three lock fields, so the counter survives them).
 */
export const FENCING_TOKEN = 'fencingToken'

/** Java ShedLock's default collection name. */
export const DEFAULT_COLLECTION = 'shedLock'

/**
 * One lock document, in Java ShedLock's format: `_id` is the lock name, the times are BSON Dates
 * (UTC milliseconds), `lockedBy` identifies the holder (`"released"` after a force-release).
 */
export interface MongoLockDocument {
  _id: string
  lockUntil: Date
  lockedAt: Date
  lockedBy: string
  /** shedlock's fencing counter; absent from documents only Java ShedLock has written. */
  fencingToken?: number
}

// A lock document, _id (the name) included, must fit BSON's 16 MiB document limit, and the
// findAndModify command around it 16 MiB + 16 KiB. 64 KiB stay for the other fields and the
// command; MongoDB 4.2+ no longer limits index keys (the _id index) to 1024 bytes.
const MAX_NAME_BYTES = 16 * 1024 * 1024 - 64 * 1024

/** E11000: an upsert's filter matched nothing, so it inserted, and a document with that `_id` exists. */
export const DUPLICATE_KEY = 11000

/**
 * Checks `name` before anything is sent.
 * @throws LockConfigurationError for a name over 16 MiB − 64 KiB of UTF-8.
 */
export function checkName(name: string): void {
  const bytes = utf8LengthOver(name, MAX_NAME_BYTES)
  if (bytes !== undefined)
    throw nameTooLong(PROVIDER, name, bytes, MAX_NAME_BYTES, 'bytes', "the name, the document's _id,")
}

/** How messages name a collection: by its `collectionName` where the driver gives one. */
export function collectionLabel(collection: { readonly collectionName?: string }): string {
  return typeof collection.collectionName === 'string'
    ? `collection "${collection.collectionName}"`
    : 'the lock collection'
}

/** What `shedlock schema mongodb` prints: the mongosh command that creates the collection. */
export function mongoSchema(collection: string = DEFAULT_COLLECTION): string {
  return [
    `// One document per lock: { _id: <lock name>, lockUntil: Date, lockedAt: Date, lockedBy: string }.`,
    `// No index is needed: _id is the lock name.`,
    `db.createCollection(${JSON.stringify(collection)})`,
  ].join('\n')
}

// Driver error classes that mean the server could not be reached or the connection broke.
const UNREACHABLE_ERRORS = new Set([
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoServerSelectionError',
  'MongoServerClosedError',
  'MongoPoolClearedError',
  'MongoOperationTimeoutError',
])
// Server codes of a replica set without a writable primary (failover, shutdown).
const NO_PRIMARY_CODES = new Set([91, 189, 10107, 11600, 11602, 13435, 13436])

/** What a MongoDB driver error means for the lock (or the listing) and what to do about it; `where` names the collection. */
export function describeMongoError(where: string): DescribeStoreError {
  return (error, action, lockName) => {
    const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown }
    const detail = redactUrlPasswords(messageOf(error))
    let advice: string
    if (name === 'MongoNotConnectedError' || name === 'MongoTopologyClosedError' || name === 'MongoClientClosedError') {
      advice = `the MongoClient was closed (${name}: ${detail}); ${outcomeOf(action)}. Keep the client open while locks are used, or connect() it again`
    } else if (typeof name === 'string' && UNREACHABLE_ERRORS.has(name)) {
      advice = `MongoDB is unreachable (${name}: ${detail}); ${outcomeOf(action)}. Check the server and the client; the provider recovers by itself once it is back`
    } else if (typeof code === 'number' && NO_PRIMARY_CODES.has(code)) {
      advice = `the replica set has no writable primary right now (${detail}); ${outcomeOf(action)}. The provider recovers by itself once a primary is elected`
    } else if (code === 13) {
      advice = `the user may not ${action === 'list' || action === 'inspect' ? 'read' : 'update'} ${where} (${detail}); grant it the readWrite role on that collection`
    } else if (code === 121) {
      advice = `${where} has a validator that rejects ShedLock's documents { _id: string, lockUntil: Date, lockedAt: Date, lockedBy: string, fencingToken: number } (${detail}); relax the validator or use another collection`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}
