import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
} from '@aws-sdk/client-s3'
import { DeleteTableCommand, DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb'
import { jetstream } from '@nats-io/jetstream'
import { type KV, Kvm } from '@nats-io/kv'
import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node'
import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import memjs from 'memjs'
import mysql from 'mysql2/promise'
import zookeeper from 'node-zookeeper-client'
import pg from 'pg'
import type { Clock, LockProvider } from 'shedlock'
import { createDynamoDBLockTable } from 'shedlock/dynamodb'
import { mongoLockProvider } from 'shedlock/mongodb'
import { mysqlSchema } from 'shedlock/mysql'
import { natsLockKey } from 'shedlock/nats'
import { postgresSchema } from 'shedlock/postgres'
import { memcachedLockKey } from 'shedlock/memcached'
import { sqliteSchema } from 'shedlock/sqlite'
import { zookeeperNodeName } from 'shedlock/zookeeper'
import { FakeMongoCollection } from '../../helpers/fake-mongo-collection.ts'
import { azuriteService, s3Client } from '../../helpers/object-stores.ts'
import * as servers from './servers.ts'
import type { OwnServer } from './servers.ts'
import {
  type NodeOptions,
  openNode,
  openSqlite,
  replacingZooKeeperClient,
  type SqliteConnection,
  type StoreName,
  type StoreSpec,
} from './store-clients.mjs'

/** What the fault groups need to know about a store to tell a fault from its documented behaviour. */
export interface StoreFacts {
  /** `lock()` returns extensible locks (keep-alive applies). */
  extensible: boolean
  /**
   * Whose clock decides expiry: the database's (SQL with `useDbTime`), the store server's
   * (relative TTLs: Redis, etcd, memcached) or each node's own (`app`).
   */
  expiry: 'database' | 'server' | 'app'
  /** How long before `lockAtMostUntil` the store may already free a lock (memcached's whole-second clock). */
  earlyMs: number
  /** How long after `lockAtMostUntil` the store may still hold it (TTLs rounded up to seconds, expiry passes). */
  lateMs: number
  /** The shortest lock the store grants, in ms (etcd raises lease TTLs below its minimum). */
  minLockMs: number
  /** Whether a lock held when the server crashed is still held after its restart, as measured. */
  keepsLocksAcrossRestart: boolean | undefined
}

/** One store as the fault groups use it: its own server, its nodes, and a reader behind the providers' backs. */
export interface StoreUnderTest {
  /** Label, e.g. `postgres` or `redis (appendfsync always)`. */
  readonly label: string
  readonly store: StoreName | 'mongodb'
  readonly facts: StoreFacts
  /** Our own server; `undefined` for SQLite (a file) and the MongoDB fake. */
  readonly server: OwnServer | undefined
  /** How a worker process reaches the store; `port` redirects it (to a proxy). */
  spec(overrides?: Partial<StoreSpec>): StoreSpec
  /** A node in this process: a provider over a client of its own, closed by `close()`. */
  node(options?: NodeOptions & { spec?: Partial<StoreSpec> }): Promise<LockProvider>
  /** True when the store holds a live lock record for `name` (read directly, not through a provider). */
  isHeld(name: string): Promise<boolean>
  /** The raw record of `name` (row, value, node data and version...), to compare before and after; `undefined` if none. */
  record(name: string): Promise<string | undefined>
  /** Milliseconds until the record of `name` expires by the store's reckoning, if the store can tell. */
  remainingMs(name: string): Promise<number | undefined>
  /** Every record key in this test's namespace, or `undefined` where the store cannot list them (memcached, the fake). */
  keys(): Promise<string[] | undefined>
  /** The key of `name` in `keys()`'s terms. */
  keyOf(name: string): string
  /** `--url URL [--table T]`: how the CLI reaches the store's locks (and, with `--runs-table`, its run history). */
  cliArgs(): string[]
  /** Closes the nodes, drops what the test created, stops the server. */
  close(): Promise<void>
}

const suffix = (): string => randomBytes(4).toString('hex')

interface Parts {
  label?: string
  store: StoreName | 'mongodb'
  facts: StoreFacts
  server: OwnServer | undefined
  spec: StoreSpec | undefined
  isHeld(name: string): Promise<boolean>
  record(name: string): Promise<string | undefined>
  remainingMs?(name: string): Promise<number | undefined>
  keys?(): Promise<string[] | undefined>
  keyOf?(name: string): string
  cliArgs?: string[]
  /** For stores without a worker spec (the MongoDB fake). */
  provider?(clock: Clock | undefined): LockProvider
  dispose(): Promise<void>
}

function assemble(parts: Parts): StoreUnderTest {
  const nodes: (() => Promise<void>)[] = []
  return {
    label: parts.label ?? parts.store,
    store: parts.store,
    facts: parts.facts,
    server: parts.server,
    spec: (overrides = {}) => {
      if (!parts.spec) throw new Error(`${parts.store} has no worker spec`)
      return { ...parts.spec, ...overrides }
    },
    async node(options = {}) {
      if (parts.provider) return parts.provider(options.clock)
      const node = await openNode({ ...parts.spec!, ...options.spec }, options)
      nodes.push(node.close)
      return node.provider
    },
    isHeld: parts.isHeld,
    record: parts.record,
    remainingMs: parts.remainingMs ?? (async () => undefined),
    keys: parts.keys ?? (async () => undefined),
    keyOf: parts.keyOf ?? ((name) => name),
    cliArgs: () => {
      if (!parts.cliArgs) throw new Error(`the fault suite has no CLI URL for ${parts.store}`)
      return [...parts.cliArgs]
    },
    async close() {
      await Promise.all(nodes.splice(0).map((close) => close().catch(() => {})))
      await parts.dispose().catch(() => {})
      await parts.server?.destroy()
    },
  }
}

const SQL_FACTS: StoreFacts = {
  extensible: true,
  expiry: 'database',
  earlyMs: 0,
  lateMs: 0,
  minLockMs: 0,
  keepsLocksAcrossRestart: true,
}

/** PostgreSQL on a cluster of our own; `useDbTime: false` gives the app-time variant. */
export async function postgresUnderTest(
  options: { useDbTime?: boolean; server?: OwnServer } = {},
): Promise<StoreUnderTest> {
  const server = options.server ?? (await servers.startPostgres())
  const pool = new pg.Pool({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres', max: 3 })
  pool.on('error', () => {})
  const table = `faults_${suffix()}`
  const query = async (text: string, values: unknown[] = []) =>
    (await pool.query(text, values)).rows as Record<string, unknown>[]
  await query(postgresSchema({ tableName: table }))
  const useDbTime = options.useDbTime ?? true
  return assemble({
    label: useDbTime ? 'postgres' : 'postgres (app time)',
    store: 'postgres',
    facts: { ...SQL_FACTS, expiry: useDbTime ? 'database' : 'app' },
    server: options.server ? undefined : server,
    spec: { store: 'postgres', port: server.port, table, useDbTime },
    cliArgs: ['--url', `postgres://postgres@127.0.0.1:${server.port}/postgres`, '--table', table],
    isHeld: async (name) =>
      (
        await query(`SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > timezone('utc', statement_timestamp())`, [
          name,
        ])
      ).length === 1,
    record: async (name) => {
      const rows = await query(
        `SELECT name, lock_until::text AS u, locked_at::text AS a, locked_by AS b FROM ${table} WHERE name = $1`,
        [name],
      )
      return rows[0] ? JSON.stringify(rows[0]) : undefined
    },
    remainingMs: async (name) => {
      const rows = await query(
        `SELECT extract(epoch FROM lock_until - timezone('utc', statement_timestamp())) * 1000 AS ms FROM ${table} WHERE name = $1`,
        [name],
      )
      return rows[0] ? Number(rows[0].ms) : undefined
    },
    keys: async () => (await query(`SELECT name FROM ${table}`)).map((r) => String(r.name)),
    dispose: async () => {
      await query(`DROP TABLE IF EXISTS ${table}`).catch(() => {})
      await pool.end()
    },
  })
}

/** MariaDB on a server of our own. */
export async function mysqlUnderTest(
  options: { useDbTime?: boolean; server?: OwnServer } = {},
): Promise<StoreUnderTest> {
  const server = options.server ?? (await servers.startMariaDb())
  const pool = mysql.createPool({
    host: '127.0.0.1',
    port: server.port,
    user: 'root',
    database: 'test',
    connectionLimit: 3,
  })
  const table = `faults_${suffix()}`
  const query = async (sql: string, values: unknown[] = []) =>
    (await pool.query(sql, values))[0] as Record<string, unknown>[]
  await query(mysqlSchema({ tableName: table }))
  const useDbTime = options.useDbTime ?? true
  return assemble({
    label: useDbTime ? 'mysql' : 'mysql (app time)',
    store: 'mysql',
    facts: { ...SQL_FACTS, expiry: useDbTime ? 'database' : 'app' },
    server: options.server ? undefined : server,
    spec: { store: 'mysql', port: server.port, table, useDbTime },
    cliArgs: ['--url', `mysql://root@127.0.0.1:${server.port}/test`, '--table', table],
    isHeld: async (name) =>
      (await query(`SELECT 1 FROM ${table} WHERE name = ? AND lock_until > UTC_TIMESTAMP(3)`, [name])).length === 1,
    record: async (name) => {
      const rows = await query(
        `SELECT name, CAST(lock_until AS CHAR) AS u, CAST(locked_at AS CHAR) AS a, locked_by AS b FROM ${table} WHERE name = ?`,
        [name],
      )
      return rows[0] ? JSON.stringify(rows[0]) : undefined
    },
    remainingMs: async (name) => {
      const rows = await query(
        `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), lock_until) / 1000 AS ms FROM ${table} WHERE name = ?`,
        [name],
      )
      return rows[0] ? Number(rows[0].ms) : undefined
    },
    keys: async () => (await query(`SELECT name FROM ${table}`)).map((r) => String(r.name)),
    dispose: async () => {
      await query(`DROP TABLE IF EXISTS ${table}`).catch(() => {})
      await pool.end()
    },
  })
}

// Decodes lock names as they were written: TextDecoder drops a leading U+FEFF by default.
const bomKeeping = new TextDecoder('utf-8', { ignoreBOM: true })

/** SQLite in a file of a temporary folder: no server; several processes share the file. */
export async function sqliteUnderTest(
  options: { useDbTime?: boolean } = {},
): Promise<StoreUnderTest & { readonly file: string; readonly driver: string; readonly database: SqliteConnection }> {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-faults-sqlite-'))
  const file = join(dir, 'locks.sqlite')
  const { database, driver } = await openSqlite(file, 5000)
  const table = 'shedlock'
  database.exec(sqliteSchema({ tableName: table }))
  const all = (sql: string, ...params: string[]) =>
    (database as unknown as { prepare(sql: string): { all(...p: string[]): Record<string, unknown>[] } })
      .prepare(sql)
      .all(...params)
  const useDbTime = options.useDbTime ?? true
  const sut = assemble({
    label: useDbTime ? 'sqlite' : 'sqlite (app time)',
    store: 'sqlite',
    facts: { ...SQL_FACTS, expiry: useDbTime ? 'database' : 'app' },
    server: undefined,
    spec: { store: 'sqlite', file, table, useDbTime },
    cliArgs: ['--url', `sqlite:${file}`, '--table', table],
    isHeld: async (name) =>
      all(`SELECT 1 FROM ${table} WHERE name = ? AND lock_until > strftime('%Y-%m-%d %H:%M:%f', 'now')`, name)
        .length === 1,
    record: async (name) => {
      const rows = all(`SELECT * FROM ${table} WHERE name = ?`, name)
      return rows[0] ? JSON.stringify(rows[0]) : undefined
    },
    remainingMs: async (name) => {
      const rows = all(
        `SELECT (julianday(lock_until) - julianday('now')) * 86400000.0 AS ms FROM ${table} WHERE name = ?`,
        name,
      )
      return rows[0] ? Number(rows[0].ms) : undefined
    },
    // As bytes: libsql returns TEXT only up to its first NUL, and hostile names have NULs;
    // decoded keeping a leading U+FEFF, which TextDecoder drops by default as a byte-order mark.
    keys: async () =>
      all(`SELECT CAST(name AS BLOB) AS name FROM ${table}`).map((r) => bomKeeping.decode(r.name as Uint8Array)),
    dispose: async () => {
      database.close()
      rmSync(dir, { recursive: true, force: true })
    },
  })
  return Object.assign(sut, { file, driver, database })
}

/** Redis on a server of our own: no persistence (Redis's default), or an append-only file fsynced on every write. */
export async function redisUnderTest(options: { persistent?: boolean } = {}): Promise<StoreUnderTest> {
  const server = await servers.startRedis({ persistent: options.persistent })
  const raw = new Redis({ host: '127.0.0.1', port: server.port, retryStrategy: () => 200 })
  raw.on('error', () => {})
  const environment = `faults-${suffix()}`
  const keyOf = (name: string): string => `job-lock:${environment}:${name}`
  return assemble({
    label: options.persistent ? 'redis (appendfsync always)' : 'redis',
    store: 'redis',
    facts: {
      extensible: true,
      expiry: 'server',
      earlyMs: 0,
      lateMs: 0,
      minLockMs: 0,
      keepsLocksAcrossRestart: Boolean(options.persistent),
    },
    server,
    spec: { store: 'redis', port: server.port, environment },
    cliArgs: ['--url', `redis://127.0.0.1:${server.port}?environment=${environment}`],
    isHeld: async (name) => (await raw.exists(keyOf(name))) === 1,
    record: async (name) => (await raw.get(keyOf(name))) ?? undefined,
    remainingMs: async (name) => {
      const ms = await raw.pttl(keyOf(name))
      return ms >= 0 ? ms : undefined
    },
    keys: async () => raw.keys(`job-lock:${environment}:*`),
    keyOf,
    dispose: async () => raw.disconnect(),
  })
}

/** etcd on a single-member cluster of our own. */
export async function etcdUnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startEtcd()
  const raw = new Etcd3({ hosts: `http://127.0.0.1:${server.port}` })
  const environment = `faults-${suffix()}`
  const keyOf = (name: string): string => `shedlock:${environment}:${name}`
  const kv = async (name: string) => (await raw.get(keyOf(name)).exec()).kvs[0]
  return assemble({
    store: 'etcd',
    // Lease TTLs are whole seconds (rounded up) and at least 2 s; expired keys go in 500 ms passes.
    facts: {
      extensible: true,
      expiry: 'server',
      earlyMs: 0,
      lateMs: 1_600,
      minLockMs: 2_000,
      keepsLocksAcrossRestart: true,
    },
    server,
    spec: { store: 'etcd', port: server.port, environment },
    isHeld: async (name) => (await kv(name)) !== undefined,
    record: async (name) => {
      const found = await kv(name)
      return found ? JSON.stringify({ value: found.value.toString('utf8'), lease: found.lease }) : undefined
    },
    remainingMs: async (name) => {
      const found = await kv(name)
      if (!found || found.lease === '0') return undefined
      const { TTL } = await raw.leaseClient.leaseTimeToLive({ ID: found.lease })
      return Number(TTL) * 1000
    },
    keys: async () => Object.keys(await raw.getAll().prefix(`shedlock:${environment}:`).strings()),
    keyOf,
    dispose: async () => raw.close(),
  })
}

/** NATS JetStream (file store) on a server of our own. */
export async function natsUnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startNats()
  const nc: NatsConnection = await natsConnect({
    servers: `127.0.0.1:${server.port}`,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 200,
  })
  const bucket = `faults-${suffix()}`
  const kv: KV = await new Kvm(jetstream(nc, { timeout: 2000 })).create(bucket)
  const entry = async (name: string) => {
    const found = await kv.get(natsLockKey(name))
    return found && found.operation === 'PUT' ? found : undefined
  }
  const lockUntil = (value: Uint8Array): number => Number(Buffer.from(value).readBigInt64BE(0))
  return assemble({
    store: 'nats',
    facts: { extensible: true, expiry: 'app', earlyMs: 0, lateMs: 0, minLockMs: 0, keepsLocksAcrossRestart: true },
    server,
    spec: { store: 'nats', port: server.port, bucket },
    isHeld: async (name) => {
      const found = await entry(name)
      return found !== undefined && lockUntil(found.value) > Date.now()
    },
    record: async (name) => {
      const found = await entry(name)
      return found ? JSON.stringify({ revision: found.revision, lockUntil: lockUntil(found.value) }) : undefined
    },
    remainingMs: async (name) => {
      const found = await entry(name)
      return found ? lockUntil(found.value) - Date.now() : undefined
    },
    keys: async () => {
      const keys: string[] = []
      for await (const key of await kv.keys()) keys.push(key)
      return keys
    },
    keyOf: natsLockKey,
    dispose: async () => {
      await kv.destroy().catch(() => {})
      await nc.close()
    },
  })
}

/** memcached on a server of our own. */
export async function memcachedUnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startMemcached()
  const raw = memjs.Client.create(`127.0.0.1:${server.port}`, { logger: { log: () => {} } })
  const environment = `faults-${suffix()}`
  const value = async (name: string) => {
    const { value: v } = await raw.get(memcachedLockKey(name, environment))
    return v === null ? undefined : v.toString('utf8')
  }
  return assemble({
    store: 'memcached',
    // Expiries are whole seconds, rounded up, on a clock that ticks once a second.
    facts: {
      extensible: false,
      expiry: 'server',
      earlyMs: 1_100,
      lateMs: 1_100,
      minLockMs: 1_000,
      keepsLocksAcrossRestart: false,
    },
    server,
    spec: { store: 'memcached', port: server.port, environment },
    isHeld: async (name) => (await value(name)) !== undefined,
    record: value,
    keyOf: (name) => memcachedLockKey(name, environment),
    dispose: async () => raw.close(),
  })
}

/** ZooKeeper (standalone) on a server of our own. */
export async function zookeeperUnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startZooKeeper()
  // The test's own reader survives the restarts as the nodes do: replaced when stuck disconnected.
  const reader = await replacingZooKeeperClient(server.port)
  const path = `/faults-${suffix()}`
  const data = (name: string) =>
    new Promise<{ data: string; version: number } | undefined>((resolve, reject) =>
      reader.current().getData(`${path}/${zookeeperNodeName(name)}`, (error, buffer, stat) => {
        if ((error as { code?: number } | null)?.code === zookeeper.Exception.NO_NODE) resolve(undefined)
        else if (error) reject(error)
        else resolve({ data: buffer ? buffer.toString('utf8') : '', version: stat.version })
      }),
    )
  return assemble({
    store: 'zookeeper',
    facts: { extensible: true, expiry: 'app', earlyMs: 0, lateMs: 0, minLockMs: 0, keepsLocksAcrossRestart: true },
    server,
    spec: { store: 'zookeeper', port: server.port, path },
    isHeld: async (name) => {
      const node = await data(name)
      return node !== undefined && Date.parse(node.data) > Date.now()
    },
    record: async (name) => {
      const node = await data(name)
      return node ? JSON.stringify(node) : undefined
    },
    remainingMs: async (name) => {
      const node = await data(name)
      return node ? Date.parse(node.data) - Date.now() : undefined
    },
    keys: () =>
      new Promise((resolve, reject) =>
        reader.current().getChildren(path, (error, children) => {
          if ((error as { code?: number } | null)?.code === zookeeper.Exception.NO_NODE) resolve([])
          else if (error) reject(error)
          else resolve(children)
        }),
      ),
    keyOf: zookeeperNodeName,
    dispose: async () => reader.close(),
  })
}

/** DynamoDB: dynalite in a process of our own, with its tables on disk. */
export async function dynamodbUnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startDynalite()
  const raw = new DynamoDBClient({
    endpoint: `http://127.0.0.1:${server.port}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'faults', secretAccessKey: 'dummy' },
  })
  const table = `faults_${suffix()}`
  await createDynamoDBLockTable(raw, table)
  const item = async (name: string) =>
    (await raw.send(new GetItemCommand({ TableName: table, Key: { _id: { S: name } }, ConsistentRead: true }))).Item
  return assemble({
    store: 'dynamodb',
    facts: { extensible: true, expiry: 'app', earlyMs: 0, lateMs: 0, minLockMs: 0, keepsLocksAcrossRestart: true },
    server,
    spec: { store: 'dynamodb', port: server.port, table },
    isHeld: async (name) => ((await item(name))?.lockUntil?.S ?? '') > new Date().toISOString(),
    record: async (name) => {
      const found = await item(name)
      return found ? JSON.stringify(found) : undefined
    },
    remainingMs: async (name) => {
      const until = (await item(name))?.lockUntil?.S
      return until ? Date.parse(until) - Date.now() : undefined
    },
    keys: async () =>
      ((await raw.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? []).map(
        (i) => i._id?.S ?? '',
      ),
    dispose: async () => {
      await raw.send(new DeleteTableCommand({ TableName: table })).catch(() => {})
      raw.destroy()
    },
  })
}

/** S3 and Azure Blob keep the lock in an object's metadata, written from the node's clock. */
const OBJECT_FACTS: StoreFacts = {
  extensible: true,
  expiry: 'app',
  earlyMs: 0,
  lateMs: 0,
  minLockMs: 0,
  keepsLocksAcrossRestart: true,
}
const OBJECT_PREFIX = 'faults/'

/**
 * S3: a RADOS Gateway of our own in front of the shared Ceph cluster, in one bucket kept across
 * runs, under a prefix of our own: creating and deleting buckets on the shared Ceph took up to
 * 26 s each while other tests did the same (objects take milliseconds).
 */
export async function s3UnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startRadosgw()
  const raw = s3Client(`http://127.0.0.1:${server.port}`)
  const bucket = 'shedlock-faults'
  const prefix = `faults-${suffix()}/`
  try {
    await raw.send(new HeadBucketCommand({ Bucket: bucket }))
  } catch {
    await raw.send(new CreateBucketCommand({ Bucket: bucket })).catch((error: unknown) => {
      // Another run created it meanwhile.
      if ((error as { name?: string }).name !== 'BucketAlreadyOwnedByYou') throw error
    })
  }
  const keys = async () =>
    ((await raw.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }))).Contents ?? []).map(
      (o) => o.Key ?? '',
    )
  const head = async (name: string) => {
    try {
      return await raw.send(new HeadObjectCommand({ Bucket: bucket, Key: prefix + name }))
    } catch (error) {
      if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return undefined
      throw error
    }
  }
  const until = async (name: string) => (await head(name))?.Metadata?.['lock-until']
  return assemble({
    store: 's3',
    facts: OBJECT_FACTS,
    server,
    spec: { store: 's3', port: server.port, bucket, prefix },
    isHeld: async (name) => Date.parse((await until(name)) ?? '') > Date.now(),
    record: async (name) => {
      const found = await head(name)
      return found ? JSON.stringify({ etag: found.ETag, metadata: found.Metadata }) : undefined
    },
    remainingMs: async (name) => {
      const found = await until(name)
      return found ? Date.parse(found) - Date.now() : undefined
    },
    keys,
    keyOf: (name) => prefix + name,
    dispose: async () => {
      await Promise.all((await keys()).map((Key) => raw.send(new DeleteObjectCommand({ Bucket: bucket, Key })))).catch(
        () => {},
      )
      raw.destroy()
    },
  })
}

/** Azure Blob: azurite of our own, its blobs on disk, a container of our own. */
export async function azureBlobUnderTest(): Promise<StoreUnderTest> {
  const server = await servers.startAzurite()
  const container = azuriteService(`http://127.0.0.1:${server.port}/devstoreaccount1`).getContainerClient(
    `faults-${suffix()}`,
  )
  await container.create()
  const properties = async (name: string) => {
    try {
      return await container.getBlockBlobClient(OBJECT_PREFIX + name).getProperties()
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) return undefined
      throw error
    }
  }
  // azurite returns metadata names lower-case; Azure keeps their case.
  const until = async (name: string) => {
    const metadata = (await properties(name))?.metadata ?? {}
    return metadata.lockUntil ?? metadata.lockuntil
  }
  return assemble({
    store: 'azure-blob',
    // Whether azurite kept the lock through a crash depends on its last save: not asserted.
    facts: { ...OBJECT_FACTS, keepsLocksAcrossRestart: undefined },
    server,
    spec: { store: 'azure-blob', port: server.port, bucket: container.containerName, prefix: OBJECT_PREFIX },
    isHeld: async (name) => Date.parse((await until(name)) ?? '') > Date.now(),
    record: async (name) => {
      const found = await properties(name)
      return found ? JSON.stringify({ etag: found.etag, metadata: found.metadata }) : undefined
    },
    remainingMs: async (name) => {
      const found = await until(name)
      return found ? Date.parse(found) - Date.now() : undefined
    },
    keys: async () => {
      const names: string[] = []
      for await (const blob of container.listBlobsFlat({ prefix: OBJECT_PREFIX })) names.push(blob.name)
      return names
    },
    keyOf: (name) => OBJECT_PREFIX + name,
    // The server and its folder go with it.
    dispose: async () => {},
  })
}

/**
 * MongoDB: no server can run on this machine, so the in-memory fake of the one Collection
 * method the provider calls (test/helpers/fake-mongo-collection.ts). Nodes share the fake; only
 * the in-process groups (clock skew, a task outliving its lock, bad input) apply.
 */
export function mongodbUnderTest(): StoreUnderTest {
  const collection = new FakeMongoCollection()
  const doc = (name: string) => collection.document(name)
  return assemble({
    label: 'mongodb (fake)',
    store: 'mongodb',
    facts: { extensible: true, expiry: 'app', earlyMs: 0, lateMs: 0, minLockMs: 0, keepsLocksAcrossRestart: undefined },
    server: undefined,
    spec: undefined,
    provider: (clock) => mongoLockProvider(clock ? { collection, clock } : { collection }),
    isHeld: async (name) => {
      const until = doc(name)?.lockUntil
      return until instanceof Date && until.getTime() > Date.now()
    },
    record: async (name) => {
      const found = doc(name)
      return found ? JSON.stringify(found) : undefined
    },
    dispose: async () => {},
  })
}
