import type { LockInspector, LockRecord } from '../core/lock-inspector.ts'
import type { StoreAction } from './store-errors.ts'

// What the stores' inspectors share: the order of list(), and the release of a record "as read".

/** The order of `LockInspector.list()`: by name, in JavaScript string order (UTF-16 code units). */
export function byName(a: LockRecord, b: LockRecord): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}

/**
 * A force-release that takes nothing another node wrote since: given a record read by this
 * inspector, only the state it was read in (`readAs` holds the token it was read with: a value, a
 * revision, a version); given a name, the state it is in now (read afresh). A record that is not
 * held is left alone. `remove(token)` deletes or frees the record only if it still holds `token`,
 * and resolves to whether it did.
 *
 * Where every write makes a new version (an ETag, a versionstamp, an update time), the holder's
 * extension makes the record's version stale: with `sameAcquisition`, a record whose version
 * moved on is read again, and released at its new version if `sameAcquisition(asRead, now)` finds
 * it the same acquisition (its holder and the time it took the lock): one conditional write
 * still decides, so a lock taken again in between is left alone.
 */
export async function releaseAsRead<T>(
  lock: string | LockRecord,
  readAs: WeakMap<LockRecord, T>,
  readNow: () => Promise<LockRecord | undefined>,
  remove: (token: T) => Promise<boolean>,
  sameAcquisition?: (asRead: T, now: T) => boolean,
): Promise<boolean> {
  if (typeof lock !== 'string' && !lock.held) return false
  const asRead = typeof lock === 'string' ? undefined : readAs.get(lock)
  if (asRead !== undefined) {
    if (await remove(asRead)) return true
    if (!sameAcquisition) return false
  }
  const current = await readNow()
  if (!current?.held) return false
  const token = readAs.get(current)
  if (token === undefined || (asRead !== undefined && !sameAcquisition?.(asRead, token))) return false
  return remove(token)
}

/**
 * `get()` and `release()` of an inspector that keeps each lock under one key and releases a record
 * as read ({@link releaseAsRead}). `keyOf` builds and checks a name's key outside `guard`: a name
 * no key can hold is the caller's to fix, not a store failure. `read` reads the record under a
 * key (and notes its token in `readAs`); `remove(key, token)` deletes it only while it holds
 * `token`, resolving to whether it did; `sameAcquisition` as in {@link releaseAsRead}.
 */
export function keyedGetAndRelease<T>(
  guard: <R>(action: StoreAction, lockName: string, run: () => Promise<R>) => Promise<R>,
  keyOf: (name: string) => string,
  read: (name: string, key: string) => Promise<LockRecord | undefined>,
  readAs: WeakMap<LockRecord, T>,
  remove: (key: string, token: T) => Promise<boolean>,
  sameAcquisition?: (asRead: T, now: T) => boolean,
): Pick<LockInspector, 'get' | 'release'> {
  return {
    get: async (name) => {
      const key = keyOf(name)
      return guard('inspect', name, () => read(name, key))
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      const key = keyOf(name)
      return guard('release', name, () =>
        releaseAsRead(
          lock,
          readAs,
          () => read(name, key),
          (token) => remove(key, token),
          sameAcquisition,
        ),
      )
    },
  }
}

/**
 * Records read at once while listing: enough to hide the round trips, few enough not to flood
 * the connection (a catch-up lists every slot record of a task, 1,440 a day for one a minute).
 */
export const PARALLEL_READS = 16

/** `run` over `items`, {@link PARALLEL_READS} at a time; the results in the order of `items`. */
export async function inBatches<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = []
  for (let i = 0; i < items.length; i += PARALLEL_READS)
    results.push(...(await Promise.all(items.slice(i, i + PARALLEL_READS).map(run))))
  return results
}
