import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { byName, inBatches } from '../../support/inspection.ts'
import { RELEASED_BY } from '../../support/sql/sql-inspector.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkName,
  checkSpace,
  type DatastoreClient,
  describeDatastoreError,
  kindLabel,
  LOCK_UNTIL,
  LOCKED_AT,
  LOCKED_BY,
  type LockSpace,
  lockKey,
  PROVIDER,
  timeOf,
} from './format.ts'
import { propertiesOf, readIn, transact } from './transaction.ts'

/** Options of {@link datastoreLockInspector}: the provider's client, kind, namespace and clock. */
export interface DatastoreLockInspectorOptions {
  /** Your `@google-cloud/datastore` client (the provider's). */
  datastore: DatastoreClient
  /** The kind of the lock entities. @default "lock" */
  kind?: string
  /** The namespace of the lock entities. @default the client's */
  namespace?: string
  /**
   * The clock the providers decide expiry on: `now`, `held` and `remainingMs` are read on it, and
   * a force-release writes its time. @default systemClock
   */
  clock?: Clock
}

/** The acquisition an entity held when it was read: release(record) changes only that one. */
interface ReadState {
  readonly lockedBy: unknown
  readonly lockedAt: number | undefined
  readonly lockUntil: number | undefined
}

// Entities per query batch while listing.
const PAGE = 500

/**
 * Reads and force-releases the locks of a Datastore lock kind, in the provider's (and Java
 * ShedLock's) format `{ lock_until, locked_at, locked_by }`: for dashboards, health endpoints and
 * operators. `list()` runs a query over the kind (500 entities a batch) and keeps the names that
 * start with the selection's prefix; `get()` is one lookup; `release()` and each removal of
 * `removeExpired()` are one transaction that checks the entity again before it writes.
 *
 * Expiry is decided on each node's clock, so `now`, `held` and `remainingMs` are read on `clock`,
 * this host's by default. An entity without a `lock_until` timestamp cannot be taken over by the
 * provider: it reads as held, with an unknown `lockUntil`.
 *
 * A force-release sets `lock_until` to now and `locked_by` to `"released"` and keeps the entity:
 * the lock is free at once, and the holder's release or extension, which match its own
 * `locked_by`, change nothing. Given a record, it changes the entity only while it holds the
 * `locked_by` and `locked_at` read (the holder's extensions move only `lock_until`), so a lock
 * released and taken again since is left alone.
 *
 * ```ts
 * import { datastoreLockInspector } from 'shedlock/datastore'
 * const inspector = datastoreLockInspector({ datastore })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing client or an invalid kind or namespace.
 */
export function datastoreLockInspector(options: DatastoreLockInspectorOptions): LockInspector {
  const space = checkSpace(options)
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('datastore: clock must have a now() method returning epoch milliseconds')
  const guard = storeGuard(describeDatastoreError(kindLabel(space)))
  const readAs = new WeakMap<LockRecord, ReadState>()

  const toRecord = (name: string, entity: Record<string, unknown>, now: number): LockRecord => {
    const until = timeOf(entity[LOCK_UNTIL])
    const at = timeOf(entity[LOCKED_AT])
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: at === undefined ? undefined : new Date(at),
      lockedBy: typeof entity[LOCKED_BY] === 'string' ? entity[LOCKED_BY] : undefined,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, { lockedBy: entity[LOCKED_BY], lockedAt: at, lockUntil: until })
    return record
  }

  const listed = async (selection: LockSelection | undefined): Promise<LockRecord[]> => {
    const entities = await selected(space, selection?.prefix ?? '')
    const now = clock.now()
    return entities.map(([name, entity]) => toRecord(name, entity, now)).sort(byName)
  }

  return {
    name: PROVIDER,
    clock: "this host's clock (Datastore locks expire on each node's clock)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const locks = await listed(selection)
        return { now: new Date(clock.now()), locks }
      }),
    get: async (name) => {
      checkName(name)
      return guard('inspect', name, async () => {
        const [entity] = await space.datastore.get(lockKey(space, name), { wrapNumbers: true })
        return entity ? toRecord(name, entity as Record<string, unknown>, clock.now()) : undefined
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
        return change(
          space,
          name,
          (entity, now) => {
            const until = timeOf(entity[LOCK_UNTIL])
            // Only a held lock; given a record, only the acquisition it was read from: the same
            // holder, taken at the same time (without a locked_at, the same expiry too).
            if (until !== undefined && until <= now) return undefined
            if (expected && !sameAcquisition(expected, entity, until)) return undefined
            return { ...propertiesOf(entity), [LOCK_UNTIL]: new Date(now), [LOCKED_BY]: RELEASED_BY }
          },
          clock,
        )
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        const expired = (await listed(selection)).filter((record) => record.lockUntil !== undefined && !record.held)
        const removed = await inBatches(expired, (record) => {
          const read = readAs.get(record)
          // The provider's takeover condition, checked again: an entity taken meanwhile stays.
          return change(
            space,
            record.name,
            (entity, now) => {
              const until = timeOf(entity[LOCK_UNTIL])
              return until !== undefined && until <= now && entity[LOCKED_BY] === read?.lockedBy ? 'delete' : undefined
            },
            clock,
          )
        })
        return removed.filter(Boolean).length
      }),
  }
}

/** Whether `entity` (whose `lock_until` is `until`) holds the acquisition `expected` was read from. */
function sameAcquisition(expected: ReadState, entity: Record<string, unknown>, until: number | undefined): boolean {
  if (entity[LOCKED_BY] !== expected.lockedBy) return false
  const at = timeOf(entity[LOCKED_AT])
  return expected.lockedAt === undefined ? at === undefined && until === expected.lockUntil : at === expected.lockedAt
}

/**
 * In one transaction, reads lock `name` and writes what `decide` returns for it: new properties,
 * `'delete'`, or nothing (`undefined`). Resolves to whether it wrote.
 */
function change(
  space: LockSpace,
  name: string,
  decide: (entity: Record<string, unknown>, now: number) => Record<string, unknown> | 'delete' | undefined,
  clock: Clock,
): Promise<boolean> {
  const key = lockKey(space, name)
  return transact(space, async (transaction) => {
    const entity = await readIn(transaction, key)
    const outcome = entity && decide(entity, clock.now())
    if (!outcome) return { value: false, write: false }
    if (outcome === 'delete') transaction.delete(key)
    else transaction.update({ key, data: outcome })
    return { value: true, write: true }
  })
}

/** The lock entities whose names start with `prefix`, as `[name, entity]`. */
async function selected(space: LockSpace, prefix: string): Promise<[string, Record<string, unknown>][]> {
  const { datastore } = space
  const found: [string, Record<string, unknown>][] = []
  let cursor: string | undefined
  for (;;) {
    // Ordered by key, so that the cursor walks the kind once; the prefix is kept here rather
    // than in a key range, which would need the client library's filter classes.
    // The empty namespace is the default one (the client's own is already in space.namespace).
    let query = datastore
      .createQuery(space.namespace ?? '', space.kind)
      .order('__key__')
      .limit(PAGE)
    if (cursor !== undefined) query = query.start(cursor)
    const [entities, info] = await datastore.runQuery(query, { wrapNumbers: true })
    for (const entity of entities as Record<string | symbol, unknown>[]) {
      const name = (entity[datastore.KEY] as { name?: unknown } | undefined)?.name
      if (typeof name === 'string' && name.startsWith(prefix)) found.push([name, entity as Record<string, unknown>])
    }
    if (entities.length < PAGE || !info.endCursor || info.moreResults === 'NO_MORE_RESULTS') return found
    cursor = info.endCursor
  }
}
