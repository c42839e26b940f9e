import type { Clock } from '../core/clock.ts'
import { defineLock } from '../core/define-lock.ts'
import type { LockProviderError } from '../core/errors.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { LockInspector, LockList, LockRecord } from '../core/lock-inspector.ts'
import type { ExtensibleLock } from '../core/lock-provider.ts'
import { type FencingFloor, parseFencingToken } from './fencing.ts'
import { byName, inBatches, releaseAsRead } from './inspection.ts'
import { lockOwner } from './lock-owner.ts'
import { RELEASED_BY } from './sql/sql-inspector.ts'
import type { StoreAction } from './store-errors.ts'

// Locks in an object store with ETag-conditional writes (S3, Azure Blob): one record per lock,
// the lock in three metadata entries (lock-until, locked-at, locked-by as ISO-8601 UTC instants)
// and shedlock's fencing counter in a fourth, every write a new ETag. The lock algorithm and the inspector's reads and force-release live
// here once; each store keeps its requests, metadata names, quirks and error messages in its
// own folder (src/providers/<store>/) and passes them in.

/** ISO-8601 UTC with three fraction digits; Java's `Instant.parse` reads it. */
export function iso(ms: number): string {
  return new Date(ms).toISOString()
}

// Java writes `Instant.toString()`: no fraction on whole seconds, else 3, 6 or 9 digits.
const INSTANT = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/

/** Epoch ms of an ISO-8601 UTC instant (0 to 9 fraction digits, as Java or shedlock write it), or `NaN`; digits past the millisecond are dropped. */
export function parseInstant(value: string | undefined): number {
  const match = value === undefined ? null : INSTANT.exec(value)
  if (!match) return Number.NaN
  return Date.parse(`${match[1]}.${(match[2] ?? '').padEnd(3, '0').slice(0, 3)}Z`)
}

/** The lock metadata of a record, as read. */
export interface LockMetadata {
  readonly lockUntil: string | undefined
  readonly lockedAt: string | undefined
  readonly lockedBy: string | undefined
  /** The fencing counter (a decimal string), absent from records that Java ShedLock wrote last. */
  readonly fencingToken: string | undefined
}

/** A store's names for the metadata entries: Java ShedLock's three, and shedlock's fencing counter. */
export interface MetadataKeys {
  readonly lockUntil: string
  readonly lockedAt: string
  readonly lockedBy: string
  readonly fencingToken: string
}

/** Reads the four entries named by `keys`, whatever their case; others are ignored. */
export function readLockMetadata(keys: MetadataKeys, metadata: Record<string, string> | undefined): LockMetadata {
  const get = (key: string): string | undefined => {
    if (!metadata) return undefined
    const lower = key.toLowerCase()
    for (const [k, v] of Object.entries(metadata)) if (k.toLowerCase() === lower) return v
    return undefined
  }
  return {
    lockUntil: get(keys.lockUntil),
    lockedAt: get(keys.lockedAt),
    lockedBy: get(keys.lockedBy),
    fencingToken: get(keys.fencingToken),
  }
}

/**
 * The metadata of a lock record under `keys`; `lockedAt` as epoch ms, or as the instant already
 * written; the fencing counter when there is one to keep.
 */
export function writeLockMetadata(
  keys: MetadataKeys,
  lockUntil: number,
  lockedAt: number | string,
  lockedBy: string,
  fencingToken?: bigint | string,
): Record<string, string> {
  const metadata: Record<string, string> = {
    [keys.lockUntil]: iso(lockUntil),
    [keys.lockedAt]: typeof lockedAt === 'string' ? lockedAt : iso(lockedAt),
    [keys.lockedBy]: lockedBy,
  }
  if (fencingToken !== undefined) metadata[keys.fencingToken] = String(fencingToken)
  return metadata
}

/** A lock record as read, with the ETag of that version. */
export interface StoredRecord extends LockMetadata {
  readonly etag: string
}

/** The ETag-conditional writes of one store's records (an S3 bucket's objects, a container's blobs), by lock name. */
export interface ConditionalRecordStore {
  /** Reads `name`'s record; `undefined` when there is none. */
  head(name: string): Promise<StoredRecord | undefined>
  /** Creates `name`'s record if there is none (`If-None-Match: *`); its ETag, or `undefined` when one exists. */
  create(name: string, metadata: Record<string, string>): Promise<string | undefined>
  /** Overwrites `name`'s record if its ETag is still `etag` (`If-Match`); the new ETag, or `undefined` when it changed or is gone. */
  replace(name: string, etag: string, metadata: Record<string, string>): Promise<string | undefined>
}

/** The guard of `storeGuard`: runs a store request, turning its failures into the store's errors. */
export type Guard = <T>(action: StoreAction, lockName: string, run: () => Promise<T>) => Promise<T>

/** What {@link conditionalLock} needs of a store. */
export interface ConditionalLockOptions {
  readonly store: ConditionalRecordStore
  /** The store's metadata names. */
  readonly keys: MetadataKeys
  readonly clock: Clock
  /** The provider's floor of fresh fencing counters (one per provider). */
  readonly floor: FencingFloor
  readonly guard: Guard
  /** The provider's `lockedBy` option (the owner's prefix). */
  readonly lockedBy: string | undefined
  /** The error for a record without a valid lock-until: not written by shedlock, never taken over. */
  readonly notALock: (name: string, lockUntil: string | undefined) => LockProviderError
}

/**
 * One acquisition: a read, then one conditional write: `If-None-Match: *` when there is no
 * record, `If-Match: <etag read>` when its lock-until has passed on `clock`. Release (to
 * `lockAtLeastUntil`, or now) and extend write on `If-Match: <etag of our last write>`, so they
 * only touch the version this acquisition wrote. The caller has checked the request and the name.
 *
 * The fencing token is the record's counter as read plus one, at least `clock` in microseconds
 * (support/fencing.ts): known before the write, whose condition on the version read makes it
 * this acquisition's alone, so it costs no request. A record without a counter (Java ShedLock
 * rewrites the metadata wholesale, dropping it; a deleted record) starts again from the clock.
 */
export async function conditionalLock(
  configuration: LockConfiguration,
  options: ConditionalLockOptions,
): Promise<ExtensibleLock | undefined> {
  const { store, keys, clock, floor, guard } = options
  const { name } = configuration
  const owner = lockOwner(options.lockedBy)
  let fencingToken = 0n
  const write = (lockUntil: number, lockedAt: number | string): Record<string, string> =>
    writeLockMetadata(keys, lockUntil, lockedAt, owner, fencingToken)
  const result = await guard('acquire', name, async () => {
    const current = await store.head(name)
    const now = clock.now()
    const lockedAt = iso(now)
    fencingToken = floor.next(parseFencingToken(current?.fencingToken))
    const metadata = write(configuration.lockAtMostUntil.getTime(), lockedAt)
    if (!current) {
      const etag = await store.create(name, metadata)
      return etag === undefined ? undefined : { etag, lockedAt }
    }
    const until = parseInstant(current.lockUntil)
    if (Number.isNaN(until)) throw options.notALock(name, current.lockUntil)
    if (until > now) return undefined
    const etag = await store.replace(name, current.etag, metadata)
    return etag === undefined ? undefined : { etag, lockedAt }
  })
  if (!result) return undefined
  // The ETag of our last write: release and extend only touch that version.
  let { etag } = result
  return defineLock(configuration, {
    clock,
    lockedBy: owner,
    fencingToken,
    unlock: async (current) => {
      // A failed condition means another node holds the lock by now (or the record is gone): leave it.
      const lockUntil = Math.max(clock.now(), current.lockAtLeastUntil.getTime())
      await guard('release', current.name, () => store.replace(current.name, etag, write(lockUntil, result.lockedAt)))
    },
    extend: async (next, current) => {
      // Expired: another node may have taken it over already, or may at any moment.
      if (clock.now() >= current.lockAtMostUntil.getTime()) return false
      const written = await guard('extend', next.name, () =>
        store.replace(next.name, etag, write(next.lockAtMostUntil.getTime(), result.lockedAt)),
      )
      if (written === undefined) return false
      etag = written
      return true
    },
  })
}

/** What {@link conditionalInspector} needs of a store. */
export interface ConditionalInspectorOptions {
  readonly provider: string
  /** `LockInspector.clock`. */
  readonly clockLabel: string
  readonly store: ConditionalRecordStore & {
    /** Deletes `name`'s record if its ETag is still `etag`; false when it changed or is gone. */
    remove(name: string, etag: string): Promise<boolean>
  }
  readonly keys: MetadataKeys
  readonly clock: Clock
  readonly guard: Guard
  /** @throws LockConfigurationError for a name no lock can have. */
  readonly checkName: (name: string) => void
  /** The records whose lock names start with `namePrefix`, read now; those deleted since the listing left out. */
  readonly list: (namePrefix: string) => Promise<{ name: string; record: StoredRecord }[]>
  /** Whether `removeExpired()` may delete (false where deletes are not conditional: it then resolves to 0). @default always */
  readonly canRemove?: () => Promise<boolean>
}

/** What a record held when it was read: its version, and the acquisition it holds (release(record) matches that). */
interface ReadState {
  readonly etag: string
  readonly lockedAt: string | undefined
  readonly lockedBy: string | undefined
  readonly fencingToken: string | undefined
}

/**
 * Whether `now` holds the acquisition `asRead` held: the same holder, taken at the same instant,
 * with the same fencing token (an extension rewrites all three as they were, with a new ETag).
 * A record without a holder or a time tells no acquisition from another: only its ETag counts.
 */
function sameAcquisition(asRead: ReadState, now: ReadState): boolean {
  return (
    asRead.lockedBy !== undefined &&
    asRead.lockedAt !== undefined &&
    now.lockedBy === asRead.lockedBy &&
    now.lockedAt === asRead.lockedAt &&
    now.fencingToken === asRead.fencingToken
  )
}

/**
 * The inspector of an ETag-conditional store. A record without a valid lock-until is held, with
 * an unknown `lockUntil`, as the provider never takes it over. A force-release overwrites the
 * record on `If-Match` of the version read with lock-until now and locked-by `"released"`; given a
 * record whose ETag moved on (its holder extended it), it reads the record again and, if it still
 * holds the acquisition read (locked-by, locked-at, fencing counter), writes on `If-Match` of the
 * new ETag. `removeExpired()` deletes the records not held, each on `If-Match` of the version read.
 */
export function conditionalInspector(options: ConditionalInspectorOptions): LockInspector {
  const { store, keys, clock, guard, checkName } = options
  const readAs = new WeakMap<LockRecord, ReadState>()

  const toRecord = (name: string, stored: StoredRecord, now: number): LockRecord => {
    const untilMs = parseInstant(stored.lockUntil)
    const atMs = parseInstant(stored.lockedAt)
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: Number.isNaN(untilMs) ? undefined : new Date(untilMs),
      lockedAt: Number.isNaN(atMs) ? undefined : new Date(atMs),
      lockedBy: stored.lockedBy,
      held: Number.isNaN(untilMs) ? true : untilMs > now,
      remainingMs: Number.isNaN(untilMs) ? undefined : Math.max(0, untilMs - now),
    })
    readAs.set(record, {
      etag: stored.etag,
      lockedAt: stored.lockedAt,
      lockedBy: stored.lockedBy,
      fencingToken: stored.fencingToken,
    })
    return record
  }

  const read = async (namePrefix: string): Promise<{ now: number; locks: LockRecord[] }> => {
    const listed = await options.list(namePrefix)
    const now = clock.now()
    return { now, locks: listed.map(({ name, record }) => toRecord(name, record, now)).sort(byName) }
  }

  const inspector: LockInspector = {
    name: options.provider,
    clock: options.clockLabel,
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const { now, locks } = await read(selection?.prefix ?? '')
        return { now: new Date(now), locks }
      }),
    get: async (name) => {
      checkName(name)
      return guard('inspect', name, async () => {
        const stored = await store.head(name)
        return stored && toRecord(name, stored, clock.now())
      })
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      checkName(name)
      return guard('release', name, () =>
        releaseAsRead(
          lock,
          readAs,
          () => inspector.get(name),
          async (state) =>
            (await store.replace(
              name,
              state.etag,
              // The counter stays, so that the next acquisition counts on from it.
              writeLockMetadata(keys, clock.now(), state.lockedAt ?? clock.now(), RELEASED_BY, state.fencingToken),
            )) !== undefined,
          sameAcquisition,
        ),
      )
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        if (options.canRemove && !(await options.canRemove())) return 0
        const { locks } = await read(selection?.prefix ?? '')
        const removed = await inBatches(
          locks.filter((lock) => !lock.held),
          (lock) => store.remove(lock.name, readAs.get(lock)!.etag),
        )
        return removed.filter(Boolean).length
      }),
  }
  return inspector
}
