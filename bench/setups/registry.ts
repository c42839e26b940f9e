import type { Store } from '../options.ts'
import type { SetupContext, StoreSetup } from './setup.ts'

/**
 * How to connect each store. Imported lazily, as the CLI imports drivers: a store whose driver
 * is missing is skipped with the reason, the others still run.
 */
export const SETUPS: Readonly<Record<Store, (context: SetupContext) => Promise<StoreSetup>>> = {
  postgres: async (c) => (await import('./postgres.ts')).postgresSetup(c),
  mysql: async (c) => (await import('./mysql.ts')).mysqlSetup(c),
  spanner: async (c) => (await import('./spanner.ts')).spannerSetup(c),
  sqlite: async (c) => (await import('./sqlite.ts')).sqliteSetup(c),
  redis: async (c) => (await import('./redis.ts')).redisSetup(c),
  nats: async (c) => (await import('./nats.ts')).natsSetup(c),
  etcd: async (c) => (await import('./etcd.ts')).etcdSetup(c),
  zookeeper: async (c) => (await import('./zookeeper.ts')).zookeeperSetup(c),
  memcached: async (c) => (await import('./memcached.ts')).memcachedSetup(c),
  dynamodb: async (c) => (await import('./dynamodb.ts')).dynamodbSetup(c),
  firestore: async (c) => (await import('./firestore.ts')).firestoreSetup(c),
  datastore: async (c) => (await import('./datastore.ts')).datastoreSetup(c),
  mongodb: async (c) => (await import('./mongodb.ts')).mongodbSetup(c),
  s3: async (c) => (await import('./s3.ts')).s3Setup(c),
  'azure-blob': async (c) => (await import('./azure-blob.ts')).azureBlobSetup(c),
}
