import { type Clock, systemClock } from '../../core/clock.ts'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockRecord } from '../../core/lock-inspector.ts'
import { byName, inBatches, keyedGetAndRelease } from '../../support/inspection.ts'
import { RELEASED_BY } from '../../support/sql/sql-inspector.ts'
import { type StoreAction, storeGuard } from '../../support/store-errors.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { checkCollection, type FirestoreLockCollection, type FirestoreSnapshot } from './client.ts'
import {
  CODE,
  collectionLabel,
  describeFirestoreError,
  firestoreDocumentId,
  firestoreLockName,
  hasCode,
  LOCK_UNTIL,
  LOCKED_AT,
  LOCKED_BY,
  millisOf,
  PROVIDER,
} from './format.ts'

/** Options of {@link firestoreLockInspector}: the provider's collection and clock. */
export interface FirestoreLockInspectorOptions {
  /** The lock collection (the provider's), e.g. `new Firestore().collection('shedlock')`. */
  collection: FirestoreLockCollection
  /**
   * The clock the providers decide expiry on (each node's, as in Java ShedLock): `now`, `held`
   * and `remainingMs` are read on it, and a force-release writes its time. @default systemClock
   */
  clock?: Clock
  /** How long one inspector call may take. A milliseconds number or a duration string. @default "10s" */
  timeout?: Duration
}

/** The version a record was read at (its `updateTime` and `lockUntil`), and the acquisition it held. */
interface ReadState {
  readonly updateTime: unknown
  readonly until: number | undefined
  readonly lockedBy: unknown
  readonly lockedAt: number | undefined
}

/**
 * Whether `now` holds the acquisition `asRead` held: the same holder, taken at the same time (an
 * extension moves only `lockUntil`, and the `updateTime`). A document without both tells no
 * acquisition from another: only its `updateTime` counts.
 */
function sameAcquisition(asRead: ReadState, now: ReadState): boolean {
  return (
    typeof asRead.lockedBy === 'string' &&
    asRead.lockedAt !== undefined &&
    now.lockedBy === asRead.lockedBy &&
    now.lockedAt === asRead.lockedAt
  )
}

/**
 * Reads and force-releases the locks of a Firestore lock collection, in the provider's (and Java
 * ShedLock's) format `{ lockUntil, lockedAt, lockedBy }`: for dashboards, health endpoints and
 * operators. `get()` is one document read. `list()` reads the whole collection (Firestore bills a
 * read per document) and selects a prefix here, as escaped names (`%2F`) do not sort with their
 * prefix. A document whose `lockUntil` is missing or not a Timestamp cannot be taken over by the
 * provider: it reads as held, with an unknown `lockUntil`.
 *
 * A force-release sets `lockUntil` to now and `lockedBy` to `"released"` and keeps the document:
 * the lock is free at once, and its holder's release or extension, which check `lockedBy`, change
 * nothing. Given a record, it writes only if the document is still as read (`lastUpdateTime`
 * precondition); if its holder extended it since, it reads it again and writes at the new
 * `updateTime` if `lockedBy` and `lockedAt` are still those read. A lock released and taken again
 * since is left alone. `removeExpired()` deletes the
 * documents whose `lockUntil` has passed on `clock`, each only if unchanged since the listing.
 *
 * ```ts
 * import { firestoreLockInspector } from 'shedlock/firestore'
 * const inspector = firestoreLockInspector({ collection: new Firestore().collection('shedlock') })
 * const { locks } = await inspector.list()
 * ```
 *
 * @throws LockConfigurationError when `collection` is not a CollectionReference or `timeout` is not positive.
 */
export function firestoreLockInspector(options: FirestoreLockInspectorOptions): LockInspector {
  const { collection } = options ?? {}
  checkCollection(collection)
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError(`${PROVIDER}: clock must have a now() method returning epoch milliseconds`)
  const timeout = parseDuration(options.timeout ?? '10s')
  if (!(timeout > 0)) throw new LockConfigurationError(`${PROVIDER}: timeout must be longer than 0ms`)
  const storeCall = storeGuard(describeFirestoreError(collectionLabel(collection)))
  const guard = <T>(action: StoreAction, name: string, run: () => Promise<T>): Promise<T> =>
    storeCall(action, name, () => withTimeout(run(), timeout, { store: 'Firestore' }))
  const readAs = new WeakMap<LockRecord, ReadState>()

  const toRecord = (snapshot: FirestoreSnapshot, now: number): LockRecord => {
    const until = millisOf(snapshot.get(LOCK_UNTIL))
    const lockedAt = millisOf(snapshot.get(LOCKED_AT))
    const lockedBy = snapshot.get(LOCKED_BY)
    const record: LockRecord = Object.freeze({
      name: firestoreLockName(snapshot.id),
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: lockedAt === undefined ? undefined : new Date(lockedAt),
      lockedBy: typeof lockedBy === 'string' ? lockedBy : undefined,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, { updateTime: snapshot.updateTime, until, lockedBy, lockedAt })
    return record
  }

  const listAll = async (prefix: string | undefined): Promise<{ now: number; records: LockRecord[] }> => {
    const { docs } = await collection.get()
    const now = clock.now()
    const records = docs.map((snapshot) => toRecord(snapshot, now))
    return { now, records: records.filter((record) => !prefix || record.name.startsWith(prefix)).sort(byName) }
  }

  /** Runs a conditional write; resolves to `false` when the document changed since it was read. */
  const unlessChanged = async (write: () => Promise<unknown>): Promise<boolean> => {
    try {
      await write()
      return true
    } catch (error) {
      if (hasCode(error, CODE.FAILED_PRECONDITION) || hasCode(error, CODE.NOT_FOUND)) return false
      throw error
    }
  }

  const { get, release } = keyedGetAndRelease<ReadState>(
    guard,
    firestoreDocumentId,
    async (_name, id) => {
      const snapshot = await collection.doc(id).get()
      return snapshot.exists ? toRecord(snapshot, clock.now()) : undefined
    },
    readAs,
    async (id, state) => {
      const now = clock.now()
      // Read as held, but its lockUntil has passed since: nothing left to release.
      if (state.until !== undefined && state.until <= now) return false
      return unlessChanged(() =>
        collection
          .doc(id)
          .update({ [LOCK_UNTIL]: new Date(now), [LOCKED_BY]: RELEASED_BY }, { lastUpdateTime: state.updateTime }),
      )
    },
    sameAcquisition,
  )

  return {
    name: PROVIDER,
    clock: "this host's clock (Firestore locks expire on each node's clock, as in Java ShedLock)",
    list: (selection) =>
      guard('list', '', async () => {
        const { now, records } = await listAll(selection?.prefix)
        return { now: new Date(now), locks: records }
      }),
    get,
    release,
    removeExpired: (selection) =>
      guard('list', '', async () => {
        const { records } = await listAll(selection?.prefix)
        const expired = records.filter((record) => !record.held)
        const removed = await inBatches(expired, (record) =>
          unlessChanged(() =>
            collection.doc(firestoreDocumentId(record.name)).delete({ lastUpdateTime: readAs.get(record)!.updateTime }),
          ),
        )
        return removed.filter(Boolean).length
      }),
  }
}
