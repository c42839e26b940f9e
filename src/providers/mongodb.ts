import { type Clock, systemClock } from '../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { defineLock } from '../support/define-lock.ts'
import { lockOwner } from '../support/lock-owner.ts'

/**
 * One lock document, in Java ShedLock's format: `_id` is the lock name, the times are BSON Dates
 * (UTC milliseconds), `lockedBy` identifies the holder.
 */
export interface MongoLockDocument {
  _id: string
  lockUntil: Date
  lockedAt: Date
  lockedBy: string
}

/**
 * The part of a MongoDB Node.js driver (mongodb 6 and 7) `Collection` that this provider calls.
 * We don't import `mongodb`: pass `db.collection('shedLock')` as it is.
 *
 * `findOneAndUpdate` must resolve the way mongodb 6 and 7 do by default: to the matched document,
 * or `null` when none matched. A driver 5 `ModifyResult` (`{ value, ok }`) is read too.
 */
export interface MongoLockCollection {
  /** The collection's name, for error messages only. */
  readonly collectionName?: string
  findOneAndUpdate(filter: Record<string, unknown>, update: Record<string, unknown>, options: { upsert?: boolean }): Promise<unknown>
}

/** Options of {@link mongoLockProvider}. */
export interface MongoLockProviderOptions {
  /**
   * The lock collection, e.g. `client.db('app').collection('shedLock')` (`shedLock` is Java
   * ShedLock's default name: use it to share locks with Java nodes). It needs no index: `_id` is
   * the lock name, and `_id` is always unique. The provider never opens or closes connections.
   *
   * Get it with `{ writeConcern: { w: 'majority' } }` on a replica set (Java ShedLock does the
   * same): a lock acknowledged by the primary alone is lost if the primary fails over before it
   * replicated, and another node may then take it.
   */
  collection: MongoLockCollection
  /**
   * Prefix of the `lockedBy` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * The clock that decides expiry. MongoDB compares `lockUntil` with the time this process sends
   * (an update filter cannot read the server's clock), so nodes must keep their clocks in sync.
   * @default systemClock
   */
  clock?: Clock
}

const PROVIDER = 'mongodb'
// E11000: the upsert's filter matched nothing, so it inserted, and a document with that _id exists.
const DUPLICATE_KEY = 11000

/**
 * Locks in a MongoDB collection in Java ShedLock's format:
 * `{ _id: <name>, lockUntil: Date, lockedAt: Date, lockedBy: string }`. Extensible.
 *
 * Acquire is one `findOneAndUpdate({ _id: name, lockUntil: { $lte: now } }, { $set: … }, { upsert: true })`:
 * a missing document is inserted, an expired one taken over, and a held one makes the upsert try
 * to insert a second document with the same `_id`, which fails with duplicate key error 11000:
 * "held" (also what the loser of two concurrent upserts of a new name gets). Unlock and extend
 * update only the document this acquisition still holds (`lockedBy` filter); Java ShedLock's
 * unlock does not check the holder (its issue #74). A document deleted by hand is recreated by
 * the next acquire. Any lock name works as it is: `_id` accepts every string.
 *
 * Expiry is decided on this process's clock (see `clock`): keep the nodes' clocks in sync, and
 * use `lockAtLeastFor` to absorb small differences.
 *
 * ```ts
 * import { MongoClient } from 'mongodb'
 * import { mongoLockProvider } from 'shedlock/mongodb'
 * const client = new MongoClient(url)
 * const provider = mongoLockProvider({ collection: client.db('app').collection('shedLock', { writeConcern: { w: 'majority' } }) })
 * ```
 *
 * @throws LockConfigurationError when `collection` is not a driver Collection or `lockedBy` is empty.
 */
export function mongoLockProvider(options: MongoLockProviderOptions): ExtensibleLockProvider {
  const { collection, lockedBy } = options ?? {}
  if (!collection || typeof collection.findOneAndUpdate !== 'function') {
    throw new LockConfigurationError(
      "mongodb: pass your lock collection as { collection }, e.g. client.db('app').collection('shedLock') (an object with findOneAndUpdate; a Db or MongoClient is not one)",
    )
  }
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(`mongodb: lockedBy must be a non-empty string (it prefixes the lockedBy field), got ${JSON.stringify(lockedBy)}`)
  }
  const clock = options.clock ?? systemClock
  const where = typeof collection.collectionName === 'string' ? `collection "${collection.collectionName}"` : 'the lock collection'

  const guard = async <T>(action: Action, name: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      throw describeMongoError(error, action, name, where)
    }
  }

  const acquire = async (configuration: LockConfiguration, owner: string): Promise<boolean> => {
    const now = new Date(clock.now())
    try {
      await collection.findOneAndUpdate(
        { _id: configuration.name, lockUntil: { $lte: now } },
        { $set: { lockUntil: configuration.lockAtMostUntil, lockedAt: now, lockedBy: owner } },
        { upsert: true },
      )
      return true
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === DUPLICATE_KEY) return false
      throw error
    }
  }

  return {
    name: PROVIDER,
    async lock(configuration) {
      const owner = lockOwner(lockedBy)
      if (!(await guard('acquire', configuration.name, () => acquire(configuration, owner)))) return undefined
      return defineLock(configuration, {
        clock,
        unlock: (current) =>
          guard('release', current.name, async () => {
            // An unmatched filter means another node holds the lock by now: leave it alone.
            const lockUntil = new Date(Math.max(clock.now(), current.lockAtLeastUntil.getTime()))
            await collection.findOneAndUpdate({ _id: current.name, lockedBy: owner }, { $set: { lockUntil } }, {})
          }),
        extend: (next) =>
          guard('extend', next.name, async () => {
            const now = new Date(clock.now())
            const before = await collection.findOneAndUpdate(
              { _id: next.name, lockedBy: owner, lockUntil: { $gt: now } },
              { $set: { lockUntil: next.lockAtMostUntil } },
              {},
            )
            return matched(before)
          }),
      })
    },
  }
}

type Action = 'acquire' | 'extend' | 'release'

/** Did `findOneAndUpdate` (without upsert) match a document? */
function matched(result: unknown): boolean {
  if (result === null || result === undefined) return false
  // Driver 5 (and 6/7 with includeResultMetadata) wrap the document: { value, ok, lastErrorObject }.
  // Lock documents never have these fields, so the two shapes cannot be confused.
  const wrapped = result as { value?: unknown; ok?: unknown }
  if ('ok' in wrapped && 'value' in wrapped) return wrapped.value !== null && wrapped.value !== undefined
  return true
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

function describeMongoError(error: unknown, action: Action, lockName: string, where: string): LockProviderError {
  if (error instanceof LockProviderError) return error
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown }
  // Driver messages carry no passwords, but a connection string in a wrapper's message might.
  const detail = (error instanceof Error ? error.message : String(error)).replace(/(\/\/[^:/@\s]*):[^@\s]*@/g, '$1:***@')
  let advice: string
  if (name === 'MongoNotConnectedError' || name === 'MongoTopologyClosedError' || name === 'MongoClientClosedError') {
    advice = `the MongoClient was closed (${name}: ${detail}); the task was not run. Keep the client open while locks are used, or connect() it again`
  } else if (typeof name === 'string' && UNREACHABLE_ERRORS.has(name)) {
    advice = `MongoDB is unreachable (${name}: ${detail}); the task was not run. Check the server and the client; the provider recovers by itself once it is back`
  } else if (typeof code === 'number' && NO_PRIMARY_CODES.has(code)) {
    advice = `the replica set has no writable primary right now (${detail}); the task was not run. The provider recovers by itself once a primary is elected`
  } else if (code === 13) {
    advice = `the user may not update ${where} (${detail}); grant it the readWrite role on that collection`
  } else if (code === 121) {
    advice = `${where} has a validator that rejects ShedLock's documents { _id: string, lockUntil: Date, lockedAt: Date, lockedBy: string } (${detail}); relax the validator or use another collection`
  } else {
    advice = detail
  }
  return new LockProviderError(`mongodb: could not ${action} lock "${lockName}": ${advice}`, { cause: error, provider: PROVIDER, lockName })
}
