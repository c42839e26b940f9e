import { Datastore } from '@google-cloud/datastore'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type DatastoreClient, datastoreLockProvider } from '../../src/providers/datastore/index.ts'
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

// A transaction's run (BeginTransaction), get (Lookup), commit and rollback are one request each;
// insert, update and delete only queue a mutation. transaction() builds the object.
const COUNT: CountSpec = { count: ['run', 'get', 'commit', 'rollback', 'runQuery'], follow: ['transaction'] }
const PROJECT = 'test-project'
const KIND = 'lock'

/**
 * The provider's transactions, directly: look the entity up, insert it (missing) or update it
 * (expired), commit; an aborted commit means another node won. Release: look up, update if still ours.
 */
function rawDatastore(datastore: DatastoreClient, namespace: string): RawOperations {
  const aborted = (error: unknown): boolean => [6, 10].includes((error as { code?: unknown }).code as number)
  return {
    async acquire(name) {
      const key = datastore.key({ namespace, path: [KIND, name] })
      const owner = rawOwner()
      const transaction = datastore.transaction()
      await transaction.run()
      const [entity] = (await transaction.get(key, { wrapNumbers: true })) as [Record<string, unknown> | undefined]
      const now = Date.now()
      const until = entity?.lock_until
      if (entity && (!(until instanceof Date) || until.getTime() > now)) {
        await transaction.rollback()
        return undefined
      }
      const data = { ...entity, lock_until: new Date(now + 60_000), locked_at: new Date(now), locked_by: owner }
      if (entity) transaction.update({ key, data })
      else transaction.insert({ key, data })
      try {
        await transaction.commit()
      } catch (error) {
        if (aborted(error)) return undefined
        throw error
      }
      return {
        async release() {
          const again = datastore.transaction()
          await again.run()
          const [current] = (await again.get(key, { wrapNumbers: true })) as [Record<string, unknown> | undefined]
          if (current?.locked_by !== owner) {
            await again.rollback()
            return
          }
          again.update({ key, data: { ...current, lock_until: new Date() } })
          try {
            await again.commit()
          } catch (error) {
            if (!aborted(error)) throw error
          }
        },
      }
    },
  }
}

/** Google's Datastore emulator at `DATASTORE_EMULATOR_HOST` (default 127.0.0.1:8687, scripts/services.sh), one client. */
export async function datastoreSetup(context: SetupContext): Promise<StoreSetup> {
  // Never the real service from the bench: the emulator, without a metadata server lookup.
  process.env.DATASTORE_EMULATOR_HOST ??= '127.0.0.1:8687'
  process.env.METADATA_SERVER_DETECTION ??= 'none'
  // A namespace per run and space: nothing is shared with tests or other runs.
  const namespaceOf = (suffix: string): string => `shedlock-bench-${context.runId}-${suffix}`
  const used: string[] = []
  const spaceOf = (suffix: string): string => {
    const namespace = namespaceOf(suffix)
    if (!used.includes(namespace)) used.push(namespace)
    return namespace
  }
  const datastore = new Datastore({ projectId: PROJECT })
  const main = spaceOf('main')
  const provider = (client: DatastoreClient, namespace: string) =>
    datastoreLockProvider({ datastore: client, namespace })
  await datastore.get(datastore.key({ namespace: main, path: [KIND, 'probe'] }))
  const deleteAll = async (namespace: string): Promise<void> => {
    const [entities] = await datastore.runQuery(datastore.createQuery(namespace, KIND).select('__key__'))
    for (const slice of chunks(entities, 500)) await datastore.delete(slice.map((entity) => entity[datastore.KEY]))
  }

  return {
    name: 'datastore',
    versions: {
      server: `Datastore emulator (google-cloud-cli-datastore-emulator), ${process.env.DATASTORE_EMULATOR_HOST}`,
      client: `@google-cloud/datastore ${packageVersion('@google-cloud/datastore')}, one client`,
    },
    notes: [
      "Google's emulator, one Java process in memory on loopback: its figures show the client-side cost, not Datastore's latency or contention limits (docs/providers/datastore.md)",
    ],
    provider: provider(datastore, main),
    raw: rawDatastore(datastore, main),
    counted() {
      const { client: counted, counter } = countingProxy(datastore as DatastoreClient, COUNT)
      return { provider: provider(counted, main), raw: rawDatastore(counted, main), counter }
    },
    async separateNode() {
      const own = new Datastore({ projectId: PROJECT })
      // The first request opens the channel: not part of the race.
      const warm = await provider(own, main).lock(
        lockConfiguration({ name: `${context.runId}-warm-${used.length}`, lockAtMostFor: 60_000 }),
      )
      await warm?.unlock()
      const { client: counted, counter } = countingProxy(own as DatastoreClient, COUNT)
      return { provider: provider(counted, main), counter, close: async () => {} }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const namespace = spaceOf(label)
      return {
        provider: provider(datastore, namespace),
        async fill(names) {
          const until = new Date(Date.now() + 3_600_000)
          const now = new Date()
          await inParallel(chunks(names, 500), 4, (slice) =>
            datastore.upsert(
              slice.map((name) => ({
                key: datastore.key({ namespace, path: [KIND, name] }),
                data: { lock_until: until, locked_at: now, locked_by: 'another-node' },
              })),
            ),
          )
        },
        drain: () => deleteAll(namespace),
      }
    },
    async close() {
      for (const namespace of used) await deleteAll(namespace).catch(() => {})
    },
  }
}
