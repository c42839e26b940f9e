import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { byName, releaseAsRead } from '../../support/inspection.ts'
import { RELEASED_BY } from '../../support/sql/sql-inspector.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkOptions,
  type DenoKvLockDatabase,
  type DenoKvLockEntry,
  type DenoKvLockKey,
  describeDenoKvError,
  lockKey,
  lockValue,
  PROVIDER,
  retryBusy,
} from './format.ts'

/** Options of {@link denoKvLockInspector}: the provider's `Deno.Kv`, key prefix and clock. */
export interface DenoKvLockInspectorOptions {
  /** Your `Deno.Kv` (the provider's). */
  kv: DenoKvLockDatabase
  /** The provider's key prefix. @default "shedlock" */
  keyPrefix?: string
  /** The clock the providers decide expiry on: `now`, `held` and `remainingMs` are read on it. @default systemClock */
  clock?: Clock
}

/** What an entry was read as: release(record) and removeExpired() change it only if it still holds that. */
interface ReadAs {
  readonly key: DenoKvLockKey
  readonly versionstamp: string
  readonly value: unknown
}

/**
 * Whether `now` holds the acquisition `asRead` held: the same holder, taken at the same time (an
 * extension rewrites only `lockUntil`, with a new versionstamp).
 */
function sameAcquisition(asRead: ReadAs, now: ReadAs): boolean {
  const [before, after] = [lockValue(asRead.value), lockValue(now.value)]
  return (
    typeof before?.lockedBy === 'string' &&
    before.lockedAt instanceof Date &&
    after?.lockedBy === before.lockedBy &&
    after.lockedAt instanceof Date &&
    after.lockedAt.getTime() === before.lockedAt.getTime()
  )
}

/**
 * Reads and force-releases the locks of Deno KV, in the provider's format: for dashboards, health
 * endpoints and operators. `list()` reads every entry under `[keyPrefix]`; a force-release
 * writes `lockUntil` now and `lockedBy` `"released"` in an atomic operation that checks the
 * versionstamp read, so it never changes a lock taken since. Given a record whose holder extended
 * it since (a new versionstamp), it reads the entry again and writes at the new versionstamp if
 * `lockedBy` and `lockedAt` are still those read. An entry that is not a lock value
 * reads as held with an unknown `lockUntil`, as the provider never takes it over.
 *
 * ```ts
 * import { denoKvLockInspector, type DenoKvLockDatabase } from 'shedlock/deno-kv'
 * declare const kv: DenoKvLockDatabase
 * const inspector = denoKvLockInspector({ kv })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError when `kv` is not a `Deno.Kv`, or for an empty `keyPrefix`.
 */
export function denoKvLockInspector(options: DenoKvLockInspectorOptions): LockInspector {
  const { kv } = options ?? {}
  const prefix = checkOptions(kv, options?.keyPrefix)
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('deno-kv: clock must have a now() method returning epoch milliseconds')
  const guard = storeGuard(describeDenoKvError)
  const readAs = new WeakMap<LockRecord, ReadAs>()

  const toRecord = (entry: DenoKvLockEntry, now: number): LockRecord | undefined => {
    const name = entry.key[1]
    if (entry.versionstamp === null || entry.key.length !== 2 || typeof name !== 'string') return undefined
    const value = lockValue(entry.value)
    const until = value?.lockUntil.getTime()
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: value?.lockedAt instanceof Date ? new Date(value.lockedAt.getTime()) : undefined,
      lockedBy: typeof value?.lockedBy === 'string' ? value.lockedBy : undefined,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, { key: [prefix, name], versionstamp: entry.versionstamp, value: entry.value })
    return record
  }

  const read = async (selection: LockSelection | undefined): Promise<LockList> => {
    const entries: DenoKvLockEntry[] = []
    for await (const entry of kv.list({ prefix: [prefix] })) entries.push(entry)
    const now = clock.now()
    const wanted = selection?.prefix ?? ''
    const locks = entries
      .flatMap((entry) => toRecord(entry, now) ?? [])
      .filter((record) => record.name.startsWith(wanted))
    return { now: new Date(now), locks: locks.sort(byName) }
  }

  return {
    name: PROVIDER,
    clock: "this host's clock (Deno KV locks expire on each node's clock)",
    list: (selection) => guard('list', '', () => read(selection)),
    get: async (name) => {
      const key = lockKey(prefix, name)
      return guard('inspect', name, async () => toRecord(await kv.get(key), clock.now()))
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      const key = lockKey(prefix, name)
      const remove = async ({ versionstamp, value }: ReadAs): Promise<boolean> => {
        // Keeps lockedAt, as the SQL stores' force-release does.
        const released = { ...(value as object), lockUntil: new Date(clock.now()), lockedBy: RELEASED_BY }
        return (await kv.atomic().check({ key, versionstamp }).set(key, released).commit()).ok
      }
      const readNow = async (): Promise<LockRecord | undefined> => toRecord(await kv.get(key), clock.now())
      return guard('release', name, () =>
        retryBusy(() => releaseAsRead(lock, readAs, readNow, remove, sameAcquisition)),
      )
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        let removed = 0
        for (const record of (await read(selection)).locks) {
          const as = readAs.get(record)
          if (record.held || !as) continue
          // Only the entry as read: one taken since has another versionstamp.
          if (
            (
              await retryBusy(() =>
                kv.atomic().check({ key: as.key, versionstamp: as.versionstamp }).delete(as.key).commit(),
              )
            ).ok
          )
            removed++
        }
        return removed
      }),
  }
}
