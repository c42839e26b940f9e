import memjs from 'memjs'
import { type MemcachedClient, memcachedLockKey, memcachedLockProvider } from '../../src/providers/memcached/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['get', 'add', 'replace', 'delete', 'set'] }
// memjs logs every failed request to the console.
const QUIET = { logger: { log: () => {} } }

/** The provider's calls, directly: `add` with an expiry; release by `get`, compare, `delete`. */
function rawMemcached(client: MemcachedClient, environment: string): RawOperations {
  return {
    async acquire(name) {
      const key = memcachedLockKey(name, environment)
      const value = rawOwner()
      if (!(await client.add(key, value, { expires: 60 }))) return undefined
      return {
        async release() {
          const { value: stored } = await client.get(key)
          if (stored instanceof Uint8Array && Buffer.from(stored).toString('utf8') === value) await client.delete(key)
        },
      }
    },
  }
}

/** memcached at `SHEDLOCK_MEMCACHED_URL` (default `127.0.0.1:11211`), through one memjs client. */
export async function memcachedSetup(context: SetupContext): Promise<StoreSetup> {
  const where = (process.env.SHEDLOCK_MEMCACHED_URL ?? '127.0.0.1:11211').replace(/^memcached:\/\//, '')
  const clients: memjs.Client[] = []
  const open = async (): Promise<memjs.Client> => {
    const client = memjs.Client.create(where, QUIET)
    clients.push(client)
    await client.get('shedlock-bench-probe')
    return client
  }
  let client: memjs.Client
  try {
    client = await open()
  } catch (error) {
    for (const c of clients) c.close()
    throw error
  }
  const environment = (suffix: string): string => `bench-${context.runId}-${suffix}`
  const main = environment('main')
  // STATS answers once per server, with the server's version among the figures.
  const server = await new Promise<string>((resolve) =>
    client.stats((error, _server, stats) => resolve(error || !stats ? 'unknown' : String(stats.version ?? 'unknown'))),
  )
  const seeded = new Set<string>()

  return {
    name: 'memcached',
    versions: { server: `memcached ${server}`, client: `memjs ${packageVersion('memjs')}, one client`, url: where },
    notes: ['not extensible; a release is a get and a delete (memjs has no compare-and-swap)'],
    provider: memcachedLockProvider({ client, environment: main }),
    raw: rawMemcached(client, main),
    counted() {
      const { client: counted, counter } = countingProxy(client as MemcachedClient, COUNT)
      return {
        provider: memcachedLockProvider({ client: counted, environment: main }),
        raw: rawMemcached(counted, main),
        counter,
      }
    },
    async separateNode() {
      const own = await open()
      const { client: counted, counter } = countingProxy(own as MemcachedClient, COUNT)
      return {
        provider: memcachedLockProvider({ client: counted, environment: main }),
        counter,
        close: async () => own.close(),
      }
    },
    // One hash table: a second environment is only a key prefix.
    scaleMode: 'shared',
    async scaleSpace(label) {
      const env = environment(label)
      let keys: string[] = []
      return {
        provider: memcachedLockProvider({ client, environment: env }),
        async fill(names) {
          keys = names.map((name) => memcachedLockKey(name, env))
          for (const key of keys) seeded.add(key)
          await inParallel(keys, 64, (key) => client.set(key, 'another-node', { expires: 3600 }))
        },
        async drain() {
          await inParallel(keys, 64, (key) => client.delete(key))
          for (const key of keys) seeded.delete(key)
          keys = []
        },
      }
    },
    async close() {
      try {
        // Released locks are deleted by their release; what is left is seeded keys of a failed run.
        await inParallel([...seeded], 64, (key) => client.delete(key))
      } finally {
        for (const c of clients) c.close()
      }
    },
  }
}
