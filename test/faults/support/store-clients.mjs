// Opens one "node" of the fault suite: the store's driver client, connected the way the README
// tells users to connect it, and the shedlock provider over it, built from the package itself
// (`shedlock/<store>`, i.e. dist/). Plain JavaScript, because worker processes run it on Node 20,
// which cannot load TypeScript; the tests import it too (types in store-clients.d.mts), so that a
// node in a worker and a node in the test are built the same way.

import { setTimeout as sleep } from 'node:timers/promises'

/** Where every fault-suite client connects. */
const HOST = '127.0.0.1'

/** The stores with a run ledger (`<store>RunLedger`). */
const LEDGER_STORES = ['postgres', 'mysql', 'sqlite', 'redis']

/** Connection options that make failures show within seconds, not minutes. */
const TIMEOUT_MS = 2000

/**
 * @param {import('./store-clients.d.mts').StoreSpec} spec
 * @param {import('./store-clients.d.mts').NodeOptions} [options]
 * @returns {Promise<import('./store-clients.d.mts').StoreNode>}
 */
export async function openNode(spec, options = {}) {
  const clock = options.clock
  const timeout = options.timeoutMs ?? TIMEOUT_MS
  const withNode = (o) => ({
    ...o,
    ...(clock ? { clock } : {}),
    ...(options.lockedBy ? { lockedBy: options.lockedBy } : {}),
  })
  // The run ledger over the node's own client, where asked: the history the CLI reads back.
  const ledger = async (open) => (options.runLedger ? open() : undefined)
  if (options.runLedger && !LEDGER_STORES.includes(spec.store))
    throw new Error(`${spec.store} keeps no run ledger; those that do: ${LEDGER_STORES.join(', ')}`)
  switch (spec.store) {
    case 'postgres': {
      const { default: pg } = await import('pg')
      const { postgresLockProvider } = await import('shedlock/postgres')
      const pool = new pg.Pool({
        host: HOST,
        port: spec.port,
        user: spec.user ?? 'postgres',
        password: spec.password,
        database: 'postgres',
        max: spec.poolSize ?? 10,
        connectionTimeoutMillis: timeout,
      })
      // pg emits 'error' on idle clients whose server went away; without a listener that
      // crashes the process (documented by pg). An application must attach one too.
      pool.on('error', () => {})
      return {
        provider: postgresLockProvider(
          withNode({ client: pool, tableName: spec.table, useDbTime: spec.useDbTime ?? true }),
        ),
        runLedger: await ledger(async () =>
          (await import('shedlock/postgres')).postgresRunLedger({ client: pool, tableName: spec.runsTable }),
        ),
        close: () => pool.end().catch(() => {}),
      }
    }
    case 'mysql': {
      const mysql = await import('mysql2/promise')
      const { mysqlLockProvider } = await import('shedlock/mysql')
      const pool = mysql.createPool({
        host: HOST,
        port: spec.port,
        user: spec.user ?? 'root',
        password: spec.password,
        database: 'test',
        connectionLimit: spec.poolSize ?? 10,
        connectTimeout: timeout,
      })
      return {
        provider: mysqlLockProvider(
          withNode({ client: pool, tableName: spec.table, useDbTime: spec.useDbTime ?? true }),
        ),
        runLedger: await ledger(async () =>
          (await import('shedlock/mysql')).mysqlRunLedger({ client: pool, tableName: spec.runsTable }),
        ),
        close: () => pool.end().catch(() => {}),
      }
    }
    case 'sqlite': {
      const { sqliteLockProvider } = await import('shedlock/sqlite')
      const { database } = await openSqlite(spec.file, spec.busyTimeoutMs ?? 5000)
      return {
        provider: sqliteLockProvider(withNode({ database, tableName: spec.table, useDbTime: spec.useDbTime ?? true })),
        runLedger: await ledger(async () =>
          (await import('shedlock/sqlite')).sqliteRunLedger({ database, tableName: spec.runsTable }),
        ),
        close: async () => database.close(),
      }
    }
    case 'redis': {
      const { Redis } = await import('ioredis')
      const { redisLockProvider } = await import('shedlock/redis')
      const client = new Redis({
        host: HOST,
        port: spec.port,
        password: spec.password,
        connectTimeout: timeout,
        retryStrategy: () => 200,
      })
      client.on('error', () => {})
      return {
        provider: redisLockProvider(withNode({ client, environment: spec.environment, timeout })),
        runLedger: await ledger(async () =>
          (await import('shedlock/redis')).redisRunLedger({ client, environment: spec.environment, timeout }),
        ),
        close: async () => client.disconnect(),
      }
    }
    case 'etcd': {
      const { Etcd3 } = await import('etcd3')
      const { etcdLockProvider } = await import('shedlock/etcd')
      const client = new Etcd3({
        hosts: `http://${HOST}:${spec.port}`,
        ...(spec.password ? { auth: { username: spec.user, password: spec.password } } : {}),
      })
      return {
        provider: etcdLockProvider(withNode({ client, environment: spec.environment, timeout })),
        close: async () => client.close(),
      }
    }
    case 'nats': {
      const { connect } = await import('@nats-io/transport-node')
      const { jetstream } = await import('@nats-io/jetstream')
      const { Kvm } = await import('@nats-io/kv')
      const { natsLockProvider } = await import('shedlock/nats')
      // The README's advice: never stop reconnecting.
      const nc = await connect({
        servers: `${HOST}:${spec.port}`,
        user: spec.user,
        pass: spec.password,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 200,
        timeout,
      })
      const kv = await new Kvm(jetstream(nc, { timeout })).create(spec.bucket)
      return {
        provider: natsLockProvider(withNode({ kv })),
        close: () => nc.close().catch(() => {}),
      }
    }
    case 'memcached': {
      const { default: memjs } = await import('memjs')
      const { memcachedLockProvider } = await import('shedlock/memcached')
      const auth = spec.password ? `${spec.user}:${spec.password}@` : ''
      // memjs logs every failed request to the console; failures here are on purpose.
      const client = memjs.Client.create(`${auth}${HOST}:${spec.port}`, {
        logger: { log: () => {} },
        timeout: timeout / 1000,
        conntimeout: timeout / 1000,
        retries: 1,
      })
      return {
        provider: memcachedLockProvider(withNode({ client, environment: spec.environment, timeout })),
        close: async () => client.close(),
      }
    }
    case 'zookeeper': {
      const { zookeeperLockProvider } = await import('shedlock/zookeeper')
      const zk = await replacingZooKeeperClient(spec.port)
      return {
        provider: zookeeperLockProvider(withNode({ client: zk.current, path: spec.path, timeout })),
        close: async () => zk.close(),
      }
    }
    case 'dynamodb': {
      const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb')
      const { dynamoDBLockProvider } = await import('shedlock/dynamodb')
      const client = new DynamoDBClient({
        endpoint: `http://${HOST}:${spec.port}`,
        region: 'us-east-1',
        // dynalite accepts any credentials; the secret is a marker for the secrets tests.
        credentials: { accessKeyId: 'faults', secretAccessKey: spec.password ?? 'dummy-secret' },
        maxAttempts: 1,
        // Without throwOnRequestTimeout, as many applications have it: the SDK then only logs a
        // warning when a request outlasts requestTimeout, and shedlock's own bounds must hold.
        requestHandler: { connectionTimeout: timeout, requestTimeout: timeout },
      })
      return {
        provider: dynamoDBLockProvider(withNode({ client, tableName: spec.table })),
        close: async () => client.destroy(),
      }
    }
    case 's3': {
      const { S3Client } = await import('@aws-sdk/client-s3')
      const { s3LockProvider } = await import('shedlock/s3')
      // Ceph RGW's throwaway test user (scripts/ceph-rgw.sh); the secret is the password of the
      // secrets tests.
      const client = new S3Client({
        endpoint: `http://${HOST}:${spec.port}`,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: {
          accessKeyId: spec.user ?? 'shedlocktest',
          secretAccessKey: spec.password ?? 'shedlocktestsecret',
        },
        maxAttempts: 1,
        requestHandler: { connectionTimeout: timeout, requestTimeout: timeout },
      })
      return {
        provider: s3LockProvider(withNode({ client, bucket: spec.bucket, prefix: spec.prefix })),
        close: async () => client.destroy(),
      }
    }
    case 'azure-blob': {
      const { BlobServiceClient } = await import('@azure/storage-blob')
      const { azureBlobLockProvider } = await import('shedlock/azure-blob')
      // azurite's well-known development account (its README); the key is the password of the
      // secrets tests.
      const key =
        spec.password ?? 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
      const service = BlobServiceClient.fromConnectionString(
        `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${key};BlobEndpoint=http://${HOST}:${spec.port}/devstoreaccount1;`,
        { retryOptions: { maxTries: 1, tryTimeoutInMs: timeout } },
      )
      return {
        provider: azureBlobLockProvider(
          withNode({ containerClient: service.getContainerClient(spec.bucket), prefix: spec.prefix }),
        ),
        close: async () => {},
      }
    }
    default:
      throw new Error(`unknown store ${spec.store}`)
  }
}

/**
 * Opens a SQLite file the way the README says: `node:sqlite` where this Node has it (22.13+),
 * else libsql (better-sqlite3's API, prebuilt); WAL and a busy timeout either way.
 * @param {string} file
 * @param {number} busyTimeoutMs
 */
export async function openSqlite(file, busyTimeoutMs) {
  let database
  let driver
  const [major, minor] = process.versions.node.split('.').map(Number)
  if (major > 22 || (major === 22 && minor >= 13)) {
    const specifier = 'node:sqlite'
    const { DatabaseSync } = await import(specifier)
    database = new DatabaseSync(file, { timeout: busyTimeoutMs })
    database.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
    driver = 'node:sqlite'
  } else {
    const { default: Database } = await import('libsql')
    database = new Database(file, { timeout: busyTimeoutMs })
    driver = 'libsql'
  }
  database.exec('PRAGMA journal_mode = WAL')
  return { database, driver }
}

/** A ZooKeeper client that stays disconnected this long is replaced (see replacingZooKeeperClient). */
const ZOOKEEPER_REPLACE_AFTER_MS = 10_000

/**
 * A node-zookeeper-client connection to 127.0.0.1:`port` as docs/providers/zookeeper.md tells
 * users to keep one: node-zookeeper-client can wait forever on a connection it opened while the
 * server was starting (its handshake never completes; a loaded machine restarting ZooKeeper shows
 * it within a few runs), so `current()`, which the provider calls for every lock operation,
 * replaces a client that has stayed disconnected for ZOOKEEPER_REPLACE_AFTER_MS. Resolves once
 * the first client is connected.
 *
 * @param {number} port
 * @returns {Promise<{ current: () => import('node-zookeeper-client').Client, close: () => void }>}
 */
export async function replacingZooKeeperClient(port) {
  const { default: zookeeper } = await import('node-zookeeper-client')
  let client
  let disconnectedSince
  const open = () => {
    const next = zookeeper.createClient(`${HOST}:${port}`, { sessionTimeout: 30_000, spinDelay: 200 })
    next.on('connected', () => {
      if (next === client) disconnectedSince = undefined
    })
    next.on('disconnected', () => {
      if (next === client) disconnectedSince ??= Date.now()
    })
    next.on('expired', () => {
      if (next === client) disconnectedSince ??= Date.now()
    })
    client = next
    // Counted from now: a new client gets the whole delay to connect.
    disconnectedSince = Date.now()
    next.connect()
    return next
  }
  const first = open()
  const connected = new Promise((resolve) => first.once('connected', resolve))
  if (!(await Promise.race([connected.then(() => true), sleep(15_000).then(() => false)]))) {
    first.close()
    throw new Error(`ZooKeeper at ${HOST}:${port} did not connect within 15 s`)
  }
  return {
    current: () => {
      if (disconnectedSince !== undefined && Date.now() - disconnectedSince > ZOOKEEPER_REPLACE_AFTER_MS) {
        const stuck = client
        open()
        stuck.close()
      }
      return client
    },
    close: () => client.close(),
  }
}
