import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { FencingFloor, parseFencingToken } from '../../support/fencing.ts'
import { checkName, collectionLabel, describeMongoError, DUPLICATE_KEY, FENCING_TOKEN, PROVIDER } from './format.ts'
import { type MongoInspectorCollection, mongoLockInspector } from './inspector.ts'

/**
 * The part of a MongoDB Node.js driver (mongodb 6 and 7) `Collection` that this provider calls.
 * We don't import `mongodb`: pass `db.collection('shedLock')` as it is.
 *
 * `findOneAndUpdate` must resolve the way mongodb 6 and 7 do by default: to the matched document
 * (the updated one with `returnDocument: 'after'`), or `null` when none matched. A driver 5
 * `ModifyResult` (`{ value, ok }`) is read too. The acquisition sends an update pipeline
 * (MongoDB 4.2 or later).
 */
export interface MongoLockCollection {
  /** The collection's name, for error messages only. */
  readonly collectionName?: string
  findOneAndUpdate(
    filter: Record<string, unknown>,
    update: Record<string, unknown> | Record<string, unknown>[],
    options: { upsert?: boolean; returnDocument?: 'after' },
  ): Promise<unknown>
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

/**
 * Locks as documents of a MongoDB collection in Java ShedLock's format
 * (`{ _id: <name>, lockUntil, lockedAt, lockedBy }`), through a `Collection` of your `mongodb`
 * driver: one `findOneAndUpdate` upsert per acquisition. Extensible; expiry is decided on each
 * node's `clock`, so keep node clocks in sync; every lock carries a `fencingToken` at no extra
 * request (MongoDB 4.2+). On a replica set use `w: 'majority'`, as Java does.
 *
 * ```ts
 * import { MongoClient } from 'mongodb'
 * import { mongoLockProvider } from 'shedlock/mongodb'
 * const client = new MongoClient(url)
 * const provider = mongoLockProvider({ collection: client.db('app').collection('shedLock', { writeConcern: { w: 'majority' } }) })
 * ```
 *
 * See docs/providers/mongodb.md.
 *
 * @throws LockConfigurationError when `collection` is not a driver Collection or `lockedBy` is empty.
 */
export function mongoLockProvider(options: MongoLockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  const { collection, lockedBy } = options ?? {}
  if (!collection || typeof collection.findOneAndUpdate !== 'function') {
    throw new LockConfigurationError(
      "mongodb: pass your lock collection as { collection }, e.g. client.db('app').collection('shedLock') (an object with findOneAndUpdate; a Db or MongoClient is not one)",
    )
  }
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `mongodb: lockedBy must be a non-empty string (it prefixes the lockedBy field), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const clock = options.clock ?? systemClock
  const floor = new FencingFloor(clock)
  const guard = storeGuard(describeMongoError(collectionLabel(collection)))

  /** Resolves to `false` when the lock is held, else to the acquisition's fencing token (`undefined` if the reply lacks it). */
  const acquire = async (configuration: LockConfiguration, owner: string): Promise<false | bigint | undefined> => {
    const now = new Date(clock.now())
    try {
      const after = await collection.findOneAndUpdate(
        { _id: configuration.name, lockUntil: { $lte: now } },
        // A pipeline, so that one write takes the lock and counts it: one more than the document's
        // counter, or than the floor on a document without one (new, recreated, or Java's only).
        [
          {
            $set: {
              lockUntil: configuration.lockAtMostUntil,
              lockedAt: now,
              // In a pipeline a string starting with '$' would be a field path: the owner goes as a literal.
              lockedBy: { $literal: owner },
              [FENCING_TOKEN]: { $add: [{ $ifNull: [`$${FENCING_TOKEN}`, Number(floor.at())] }, 1] },
            },
          },
        ],
        { upsert: true, returnDocument: 'after' },
      )
      return floor.saw(tokenOf(after))
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === DUPLICATE_KEY) return false
      throw error
    }
  }

  return {
    name: PROVIDER,
    // A driver Collection also has the find, findOne, updateOne and deleteMany the inspector calls.
    inspector: () =>
      mongoLockInspector({ collection: collection as MongoLockCollection & MongoInspectorCollection, clock }),
    async lock(configuration) {
      checkLockRequest(PROVIDER, configuration, clock)
      checkName(configuration.name)
      const owner = lockOwner(lockedBy)
      const fencingToken = await guard('acquire', configuration.name, () => acquire(configuration, owner))
      if (fencingToken === false) return undefined
      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        ...(fencingToken === undefined ? {} : { fencingToken }),
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

/** The `fencingToken` of the document `findOneAndUpdate` returned (a number, or a bson Long or Double, or a bigint with `useBigInt64`). */
function tokenOf(result: unknown): bigint | undefined {
  const wrapped = result as { value?: unknown; ok?: unknown } | null
  const doc = (wrapped && 'ok' in wrapped && 'value' in wrapped ? wrapped.value : result) as Record<
    string,
    unknown
  > | null
  const value = doc?.[FENCING_TOKEN]
  if (typeof value === 'bigint') return value
  return parseFencingToken(typeof value === 'object' && value !== null ? String(value) : value)
}

/** Did `findOneAndUpdate` (without upsert) match a document? */
function matched(result: unknown): boolean {
  if (result === null || result === undefined) return false
  // Driver 5 (and 6/7 with includeResultMetadata) wrap the document: { value, ok, lastErrorObject }.
  // Lock documents never have these fields, so the two shapes cannot be confused.
  const wrapped = result as { value?: unknown; ok?: unknown }
  if ('ok' in wrapped && 'value' in wrapped) return wrapped.value !== null && wrapped.value !== undefined
  return true
}
