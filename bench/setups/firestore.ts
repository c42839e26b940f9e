import { Firestore, Timestamp } from '@google-cloud/firestore'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type FirestoreLockCollection, firestoreLockProvider } from '../../src/providers/firestore/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  chunks,
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

// Each document get, create, update and delete is one request; doc() only builds a reference.
const COUNT: CountSpec = { count: ['get', 'create', 'update', 'delete'], follow: ['doc'] }
const PROJECT = 'test-project'

/**
 * The provider's requests, directly: read the document, then create it (missing) or update it
 * under the read's `lastUpdateTime` (expired); release: read, and update if still ours.
 */
function rawFirestore(collection: FirestoreLockCollection): RawOperations {
  const failedCondition = (error: unknown): boolean => {
    const code = (error as { code?: unknown }).code
    return code === 6 || code === 9
  }
  return {
    async acquire(name) {
      const ref = collection.doc(name)
      const owner = rawOwner()
      const snapshot = await ref.get()
      const now = Date.now()
      const until = snapshot.get('lockUntil') as Timestamp | undefined
      if (snapshot.exists && (!until || until.toMillis() > now)) return undefined
      const data = { lockUntil: new Date(now + 60_000), lockedAt: new Date(now), lockedBy: owner }
      try {
        if (snapshot.exists) await ref.update(data, { lastUpdateTime: snapshot.updateTime })
        else await ref.create(data)
      } catch (error) {
        if (failedCondition(error)) return undefined
        throw error
      }
      return {
        async release() {
          const current = await ref.get()
          if (current.get('lockedBy') !== owner) return
          try {
            await ref.update({ lockUntil: new Date() }, { lastUpdateTime: current.updateTime })
          } catch (error) {
            if (!failedCondition(error)) throw error
          }
        },
      }
    },
  }
}

/** Google's Firestore emulator at `FIRESTORE_EMULATOR_HOST` (default 127.0.0.1:8686, scripts/services.sh), one client. */
export async function firestoreSetup(context: SetupContext): Promise<StoreSetup> {
  // Never the real service from the bench: the emulator, without a metadata server lookup.
  process.env.FIRESTORE_EMULATOR_HOST ??= '127.0.0.1:8686'
  process.env.METADATA_SERVER_DETECTION ??= 'none'
  const clients: Firestore[] = []
  const open = (): Firestore => {
    const client = new Firestore({ projectId: PROJECT })
    clients.push(client)
    return client
  }
  const firestore = open()
  const collectionName = (suffix: string): string => `shedlock_bench_${context.runId}_${suffix}`
  const used: string[] = []
  const collectionOf = (client: Firestore, suffix: string): FirestoreLockCollection => {
    const name = collectionName(suffix)
    if (!used.includes(name)) used.push(name)
    return client.collection(name)
  }
  const main = collectionOf(firestore, 'main')
  try {
    await main.doc('probe').get()
  } catch (error) {
    await firestore.terminate()
    throw error
  }
  const deleteAll = async (name: string): Promise<void> => {
    const { docs } = await firestore.collection(name).get()
    for (const slice of chunks(docs, 500)) {
      const batch = firestore.batch()
      for (const doc of slice) batch.delete(doc.ref)
      await batch.commit()
    }
  }

  return {
    name: 'firestore',
    versions: {
      server: `Firestore emulator (google-cloud-cli-firestore-emulator), ${process.env.FIRESTORE_EMULATOR_HOST}`,
      client: `@google-cloud/firestore ${packageVersion('@google-cloud/firestore')}, one client`,
    },
    notes: [
      "Google's emulator, one Java process in memory on loopback: its figures show the client-side cost, not Firestore's latency or contention limits (docs/providers/firestore.md)",
    ],
    provider: firestoreLockProvider({ collection: main }),
    raw: rawFirestore(main),
    counted() {
      const { client: counted, counter } = countingProxy(main, COUNT)
      return { provider: firestoreLockProvider({ collection: counted }), raw: rawFirestore(counted), counter }
    },
    async separateNode() {
      const own = open()
      const collection = collectionOf(own, 'main')
      // The first request opens the channel: not part of the race.
      const warm = await firestoreLockProvider({ collection }).lock(
        lockConfiguration({ name: `${context.runId}-warm-${clients.length}`, lockAtMostFor: 60_000 }),
      )
      await warm?.unlock()
      const { client: counted, counter } = countingProxy(collection, COUNT)
      return {
        provider: firestoreLockProvider({ collection: counted }),
        counter,
        close: () => own.terminate(),
      }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const name = collectionName(label)
      const collection = collectionOf(firestore, label)
      return {
        provider: firestoreLockProvider({ collection }),
        async fill(names) {
          const until = Timestamp.fromMillis(Date.now() + 3_600_000)
          const now = Timestamp.now()
          await inParallel(chunks(names, 500), 4, async (slice) => {
            const batch = firestore.batch()
            for (const lock of slice)
              batch.set(firestore.collection(name).doc(lock), {
                lockUntil: until,
                lockedAt: now,
                lockedBy: 'another-node',
              })
            await batch.commit()
          })
        },
        drain: () => deleteAll(name),
      }
    },
    async close() {
      try {
        for (const name of used) await deleteAll(name).catch(() => {})
      } finally {
        for (const client of clients) await client.terminate().catch(() => {})
      }
    },
  }
}
