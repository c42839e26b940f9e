import { CliError, firstLine } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { type Check, type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import type { StoreUrl } from '../../support/store-url.ts'
import { DEFAULT_COLLECTION, mongoSchema } from './format.ts'
import { type MongoInspectorCollection, mongoLockInspector } from './inspector.ts'
import { type MongoLockCollection, mongoLockProvider } from './provider.ts'

interface Collection extends MongoLockCollection, MongoInspectorCollection {
  deleteOne(filter: object): Promise<unknown>
}
interface Db {
  readonly databaseName: string
  collection(name: string, options?: object): Collection
  command(command: object): Promise<Record<string, unknown>>
  listCollections(filter: object, options: object): { toArray(): Promise<unknown[]> }
  createCollection(name: string): Promise<unknown>
}
interface MongoModule {
  MongoClient: new (url: string, options: object) => { connect(): Promise<unknown>; db(): Db; close(): Promise<void> }
}

/** `shedlock schema mongodb`: the mongosh command that creates the collection. */
export function schema(table: string | undefined): string {
  return mongoSchema(table ?? DEFAULT_COLLECTION)
}

/**
 * Opens a `mongodb://` or `mongodb+srv://` URL with the `mongodb` driver. The database is the
 * URL's (the driver's default, `test`, without one); the collection is `--table`, default
 * `shedLock` (Java ShedLock's). Query parameters go to the driver.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const { MongoClient } = await importDriver<MongoModule>('mongodb', 'mongodb', 'mongodb://')
  // A CLI command should fail within seconds when no server answers, unless the URL says otherwise.
  const selection = /[?&]serverSelectionTimeoutMS=/i.test(url.raw) ? {} : { serverSelectionTimeoutMS: 10_000 }
  let client: InstanceType<MongoModule['MongoClient']> | undefined
  try {
    client = new MongoClient(url.raw, selection)
    await client.connect()
  } catch (error) {
    await client?.close().catch(() => {})
    throw new CliError(
      `cannot reach MongoDB at ${url.redacted}: ${firstLine(error)}; check the URL and that the server runs`,
      { cause: error },
    )
  }
  const db = client.db()
  const collectionName = options.table ?? DEFAULT_COLLECTION
  // Majority writes, as the provider's documentation asks for on a replica set.
  const collection = db.collection(collectionName, { writeConcern: { w: 'majority' } })
  const serverNow = async (): Promise<number> =>
    db.command({ hello: 1 }).then((reply) => (reply.localTime as Date).getTime())
  const exists = async (): Promise<boolean> =>
    (await db.listCollections({ name: collectionName }, { nameOnly: true }).toArray()).length > 0

  return {
    kind: 'MongoDB',
    where: `${url.redacted} (collection ${db.databaseName}.${collectionName})`,
    extensible: true,
    provider: (options) => mongoLockProvider({ collection, lockedBy: options?.lockedBy }),
    inspector: mongoLockInspector({ collection }),
    async init() {
      if (await exists()) return [`collection ${collectionName} already exists: nothing to do`]
      await db.createCollection(collectionName)
      return [`created collection ${collectionName} (no index needed: _id is the lock name)`]
    },
    ping: async () => `MongoDB ${String((await db.command({ buildInfo: 1 })).version ?? '?')}`,
    async structure(): Promise<Check[]> {
      const label = `collection ${collectionName}`
      return [
        {
          status: 'ok',
          label,
          detail: (await exists())
            ? 'exists'
            : 'does not exist yet; MongoDB creates it with the first lock (or run shedlock init)',
        },
      ]
    },
    async remove(name) {
      await collection.deleteOne({ _id: name })
    },
    readClock: () => timed('hello.localTime', 1, serverNow),
    clockDependence:
      'the MongoDB provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: () => client.close(),
  }
}
