import { type Collection, type Document, MongoClient } from 'mongodb'
import { type MongoLockCollection, mongoLockProvider } from '../../src/providers/mongodb/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import { packageVersion, type RawOperations, rawOwner, redactUrl, type SetupContext, type StoreSetup } from './setup.ts'

const COUNT: CountSpec = { count: ['findOneAndUpdate'] }

/** The provider's `findOneAndUpdate` calls, directly: an upsert filtered on expiry (E11000 means held), and an owner-filtered update. */
function rawMongo(collection: MongoLockCollection): RawOperations {
  return {
    async acquire(name) {
      const owner = rawOwner()
      const now = new Date()
      try {
        await collection.findOneAndUpdate(
          { _id: name, lockUntil: { $lte: now } },
          { $set: { lockUntil: new Date(now.getTime() + 60_000), lockedAt: now, lockedBy: owner } },
          { upsert: true },
        )
      } catch (error) {
        if ((error as { code?: unknown }).code === 11000) return undefined
        throw error
      }
      return {
        async release() {
          await collection.findOneAndUpdate({ _id: name, lockedBy: owner }, { $set: { lockUntil: new Date() } }, {})
        },
      }
    },
  }
}

/**
 * MongoDB at `SHEDLOCK_MONGODB_URL`, only when it is set: no MongoDB server can be installed on
 * this project's machines, so the default run has none.
 */
export async function mongodbSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_MONGODB_URL
  if (!url) throw new Error('SHEDLOCK_MONGODB_URL is not set (no MongoDB server on this machine)')
  const open = async (): Promise<MongoClient> => {
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 5_000 })
    try {
      await client.db().command({ ping: 1 })
    } catch (error) {
      await client.close()
      throw error
    }
    return client
  }
  const mongo = await open()
  const clients: MongoClient[] = [mongo]
  const collections: Collection<Document>[] = []
  const newCollection = (client: MongoClient, suffix: string): Collection<Document> => {
    const collection = client.db().collection(`shedLock_bench_${context.runId}_${suffix}`)
    collections.push(collection)
    return collection
  }
  const main = newCollection(mongo, 'main')
  const info = (await mongo.db().admin().command({ buildInfo: 1 })) as { version?: string }
  const asLockCollection = (c: Collection<Document>): MongoLockCollection => c as unknown as MongoLockCollection

  return {
    name: 'mongodb',
    versions: {
      server: `MongoDB ${info.version ?? 'unknown'}`,
      client: `mongodb ${packageVersion('mongodb')}`,
      url: redactUrl(url),
    },
    notes: [],
    provider: mongoLockProvider({ collection: asLockCollection(main) }),
    raw: rawMongo(asLockCollection(main)),
    counted() {
      const { client, counter } = countingProxy(asLockCollection(main), COUNT)
      return { provider: mongoLockProvider({ collection: client }), raw: rawMongo(client), counter }
    },
    async separateNode() {
      const own = await open()
      clients.push(own)
      const { client, counter } = countingProxy(asLockCollection(own.db().collection(main.collectionName)), COUNT)
      return { provider: mongoLockProvider({ collection: client }), counter, close: () => own.close() }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const space = newCollection(mongo, label)
      return {
        provider: mongoLockProvider({ collection: asLockCollection(space) }),
        async fill(names) {
          const now = new Date()
          const until = new Date(now.getTime() + 3_600_000)
          await space.insertMany(
            names.map((name) => ({
              _id: name as unknown as never,
              lockUntil: until,
              lockedAt: now,
              lockedBy: 'another-node',
            })),
          )
        },
        async drain() {
          await space.deleteMany({})
        },
      }
    },
    async close() {
      try {
        for (const c of collections) await c.drop().catch(() => false)
      } finally {
        await Promise.all(clients.map((c) => c.close()))
      }
    },
  }
}
