import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkBucketName,
  checkedKey,
  decodeLockUntil,
  describeNatsError,
  isWrongLastSequence,
  type NatsKvEntry,
  natsLockName,
  PROVIDER,
} from './format.ts'
import { byName, inBatches } from '../../support/inspection.ts'
import { collectListing } from './listing.ts'

/**
 * The part of a JetStream KV bucket (`KV` from `@nats-io/kv` 3) that {@link natsLockInspector}
 * calls: the provider's bucket as it is.
 */
export interface NatsInspectableKv {
  /** The last entry of `key`, a delete marker included, or `null` if it has none. */
  get(key: string): Promise<NatsKvEntry | null>
  /** Leaves a delete marker on `key`, if its last revision is `previousSeq`. */
  delete(key: string, options: { previousSeq: number }): Promise<void>
  /** The keys that have a value (not deleted), in no particular order. */
  keys(): Promise<AsyncIterable<string>>
  /**
   * Every entry of the bucket, delete markers included, oldest first (`@nats-io/kv`'s `history()`,
   * an ordered consumer that stops once it has caught up). Optional: with it, `purgeBucket` and
   * `subjectForKey`, `removeExpired()` also purges old delete markers.
   */
  history?(options: {
    key: string
    headers_only: boolean
  }): Promise<AsyncIterable<NatsKvHistoryEntry> & { stop?(): void }>
  /** Purges the bucket's stream: here the messages of one key's subject below a sequence (`@nats-io/kv`'s `Bucket.purgeBucket`). Optional, see `history`. */
  purgeBucket?(options: { filter: string; seq: number }): Promise<{ purged: number }>
  /** The stream subject of `key` (`@nats-io/kv`'s `Bucket.subjectForKey`). Optional, see `history`. */
  subjectForKey?(key: string): string
}

/** One entry of {@link NatsInspectableKv.history}. */
export interface NatsKvHistoryEntry {
  readonly key: string
  /** The stream sequence of this entry. */
  readonly revision: number
  readonly operation: 'PUT' | 'DEL' | 'PURGE'
  /** When JetStream stored it, on the server's clock. */
  readonly created: Date
}

/** Options of {@link natsLockInspector}: the provider's bucket and clock. */
export interface NatsLockInspectorOptions {
  /** Your JetStream KV bucket (the provider's), from `@nats-io/kv` 3. */
  kv: NatsInspectableKv
  /**
   * The clock the providers decide expiry on: `now`, `held` and `remainingMs` are read on it, and a
   * force-release compares with it. @default systemClock
   */
  clock?: Clock
}

// A release by name reads the entry and deletes it at the revision read; a write in between
// (the holder extending, say) moves the revision, and the release reads again, this many times.
const RELEASE_ATTEMPTS = 3
/**
 * How old a delete marker must be before `removeExpired()` purges it: 30 minutes, as
 * `@nats-io/kv`'s `purgeDeletes()` keeps recent ones. A node that read the marker may be writing
 * over it (`create()` writes at the marker's revision); old markers only take space.
 */
const MARKER_AGE_MS = 30 * 60_000

/**
 * Reads and force-releases the locks of a NATS JetStream KV bucket, in the provider's (and Java
 * ShedLock's) format: for dashboards, health endpoints and operators. Keys decode to lock names
 * with {@link natsLockName}.
 *
 * The bucket keeps only `lockUntil` (8 bytes, big-endian epoch ms): `lockedBy` and `lockedAt` are
 * always `undefined`. (JetStream stamps each entry with the time it was written, but the holder
 * rewrites the entry when it extends the lock or releases it within `lockAtLeastFor`, so that
 * stamp is not when the lock was taken.) Expiry is decided on each node's clock, so `now`,
 * `held` and `remainingMs` are read on `clock`, this host's by default. An entry whose value is
 * not 8 bytes is not a lock record the provider can take over: it reads as held with an unknown
 * `lockUntil`.
 *
 * `list()` enumerates the bucket's keys (`kv.keys()`, an ordered consumer: the connection's user
 * needs permission to create consumers on the bucket's stream) and reads each entry; keys written
 * while it runs may be missed. A listing that delivers nothing for 5 s is stopped and the call
 * rejects with `LockProviderError`: such a consumer was seen to stall while other nodes wrote the
 * bucket, and an owed-slot drain waiting on it would hold the task's lock. A force-release deletes
 * the key at the revision read (a delete marker, as the provider's own release leaves): the lock
 * is free at once, and the holder's release or extension, conditional on the revision it wrote,
 * fails and changes nothing. Given a record, it deletes at the revision read only: an entry keeps
 * no holder and no time it was taken, so a write by the holder (an extension, a lease's renewal)
 * cannot be told from another node's acquisition, and after either the record releases nothing
 * (`false`); read the lock again, or release it by name. Reads may come from a stale replica
 * (direct get): a release at a revision that is no longer the last changes nothing and resolves to
 * `false`, and a release by name then reads again (three attempts in all).
 *
 * `removeExpired()` deletes each expired entry of the selection at the revision read (leaving a
 * delete marker; an entry another node wrote since is kept), then purges the selection's delete
 * markers older than 30 minutes (on `clock`), its own earlier ones included, so that the markers
 * of slot records, one per slot, do not pile up in the stream. Each marker is purged up to its
 * own revision (`purgeBucket({ filter: <key's subject>, seq: revision + 1 })`), never beyond: a
 * lock taken over the marker meanwhile stays. (`@nats-io/kv`'s own `purgeDeletes()` purges old
 * markers' subjects whole, `keep: 0`, and so purges a lock taken between its read and its purge:
 * another node could then take it too.) A marker purged while a node writes over it fails that
 * write: the node does not get the lock this time. The purge costs one pass over the whole
 * bucket's history (`kv.history()`, headers only: one message per key with history 1), whatever
 * the selection, plus one purge request per old marker, and needs permission to purge the
 * bucket's stream; it runs only when `kv` has `history`, `purgeBucket` and `subjectForKey` (a
 * `@nats-io/kv` bucket does), else markers stay. Purging a marker never lets a stale holder
 * write: revisions are stream sequences, never reused, so its revision-checked write still fails.
 *
 * ```ts
 * import { Kvm } from '@nats-io/kv'
 * import { natsLockInspector, NATS_LOCK_BUCKET } from 'shedlock/nats'
 * const inspector = natsLockInspector({ kv: await new Kvm(nc).open(NATS_LOCK_BUCKET) })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError when `kv` lacks `get`, `delete` or `keys`, or its bucket name is
 *   too long for any key. `get` and `release` throw it too for a name the provider refuses.
 */
export function natsLockInspector(options: NatsLockInspectorOptions): LockInspector {
  const { kv } = options ?? {}
  if (!kv || (['get', 'delete', 'keys'] as const).some((method) => typeof kv[method] !== 'function')) {
    throw new LockConfigurationError(
      'nats: pass your JetStream KV bucket as { kv }, e.g. await new Kvm(nc).open("shedlock-locks") from @nats-io/kv',
    )
  }
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('nats: clock must have a now() method returning epoch milliseconds')
  const bucket = checkBucketName(kv)
  const guard = storeGuard(describeNatsError(bucket))
  // What a record was read as: release(record) deletes the key only at that revision.
  const readAs = new WeakMap<LockRecord, { revision: number; lockUntil: number | undefined }>()

  /** The live entry of `key` (not a delete marker), or undefined. */
  const entryOf = async (key: string): Promise<NatsKvEntry | undefined> => {
    const entry = await kv.get(key)
    return entry && entry.operation === 'PUT' ? entry : undefined
  }
  const toRecord = (key: string, entry: NatsKvEntry, now: number): LockRecord => {
    const until = decodeLockUntil(entry.value)
    const record: LockRecord = Object.freeze({
      name: natsLockName(key),
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: undefined,
      lockedBy: undefined,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, { revision: entry.revision, lockUntil: until })
    return record
  }
  /** Deletes `key` if its last revision is still `revision`; false when another write came first. */
  const deleteAt = async (key: string, revision: number): Promise<boolean> => {
    try {
      await kv.delete(key, { previousSeq: revision })
      return true
    } catch (error) {
      if (isWrongLastSequence(error)) return false
      throw error
    }
  }
  const heldAt = (lockUntil: number | undefined): boolean => lockUntil === undefined || lockUntil > clock.now()
  /** The live entries of the keys whose name starts with the selection's prefix, read a few at a time (inBatches). */
  const selectedEntries = async (selection: LockSelection | undefined): Promise<[string, NatsKvEntry][]> => {
    const prefix = selection?.prefix ?? ''
    const keys = (await collectListing(await kv.keys(), "the bucket's keys")).filter((key) =>
      natsLockName(key).startsWith(prefix),
    )
    const entries = await inBatches(keys, async (key) => [key, await entryOf(key)] as const)
    return entries.flatMap(([key, entry]) => (entry ? [[key, entry] as [string, NatsKvEntry]] : []))
  }
  /** Purges the selection's delete markers older than MARKER_AGE_MS, each up to its own revision. */
  const purgeOldMarkers = async (prefix: string): Promise<void> => {
    if (
      typeof kv.history !== 'function' ||
      typeof kv.purgeBucket !== 'function' ||
      typeof kv.subjectForKey !== 'function'
    )
      return
    // The last entry of each key: a marker followed by a write is no longer the key's state.
    const last = new Map<string, NatsKvHistoryEntry>()
    const entries = await kv.history({ key: '>', headers_only: true })
    try {
      for (const entry of await collectListing(entries, "the bucket's history")) last.set(entry.key, entry)
    } finally {
      entries.stop?.()
    }
    const before = clock.now() - MARKER_AGE_MS
    const old = [...last.values()].filter(
      (entry) =>
        entry.operation !== 'PUT' && entry.created.getTime() <= before && natsLockName(entry.key).startsWith(prefix),
    )
    // `seq` purges the subject's messages below it: the marker and older, never a later write.
    await inBatches(old, (marker) =>
      kv.purgeBucket!({ filter: kv.subjectForKey!(marker.key), seq: marker.revision + 1 }),
    )
  }

  return {
    name: PROVIDER,
    clock: "this host's clock (NATS locks expire on each node's clock)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const entries = await selectedEntries(selection)
        const now = clock.now()
        const locks = entries.map(([key, entry]) => toRecord(key, entry, now))
        return { now: new Date(now), locks: locks.sort(byName) }
      }),
    get: async (name) => {
      const key = checkedKey(name, bucket)
      return guard('inspect', name, async () => {
        const entry = await entryOf(key)
        return entry && toRecord(key, entry, clock.now())
      })
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      // Outside the guard: a name the provider refuses rejects with its own LockConfigurationError.
      const key = checkedKey(name, bucket)
      const expected = typeof lock === 'string' ? undefined : readAs.get(lock)
      return guard('release', name, async () => {
        // Given a record, only the state it was read in: the same revision, still held.
        if (expected) return heldAt(expected.lockUntil) && deleteAt(key, expected.revision)
        for (let attempt = 0; attempt < RELEASE_ATTEMPTS; attempt++) {
          const entry = await entryOf(key)
          if (!entry || !heldAt(decodeLockUntil(entry.value))) return false
          if (await deleteAt(key, entry.revision)) return true
        }
        return false
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        const expired = (await selectedEntries(selection)).filter(([, entry]) => {
          const lockUntil = decodeLockUntil(entry.value)
          // An entry that is not 8 bytes counts as held, as the provider treats it.
          return lockUntil !== undefined && lockUntil <= clock.now()
        })
        const deleted = (
          await inBatches(expired, async ([key, entry]) => ((await deleteAt(key, entry.revision)) ? [key] : []))
        ).flat()
        await purgeOldMarkers(selection?.prefix ?? '')
        return deleted.length
      }),
  }
}
