import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { RELEASED_BY } from '../../support/sql/sql-inspector.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { checkName, collectionLabel, describeMongoError, PROVIDER } from './format.ts'
import { byName } from '../../support/inspection.ts'

/**
 * The part of a MongoDB Node.js driver (mongodb 6 and 7) `Collection` that
 * {@link mongoLockInspector} calls: pass the provider's collection as it is.
 */
export interface MongoInspectorCollection {
  /** The collection's name, for error messages only. */
  readonly collectionName?: string
  find(filter: Record<string, unknown>): { toArray(): Promise<unknown[]> }
  findOne(filter: Record<string, unknown>): Promise<unknown>
  updateOne(
    filter: Record<string, unknown>,
    update: Record<string, unknown>,
  ): Promise<{ readonly matchedCount: number }>
  deleteMany(filter: Record<string, unknown>): Promise<{ readonly deletedCount: number }>
}

/** Options of {@link mongoLockInspector}: the provider's collection and clock. */
export interface MongoLockInspectorOptions {
  /** The lock collection (the provider's), e.g. `client.db('app').collection('shedLock')`. */
  collection: MongoInspectorCollection
  /**
   * The clock the providers decide expiry on (MongoDB compares `lockUntil` with the time each
   * node sends): `now`, `held` and `remainingMs` are read on it, and a force-release writes its
   * time. @default systemClock
   */
  clock?: Clock
}

/** The acquisition a document held when it was read, as stored: release(record) matches that. */
interface ReadState {
  readonly id: unknown
  readonly lockedBy: unknown
  readonly lockedAt: unknown
  readonly lockUntil: unknown
}

/**
 * Reads and force-releases the locks of a MongoDB lock collection, in the provider's (and Java
 * ShedLock's) format `{ _id, lockUntil, lockedAt, lockedBy }`: for dashboards, health endpoints
 * and operators. One `find` lists, one `findOne` reads a lock, one `updateOne` releases it, one
 * `deleteMany` removes expired records. A prefix selects with an anchored `_id` regular
 * expression, which MongoDB answers from the `_id` index.
 *
 * Expiry is decided on each node's clock (an update filter cannot read the server's), so `now`,
 * `held` and `remainingMs` are read on `clock`, this host's by default. A document whose
 * `lockUntil` is missing or not a Date cannot be taken over by the provider: it reads as held,
 * with an unknown `lockUntil`.
 *
 * A force-release sets `lockUntil` to now and `lockedBy` to `"released"` and keeps the document,
 * as released locks stay: the lock is free at once, and the holder's release or extension, which
 * match its own `lockedBy`, change nothing. Given a record, it matches the `lockedBy` and
 * `lockedAt` read, which the holder's extensions keep (they move only `lockUntil`), so a lock
 * released and taken again since is left alone.
 *
 * ```ts
 * import { mongoLockInspector } from 'shedlock/mongodb'
 * const inspector = mongoLockInspector({ collection: client.db('app').collection('shedLock') })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * `removeExpired()` deletes the documents whose `lockUntil` is a Date not after `clock`'s now, the
 * provider's takeover condition: a document taken meanwhile no longer matches.
 *
 * @throws LockConfigurationError when `collection` lacks `find`, `findOne`, `updateOne` or `deleteMany`.
 */
export function mongoLockInspector(options: MongoLockInspectorOptions): LockInspector {
  const { collection } = options ?? {}
  if (
    !collection ||
    (['find', 'findOne', 'updateOne', 'deleteMany'] as const).some((method) => typeof collection[method] !== 'function')
  ) {
    throw new LockConfigurationError(
      "mongodb: pass your lock collection as { collection }, e.g. client.db('app').collection('shedLock') (an object with find, findOne, updateOne and deleteMany; a Db or MongoClient is not one)",
    )
  }
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('mongodb: clock must have a now() method returning epoch milliseconds')
  const guard = storeGuard(describeMongoError(collectionLabel(collection)))
  const readAs = new WeakMap<LockRecord, ReadState>()

  const toRecord = (found: unknown, now: number): LockRecord => {
    const document = found as Record<string, unknown>
    const until = document.lockUntil instanceof Date ? document.lockUntil.getTime() : undefined
    const record: LockRecord = Object.freeze({
      name: String(document._id),
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: document.lockedAt instanceof Date ? new Date(document.lockedAt.getTime()) : undefined,
      lockedBy: typeof document.lockedBy === 'string' ? document.lockedBy : undefined,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, {
      id: document._id,
      lockedBy: document.lockedBy,
      lockedAt: document.lockedAt,
      lockUntil: document.lockUntil,
    })
    return record
  }

  return {
    name: PROVIDER,
    clock: "this host's clock (MongoDB locks expire on each node's clock)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const documents = await collection.find(selected(selection)).toArray()
        const now = clock.now()
        return { now: new Date(now), locks: documents.map((document) => toRecord(document, now)).sort(byName) }
      }),
    get: async (name) => {
      checkName(name)
      return guard('inspect', name, async () => {
        const document = await collection.findOne({ _id: name })
        return document ? toRecord(document, clock.now()) : undefined
      })
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      checkName(name)
      const record = typeof lock === 'string' ? undefined : lock
      const expected = record && readAs.get(record)
      return guard('release', name, async () => {
        // A record read as free has nothing to release.
        if (record && expected && !record.held) return false
        const now = new Date(clock.now())
        // Only a held lock; given a record, only the acquisition it was read from (same holder,
        // same lockedAt), whatever its lockUntil is now. A lockUntil that is no Date is held for
        // ever (no node extends or takes it): it must still be the one read. Equality with null
        // also matches a missing field.
        const filter: Record<string, unknown> = expected
          ? {
              _id: expected.id,
              lockedBy: expected.lockedBy ?? null,
              lockedAt: expected.lockedAt ?? null,
              lockUntil: expected.lockUntil instanceof Date ? { $gt: now } : (expected.lockUntil ?? null),
            }
          : { _id: name, lockUntil: { $gt: now } }
        const { matchedCount } = await collection.updateOne(filter, { $set: { lockUntil: now, lockedBy: RELEASED_BY } })
        return matchedCount > 0
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        // The provider's takeover condition: only a Date lockUntil compares with a Date.
        const { deletedCount } = await collection.deleteMany({
          ...selected(selection),
          lockUntil: { $lte: new Date(clock.now()) },
        })
        return deletedCount
      }),
  }
}

/** The filter of the documents whose `_id` starts with the selection's prefix. */
function selected(selection: LockSelection | undefined): Record<string, unknown> {
  const prefix = selection?.prefix
  if (prefix === undefined || prefix === '') return {}
  // Anchored and case-sensitive, so the _id index bounds the scan. Metacharacters are escaped;
  // NUL, which a pattern may not contain, is written \x00.
  return { _id: { $regex: `^${prefix.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&').replaceAll('\0', '\\x00')}` } }
}
