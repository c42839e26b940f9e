import type { Clock, LockProvider, RunLedger } from 'shedlock'
import type { SqliteDatabase } from 'shedlock/sqlite'

/** The stores the fault suite runs against processes and servers of its own. */
export type StoreName =
  | 'postgres'
  | 'mysql'
  | 'sqlite'
  | 'redis'
  | 'etcd'
  | 'nats'
  | 'memcached'
  | 'zookeeper'
  | 'dynamodb'
  | 's3'
  | 'azure-blob'

/** How to reach one store: plain data, so that it travels to worker processes as JSON. */
export interface StoreSpec {
  store: StoreName
  /** Client port on 127.0.0.1 (the server's, or a proxy's). */
  port?: number
  /** SQL and DynamoDB table. */
  table?: string
  /** SQL: let the database clock decide expiry. @default true */
  useDbTime?: boolean
  /** SQLite file. */
  file?: string
  /** SQLite busy timeout in ms. @default 5000 */
  busyTimeoutMs?: number
  /** Redis, etcd, memcached environment (key part). */
  environment?: string
  /** NATS bucket, S3 bucket, Azure Blob container. */
  bucket?: string
  /** S3 and Azure Blob key prefix. @default "shedlock/" */
  prefix?: string
  /** ZooKeeper root path. */
  path?: string
  /** Connection user and password (secrets tests); the DynamoDB and S3 secret access key, the Azure account key. */
  user?: string
  password?: string
  /** SQL pool size. @default 10 */
  poolSize?: number
  /** SQL: the run ledger's table (`shedlock init --runs-table`). @default "shedlock_runs" */
  runsTable?: string
}

/** Options of one node. */
export interface NodeOptions {
  /** The node's clock, given to the provider (and by the caller to its executor). */
  clock?: Clock
  /** Connection and operation timeouts in ms. @default 2000 */
  timeoutMs?: number
  /** The provider's `lockedBy` (the stores that keep an owner: SQL, Redis, etcd, DynamoDB): names the node in `locked_by` and in the run ledger. @default the host name */
  lockedBy?: string
  /** Give the node a run ledger over its client (PostgreSQL, MySQL, SQLite, Redis; other stores throw). */
  runLedger?: boolean
}

/** One node: a provider over its own client. */
export interface StoreNode {
  provider: LockProvider
  /** The run ledger, when `runLedger` was asked. */
  runLedger?: RunLedger
  close(): Promise<void>
}

export function openNode(spec: StoreSpec, options?: NodeOptions): Promise<StoreNode>

export interface SqliteConnection extends SqliteDatabase {
  exec(sql: string): unknown
  close(): unknown
}

export function openSqlite(
  file: string,
  busyTimeoutMs: number,
): Promise<{ database: SqliteConnection; driver: 'node:sqlite' | 'libsql' }>

/** A ZooKeeper connection that replaces a client stuck disconnected (docs/providers/zookeeper.md). */
export function replacingZooKeeperClient(
  port: number,
): Promise<{ current: () => import('node-zookeeper-client').Client; close: () => void }>
