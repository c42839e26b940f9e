/**
 * One lock as its store holds it, read in the store's own format (the format Java ShedLock
 * shares). A field the store does not keep is `undefined`: NATS and ZooKeeper keep only
 * `lockUntil`; memcached hides expiries.
 */
export interface LockRecord {
  readonly name: string
  /** When the lock expires, or expired; the store frees it then unless its holder extends it. */
  readonly lockUntil: Date | undefined
  /** When its holder took it, on the clock that decides expiry. */
  readonly lockedAt: Date | undefined
  /** Who holds or last held it: `<host>:<pid>:<random>` for shedlock, the host name for Java ShedLock. */
  readonly lockedBy: string | undefined
  /**
   * True while `lockUntil` is ahead of the store's now at the read. A record whose `lockUntil` is
   * unknown reads as the provider treats it: held on MongoDB, ZooKeeper and NATS (a record written
   * by another tool, which those providers never take over) and on stores that expire keys
   * themselves; free on DynamoDB (an item without `lockUntil` is taken over). A lock released
   * within its `lockAtLeastFor` still shows as held: the storage format does not record that its
   * task ended.
   */
  readonly held: boolean
  /** Milliseconds from the read until `lockUntil`, 0 once passed, `undefined` when `lockUntil` is unknown. */
  readonly remainingMs: number | undefined
}

/** Options of {@link LockInspector.list} and {@link LockInspector.removeExpired}. */
export interface LockSelection {
  /** Only records whose name starts with this (the slot records of one task: `"<name>@"`). @default every record */
  prefix?: string
}

/** Every lock record of a store, read at one instant. */
export interface LockList {
  /** The store's now at the read, on the clock {@link LockInspector.clock} names. */
  readonly now: Date
  readonly locks: readonly LockRecord[]
}

/**
 * Reads and force-releases the locks of one store, in the provider's storage format: for
 * dashboards, health endpoints and operators (the `shedlock list` and `unlock` commands use it).
 * Each store's subpath exports a factory, e.g. `postgresLockInspector({ client })`, taking the
 * same client and table (or key) options as its provider.
 */
export interface LockInspector {
  /** Short store name, e.g. `"postgres"`, as the provider's `name`. */
  readonly name: string
  /** Whose clock `now` and `held` are read on, e.g. "the PostgreSQL server's clock". */
  readonly clock: string
  /** Every lock record (or those `selection` names), sorted by name. @throws LockProviderError when the store fails or cannot enumerate its locks (memcached). */
  list(selection?: LockSelection): Promise<LockList>
  /** The record of lock `name`, or `undefined` when there is none. */
  get(name: string): Promise<LockRecord | undefined>
  /**
   * Force-releases a lock, for a holder that died or hangs: the lock is free at once, and its
   * holder can no longer release, extend or re-hold it: when the holder's task ends within its
   * `lockAtLeastFor`, its own owner-checked release finds another owner and changes nothing (the
   * operator wins). Given a record read by this inspector, releases only the acquisition it was
   * read from, however often its holder extended it since (a lease renews its lock every few
   * seconds): the holder and the time it took the lock, or the store's value for one
   * acquisition, must still be the same. If the lock was released and taken again since, by
   * another node or by the same one, nothing changes. NATS and ZooKeeper keep nothing but the
   * expiry, which cannot tell an extension from a new acquisition: there any write since the
   * read, an extension included, makes the record release nothing; read the lock again.
   *
   * Resolves to `true` when it released a held lock, `false` when the lock was not held, is
   * gone, or was taken again since `lock` was read. Another node may start the task at once:
   * release only locks whose holder is dead or stuck.
   */
  release(lock: string | LockRecord): Promise<boolean>
  /**
   * Deletes the records that are not held (expired or released), of every lock or those
   * `selection` names; resolves to how many. Stores that expire records by themselves (Redis, etcd,
   * memcached) have none to delete; ZooKeeper deletes only slot records (`<name>@<slot>`), as a
   * node deleted and created again could be written by a stale holder. The executor uses it to
   * keep slot records from piling up; use it for lock names that come and go. A deleted record is
   * recreated by the next lock.
   */
  removeExpired(selection?: LockSelection): Promise<number>
}
