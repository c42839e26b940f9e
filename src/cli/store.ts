import type { LockProvider } from '../core/lock-provider.ts'
import { ShedLockError } from '../core/errors.ts'
import { CliError, UsageError } from './command.ts'
import type { StoreUrl } from './store-url.ts'

/**
 * One lock as the store holds it, read in the provider's own storage format. Times are epoch
 * milliseconds; a field the store does not keep is `undefined` (ZooKeeper and NATS store only
 * `lockUntil`; memcached hides expiries).
 */
export interface LockRecord {
  readonly name: string
  readonly lockUntil: number | undefined
  readonly lockedAt: number | undefined
  readonly lockedBy: string | undefined
  /** What {@link Store.release} compares, so that it releases this state of the lock and no later one. */
  readonly token: unknown
}

/** Locks read at one instant, with that instant on the clock named by `clock`. */
export interface LockSnapshot<T> {
  /** Epoch milliseconds. `state` and remaining times are computed against it. */
  readonly now: number
  /** Whose clock `now` is, e.g. "the PostgreSQL server's clock". */
  readonly clock: string
  readonly value: T
}

/** A clock reading taken between `before` and `after` (this host's epoch ms). */
export interface ClockReading {
  /** The store's time, epoch milliseconds (the start of its tick when `resolutionMs` > 1). */
  readonly storeMs: number
  readonly before: number
  readonly after: number
  /** The store clock's tick: 1 for milliseconds, 1000 for whole seconds. */
  readonly resolutionMs: number
  /** Where the reading comes from, e.g. "SELECT clock_timestamp()". */
  readonly source: string
}

/** One line of `shedlock doctor`. */
export interface Check {
  readonly status: 'ok' | 'warn' | 'fail' | 'skip'
  readonly label: string
  readonly detail: string
}

/** A store the CLI has connected to. Every method reads or writes the provider's own format. */
export interface Store {
  /** The store's name for people, e.g. "PostgreSQL". */
  readonly kind: string
  /** The redacted URL and, where relevant, the table: what output names the store by. */
  readonly where: string
  /** A provider over the CLI's connection, with the CLI's options (table, environment...). */
  provider(): LockProvider
  /** True when the provider's locks can be extended, which `run --keep-alive` needs. */
  readonly extensible: boolean
  /** Every lock record. @throws CliError when the store cannot enumerate its locks (memcached). */
  list(): Promise<LockSnapshot<LockRecord[]>>
  /** One lock record, `undefined` when there is none. */
  find(name: string): Promise<LockSnapshot<LockRecord | undefined>>
  /**
   * Force-releases `record`, only if the store still holds that very state of it: SQL and
   * document stores set its `lockUntil` to now and keep it, key-value stores delete the key.
   * Resolves to `false` (and changes nothing) when the lock changed since it was read.
   */
  release(record: LockRecord): Promise<boolean>
  /** Creates what the provider needs (table, bucket, root node) if missing; resolves to what was done, one line each. */
  init(): Promise<string[]>
  /** A round trip; resolves to a description of the server (its version, when it says). */
  ping(): Promise<string>
  /** Checks of the table, bucket or collection layout. Empty where the store has none. */
  structure(): Promise<Check[]>
  /** Deletes the record of `name` outright (doctor's own test lock). */
  remove(name: string): Promise<void>
  /** A reading of the store's clock, or why there is none. */
  readClock(): Promise<ClockReading | string>
  /** How this store's locks depend on the clocks of the hosts, for doctor's clock line. */
  readonly clockDependence: string
  close(): Promise<void>
}

/** CLI options that pick where in the store locks live. */
export interface StoreOptions {
  /** `--table`: SQL table, MongoDB collection or DynamoDB table. */
  readonly table?: string | undefined
  /** `init` only: create what connecting needs (a SQLite file). Other commands refuse a missing one. */
  readonly create?: boolean
}

/**
 * Connects to the store named by `url`, importing only that store's module and driver.
 * @throws UsageError for options the store does not take; CliError when it cannot connect.
 */
export async function openStore(url: StoreUrl, options: StoreOptions = {}): Promise<Store> {
  // Literal specifiers, one per scheme: only the store asked for is loaded, and with it only its driver.
  switch (url.scheme) {
    case 'postgres':
      return (await import('./stores/postgres.ts')).openPostgresStore(url, options)
    case 'mysql':
      return (await import('./stores/mysql.ts')).openMysqlStore(url, options)
    case 'sqlite':
      return (await import('./stores/sqlite.ts')).openSqliteStore(url, options)
    case 'redis':
      return (await import('./stores/redis.ts')).openRedisStore(url, noTable(url, options))
    case 'mongodb':
      return (await import('./stores/mongodb.ts')).openMongoStore(url, options)
    case 'dynamodb':
      return (await import('./stores/dynamodb.ts')).openDynamoDBStore(url, options)
    case 'etcd':
      return (await import('./stores/etcd.ts')).openEtcdStore(url, noTable(url, options))
    case 'zookeeper':
      return (await import('./stores/zookeeper.ts')).openZooKeeperStore(url, noTable(url, options))
    case 'nats':
      return (await import('./stores/nats.ts')).openNatsStore(url, noTable(url, options))
    case 'memcached':
      return (await import('./stores/memcached.ts')).openMemcachedStore(url, noTable(url, options))
  }
}

const INSTEAD_OF_TABLE: Partial<Record<StoreUrl['scheme'], string>> = {
  nats: 'name the bucket with ?bucket= in the URL',
  zookeeper: 'name the parent node with ?path= in the URL',
}

function noTable(url: StoreUrl, options: StoreOptions): StoreOptions {
  if (options.table !== undefined) {
    throw new UsageError(`--table does not apply to ${url.scheme} URLs, which keep no table; ${INSTEAD_OF_TABLE[url.scheme] ?? 'separate fleets with ?environment= in the URL'}`)
  }
  return options
}

/**
 * Runs `fn` with a store and closes it afterwards, whatever happens. A driver error from `fn`
 * becomes a CliError that names the store.
 */
export async function withStore<T>(url: StoreUrl, options: StoreOptions, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(url, options)
  try {
    return await fn(store)
  } catch (error) {
    if (error instanceof CliError || error instanceof UsageError || error instanceof ShedLockError) throw error
    throw new CliError(`${store.kind} ${store.where} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  } finally {
    await store.close().catch(() => {})
  }
}

/** `held` while `lockUntil` is ahead of `now` (or unknown: the record exists, and the store expires it), `free` after. */
export function stateOf(record: LockRecord, now: number): 'held' | 'free' {
  return record.lockUntil === undefined || record.lockUntil > now ? 'held' : 'free'
}

/** Reads `fn`'s clock between two readings of this host's clock. */
export async function timed(source: string, resolutionMs: number, fn: () => Promise<number>): Promise<ClockReading> {
  const before = Date.now()
  const storeMs = await fn()
  const after = Date.now()
  return { storeMs, before, after, resolutionMs, source }
}
