import type { StoreAdminModule } from '../support/store-admin.ts'

/** One store the command line can open, and what it needs to know about it before loading it. */
export interface StoreEntry {
  /** The store's id, its folder under `providers/` and its name in `shedlock schema ID`. */
  readonly id: string
  /** For people, e.g. "PostgreSQL". */
  readonly title: string
  /** URL schemes, with their colon, e.g. `postgres:`; the first is the one help shows. */
  readonly schemes: readonly string[]
  /** Other names `shedlock schema NAME` accepts, e.g. `mariadb` for MySQL. */
  readonly aliases?: readonly string[]
  /** The accepted URL form, for help texts. */
  readonly urlForm: string
  /** What `--table` names in this store and its default; absent: the store has no table (keys, nodes). */
  readonly table?: { readonly what: string; readonly default: string }
  /** Where the URL names what `--table` would, for stores without a table. */
  readonly insteadOfTable?: string
  /**
   * How the URL is read: `url`, by the WHATWG URL parser; `opaque`, a path after the scheme
   * (`sqlite:./locks.db`); `lenient`, the store's own driver reads it (MongoDB's several hosts and
   * `mongodb+srv:`), so only the password is looked for.
   */
  readonly urlKind: 'url' | 'opaque' | 'lenient'
  /** What `shedlock schema ID` prints, for its help text. */
  readonly schemaPrints: string
  /** The driver packages the store's URLs need, as `npm install` takes them: any one of them, unless `driversTogether`. */
  readonly drivers: readonly string[]
  /** True when the store needs every package of `drivers`, not one of them. */
  readonly driversTogether?: boolean
  /** Whether its locks can be extended (`run --keep-alive` needs it). */
  readonly extensible: boolean
  /** Whether it keeps a run history (its `run-ledger.ts`), which `history`, `status` and the dashboard read. */
  readonly runHistory: boolean
  /** Loads the store's `admin.ts` (and, when opened, its driver): only the store a URL names. */
  load(): Promise<StoreAdminModule>
}

// Literal import specifiers, one per store, so that bundlers and `tsc` see them and only the
// store asked for is loaded. Adding a store: its folder, one entry here, and what
// test/structure/stores.test.ts asks for (CONTRIBUTING.md, "Adding a store").
/** Every store, in the order help texts list them. */
export const STORES: readonly StoreEntry[] = [
  {
    id: 'postgres',
    title: 'PostgreSQL',
    schemes: ['postgres:', 'postgresql:'],
    aliases: ['postgresql'],
    urlForm: 'postgres://USER[:PASSWORD]@HOST[:PORT]/DB',
    table: { what: 'SQL table', default: 'shedlock' },
    urlKind: 'url',
    schemaPrints: 'the CREATE TABLE statement',
    drivers: ['pg'],
    extensible: true,
    runHistory: true,
    load: () => import('./postgres/admin.ts'),
  },
  {
    id: 'mysql',
    title: 'MySQL/MariaDB',
    schemes: ['mysql:', 'mariadb:'],
    aliases: ['mariadb'],
    urlForm: 'mysql://USER[:PASSWORD]@HOST[:PORT]/DB',
    table: { what: 'SQL table', default: 'shedlock' },
    urlKind: 'url',
    schemaPrints: 'the CREATE TABLE statement',
    drivers: ['mysql2'],
    extensible: true,
    runHistory: true,
    load: () => import('./mysql/admin.ts'),
  },
  {
    id: 'spanner',
    title: 'Cloud Spanner',
    schemes: ['spanner:'],
    urlForm: 'spanner://PROJECT/INSTANCE/DATABASE',
    table: { what: 'Spanner table', default: 'shedlock' },
    urlKind: 'url',
    schemaPrints: 'the CREATE TABLE statements (GoogleSQL)',
    drivers: ['@google-cloud/spanner'],
    extensible: true,
    runHistory: true,
    load: () => import('./spanner/admin.ts'),
  },
  {
    id: 'sqlite',
    title: 'SQLite',
    schemes: ['sqlite:'],
    urlForm: 'sqlite:PATH',
    table: { what: 'SQL table', default: 'shedlock' },
    urlKind: 'opaque',
    schemaPrints: 'the CREATE TABLE statement',
    drivers: ['node:sqlite (Node 22.13+)', 'better-sqlite3', 'libsql'],
    extensible: true,
    runHistory: true,
    load: () => import('./sqlite/admin.ts'),
  },
  {
    id: 'redis',
    title: 'Redis',
    schemes: ['redis:', 'rediss:'],
    urlForm: 'redis://[USER:PASSWORD@]HOST[:PORT][/DB][?environment=E&keyPrefix=P]',
    insteadOfTable: 'separate fleets with ?environment= in the URL',
    urlKind: 'url',
    schemaPrints: 'the key format (nothing to create)',
    drivers: ['ioredis', 'redis'],
    extensible: true,
    runHistory: true,
    load: () => import('./redis/admin.ts'),
  },
  {
    id: 'mongodb',
    title: 'MongoDB',
    schemes: ['mongodb:', 'mongodb+srv:'],
    urlForm: 'mongodb://[USER:PASSWORD@]HOST[:PORT]/DB',
    table: { what: 'MongoDB collection', default: 'shedLock' },
    urlKind: 'lenient',
    schemaPrints: 'a mongosh command creating it',
    drivers: ['mongodb'],
    extensible: true,
    runHistory: false,
    load: () => import('./mongodb/admin.ts'),
  },
  {
    id: 'dynamodb',
    title: 'DynamoDB',
    schemes: ['dynamodb:'],
    urlForm: 'dynamodb://[HOST:PORT][?region=R&table=T]',
    table: { what: 'DynamoDB table', default: 'Shedlock' },
    urlKind: 'url',
    schemaPrints: 'an AWS CLI command creating the table',
    drivers: ['@aws-sdk/client-dynamodb'],
    extensible: true,
    runHistory: false,
    load: () => import('./dynamodb/admin.ts'),
  },
  {
    id: 'firestore',
    title: 'Firestore',
    schemes: ['firestore:'],
    urlForm: 'firestore://PROJECT[/DATABASE]',
    table: { what: 'Firestore collection', default: 'shedlock' },
    urlKind: 'url',
    schemaPrints: 'the document format (nothing to create)',
    drivers: ['@google-cloud/firestore'],
    extensible: true,
    runHistory: true,
    load: () => import('./firestore/admin.ts'),
  },
  {
    id: 's3',
    title: 'S3',
    schemes: ['s3:'],
    urlForm: 's3://BUCKET[/PREFIX][?endpoint=http://HOST:PORT&region=R]',
    insteadOfTable: 'name the bucket and the key prefix in the URL',
    urlKind: 'url',
    schemaPrints: 'an AWS CLI command creating the bucket',
    drivers: ['@aws-sdk/client-s3'],
    extensible: true,
    runHistory: false,
    load: () => import('./s3/admin.ts'),
  },
  {
    id: 'etcd',
    title: 'etcd',
    schemes: ['etcd:'],
    urlForm: 'etcd://HOST:PORT[?environment=E]',
    insteadOfTable: 'separate fleets with ?environment= in the URL',
    urlKind: 'url',
    schemaPrints: 'the key format (nothing to create)',
    drivers: ['etcd3'],
    extensible: true,
    runHistory: false,
    load: () => import('./etcd/admin.ts'),
  },
  {
    id: 'zookeeper',
    title: 'ZooKeeper',
    schemes: ['zookeeper:'],
    urlForm: 'zookeeper://HOST:PORT[/CHROOT][?path=/shedlock]',
    insteadOfTable: 'name the parent node with ?path= in the URL',
    urlKind: 'url',
    schemaPrints: 'the key format (nothing to create)',
    drivers: ['node-zookeeper-client'],
    extensible: true,
    runHistory: false,
    load: () => import('./zookeeper/admin.ts'),
  },
  {
    id: 'nats',
    title: 'NATS JetStream',
    schemes: ['nats:'],
    urlForm: 'nats://HOST:PORT[?bucket=shedlock-locks]',
    insteadOfTable: 'name the bucket with ?bucket= in the URL',
    urlKind: 'url',
    schemaPrints: 'a nats CLI command creating the bucket',
    drivers: ['@nats-io/transport-node', '@nats-io/kv'],
    driversTogether: true,
    extensible: true,
    runHistory: false,
    load: () => import('./nats/admin.ts'),
  },
  {
    id: 'memcached',
    title: 'memcached',
    schemes: ['memcached:'],
    urlForm: 'memcached://HOST:PORT[?environment=E]',
    insteadOfTable: 'separate fleets with ?environment= in the URL',
    urlKind: 'url',
    schemaPrints: 'the key format (nothing to create)',
    drivers: ['memjs'],
    extensible: false,
    runHistory: false,
    load: () => import('./memcached/admin.ts'),
  },
  {
    id: 'datastore',
    title: 'Datastore',
    schemes: ['datastore:'],
    urlForm: 'datastore://PROJECT[/NAMESPACE][?database=D]',
    table: { what: 'Datastore kind', default: 'lock' },
    urlKind: 'url',
    schemaPrints: 'the entity format (nothing to create)',
    drivers: ['@google-cloud/datastore'],
    extensible: true,
    runHistory: true,
    load: () => import('./datastore/admin.ts'),
  },
]

/** The store whose URL scheme (with its colon, lower case) is `scheme`, if any. */
export function storeOfScheme(scheme: string): StoreEntry | undefined {
  return STORES.find((store) => store.schemes.includes(scheme))
}

/** The store named `name` (an id or an alias, any case), if any. */
export function storeNamed(name: string): StoreEntry | undefined {
  const wanted = name.toLowerCase()
  return STORES.find((store) => store.id === wanted || store.aliases?.includes(wanted))
}

/** Every driver package of every store, in registry order, each once: for help texts. */
export function driverPackages(): string[] {
  return [...new Set(STORES.flatMap((store) => store.drivers))]
}

/** The stores that keep a run history, for people: "PostgreSQL, MySQL/MariaDB, …". */
export function storesWithRunHistory(): string {
  return STORES.filter((store) => store.runHistory)
    .map((store) => store.title)
    .join(', ')
}
