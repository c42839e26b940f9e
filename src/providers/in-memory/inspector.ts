import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord } from '../../core/lock-inspector.ts'
import { type InMemoryEntry, type InMemoryLockProvider, inMemoryStoreOf } from './store.ts'

/**
 * Reads and force-releases the locks of one {@link InMemoryLockProvider}: for tests, and for the
 * health endpoint of a single process. `now` and `held` are read on the provider's clock (its
 * `clock` option; this process's clock by default). Records have no `lockedBy`: the provider
 * keeps no holder name.
 *
 * A force-release sets the lock's expiry to now and takes it from its holder (the entry stays, so
 * `provider.inspect(name)` still finds it), so that the holder can no longer release, extend or
 * re-hold it; given a record, only while the lock is still held by the acquisition read, extended
 * or not. Everything runs synchronously: no other call can come between a read and a release.
 *
 * ```ts
 * import { inMemoryLockInspector, inMemoryLockProvider } from 'shedlock'
 * const provider = inMemoryLockProvider()
 * const inspector = inMemoryLockInspector(provider)
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError when `provider` was not made by `inMemoryLockProvider()`.
 */
export function inMemoryLockInspector(provider: InMemoryLockProvider): LockInspector {
  const store = provider ? inMemoryStoreOf(provider) : undefined
  if (!store) {
    throw new LockConfigurationError(
      'in-memory: pass the provider made by inMemoryLockProvider() whose locks to inspect, e.g. inMemoryLockInspector(provider)',
    )
  }
  const { entries, clock } = store
  // The acquisition a record was read from: release(record) changes the entry only while it is that one's.
  const readAs = new WeakMap<LockRecord, symbol>()
  const toRecord = (name: string, entry: InMemoryEntry, now: number): LockRecord => {
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: new Date(entry.lockUntil),
      lockedAt: new Date(entry.lockedAt),
      lockedBy: undefined,
      held: entry.lockUntil > now,
      remainingMs: Math.max(0, entry.lockUntil - now),
    })
    readAs.set(record, entry.owner)
    return record
  }

  return {
    name: 'in-memory',
    clock: "the provider's clock (this process's by default)",
    async list(selection): Promise<LockList> {
      const now = clock.now()
      const prefix = selection?.prefix ?? ''
      const locks = [...entries]
        .filter(([name]) => name.startsWith(prefix))
        .map(([name, entry]) => toRecord(name, entry, now))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      return { now: new Date(now), locks }
    },
    async get(name) {
      const entry = entries.get(name)
      return entry && toRecord(name, entry, clock.now())
    },
    async release(lock) {
      const name = typeof lock === 'string' ? lock : lock.name
      const entry = entries.get(name)
      const now = clock.now()
      if (!entry || entry.lockUntil <= now) return false
      // Given a record, only the acquisition it was read from, however often its holder extended it.
      const seen = typeof lock === 'string' ? undefined : readAs.get(lock)
      if (seen && seen !== entry.owner) return false
      entry.lockUntil = now
      // Another owner than any acquisition's: the holder's unlock and extend find the entry no longer theirs.
      entry.owner = Symbol('released')
      return true
    },
    async removeExpired(selection) {
      const now = clock.now()
      const prefix = selection?.prefix ?? ''
      let removed = 0
      for (const [name, entry] of entries) {
        if (name.startsWith(prefix) && entry.lockUntil <= now) {
          entries.delete(name)
          removed++
        }
      }
      return removed
    },
  }
}
