import { type MongoLockCollection, mongoLockProvider } from '../../providers/mongodb.ts'
import { CliError, messageOf } from '../command.ts'
import { importDriver } from '../import-driver.ts'
import type { Check, LockRecord, Store, StoreOptions } from '../store.ts'
import { timed } from '../store.ts'
import type { StoreUrl } from '../store-url.ts'

interface LockDocument {
  _id: unknown
  lockUntil?: unknown
  lockedAt?: unknown
  lockedBy?: unknown
}
interface Collection extends MongoLockCollection {
  find(filter: object): { sort(sort: object): { toArray(): Promise<LockDocument[]> } }
  findOne(filter: object): Promise<LockDocument | null>
  updateOne(filter: object, update: object): Promise<{ matchedCount: number }>
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

/**
 * Opens a `mongodb://` or `mongodb+srv://` URL with the `mongodb` driver. The database is the
 * URL's (the driver's default, `test`, without one); the collection is `--table`, default
 * `shedLock` (Java ShedLock's). Query parameters go to the driver.
 */
export async function openMongoStore(url: StoreUrl, options: StoreOptions): Promise<Store> {
  const { MongoClient } = await importDriver<MongoModule>('mongodb', 'mongodb', 'mongodb://')
  // A CLI command should fail within seconds when no server answers, unless the URL says otherwise.
  const selection = /[?&]serverSelectionTimeoutMS=/i.test(url.raw) ? {} : { serverSelectionTimeoutMS: 10_000 }
  let client
  try {
    client = new MongoClient(url.raw, selection)
    await client.connect()
  } catch (error) {
    await client?.close().catch(() => {})
    throw new CliError(`cannot reach MongoDB at ${url.redacted}: ${messageOf(error)}; check the URL and that the server runs`, { cause: error })
  }
  const db = client.db()
  const collectionName = options.table ?? 'shedLock'
  // Majority writes, as the provider's documentation asks for on a replica set.
  const collection = db.collection(collectionName, { writeConcern: { w: 'majority' } })
  const provider = mongoLockProvider({ collection })
  const serverNow = async (): Promise<number> => (db.command({ hello: 1 }).then((reply) => (reply.localTime as Date).getTime()))
  const exists = async (): Promise<boolean> => (await db.listCollections({ name: collectionName }, { nameOnly: true }).toArray()).length > 0
  const toRecord = (document: LockDocument): LockRecord => ({
    name: String(document._id),
    lockUntil: document.lockUntil instanceof Date ? document.lockUntil.getTime() : undefined,
    lockedAt: document.lockedAt instanceof Date ? document.lockedAt.getTime() : undefined,
    lockedBy: typeof document.lockedBy === 'string' ? document.lockedBy : undefined,
    token: { lockedBy: document.lockedBy, lockUntil: document.lockUntil },
  })
  const clock = "the MongoDB server's clock (hello.localTime)"

  return {
    kind: 'MongoDB',
    where: `${url.redacted} (collection ${db.databaseName}.${collectionName})`,
    extensible: true,
    provider: () => provider,
    async list() {
      const now = await serverNow()
      return { now, clock, value: (await collection.find({}).sort({ _id: 1 }).toArray()).map(toRecord) }
    },
    async find(name) {
      const now = await serverNow()
      const document = await collection.findOne({ _id: name })
      return { now, clock, value: document ? toRecord(document) : undefined }
    },
    async release(record) {
      const token = record.token as { lockedBy: unknown; lockUntil: unknown }
      // The document stays, as the provider leaves a released lock; lockUntil becomes the
      // server's now, only if it still holds what was shown and has not expired.
      const { matchedCount } = await collection.updateOne(
        { _id: record.name, lockedBy: token.lockedBy, lockUntil: token.lockUntil, $expr: { $gt: ['$lockUntil', '$$NOW'] } },
        { $currentDate: { lockUntil: true } },
      )
      return matchedCount > 0
    },
    async init() {
      if (await exists()) return [`collection ${collectionName} already exists: nothing to do`]
      await db.createCollection(collectionName)
      return [`created collection ${collectionName} (no index needed: _id is the lock name)`]
    },
    ping: async () => `MongoDB ${String((await db.command({ buildInfo: 1 })).version ?? '?')}`,
    async structure(): Promise<Check[]> {
      const label = `collection ${collectionName}`
      return [{ status: 'ok', label, detail: (await exists()) ? 'exists' : 'does not exist yet; MongoDB creates it with the first lock (or run shedlock init)' }]
    },
    async remove(name) {
      await collection.deleteOne({ _id: name })
    },
    readClock: () => timed('hello.localTime', 1, serverNow),
    clockDependence: 'the MongoDB provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: () => client.close(),
  }
}
