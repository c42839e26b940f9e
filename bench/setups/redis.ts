import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { Redis } from 'ioredis'
import { Mutex } from 'redis-semaphore'
import { redisLockProvider, redisRunLedger } from '../../src/providers/redis/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  packageVersion,
  type Peer,
  type RawOperations,
  rawOwner,
  redactUrl,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['set', 'evalsha', 'eval', 'get', 'del', 'pexpire'] }
// The provider's release script, byte for byte, so that both use the same cached SHA.
const DELETE_IF_OWNED = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`
const DELETE_SHA = createHash('sha1').update(DELETE_IF_OWNED).digest('hex')
// Databases of the scale measurement: the small and the large space must not share a keyspace.
const SCALE_DB = { small: 14, large: 15 } as const

/** redlock 4 is CommonJS without types: the part used here. */
interface RedlockLock {
  unlock(): Promise<void>
}
type RedlockConstructor = new (
  clients: Redis[],
  options: { retryCount: number },
) => { lock(resource: string, ttl: number): Promise<RedlockLock> }

/** The provider's commands issued through ioredis directly: `SET NX PX`, then the owner-checked delete script. */
function rawRedis(client: Redis, environment: string): RawOperations {
  return {
    async acquire(name) {
      const key = `job-lock:${environment}:${name}`
      const value = rawOwner()
      if ((await client.set(key, value, 'PX', 60_000, 'NX')) !== 'OK') return undefined
      return {
        async release() {
          try {
            await client.evalsha(DELETE_SHA, 1, key, value)
          } catch (error) {
            if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error
            await client.eval(DELETE_IF_OWNED, 1, key, value)
          }
        },
      }
    },
  }
}

async function open(url: string, db = 0): Promise<Redis> {
  const client = new Redis(url, { db, lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await client.connect()
    await client.ping()
  } catch (error) {
    client.disconnect()
    throw error
  }
  return client
}

/** Redis at `SHEDLOCK_REDIS_URL` (default `redis://127.0.0.1:6379`), through one ioredis client. */
export async function redisSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_REDIS_URL ?? 'redis://127.0.0.1:6379'
  const client = await open(url)
  const clients: Redis[] = [client]
  // The clients whose database holds keys of this run: the main one and the scale spaces'.
  const keyspaces: Redis[] = [client]
  const environment = `bench-${context.runId}`
  const info = await client.info('server')
  const server = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown'
  const provider = (c: Redis) => redisLockProvider({ client: c, environment })

  // Removes every key of this run (its environment, and the peers' names), in every database used.
  const sweep = async (c: Redis): Promise<void> => {
    for (const pattern of [`job-lock:${environment}:*`, `*${context.runId}*`]) {
      let cursor = '0'
      do {
        const [next, keys] = await c.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
        cursor = next
        if (keys.length > 0) await c.del(...keys)
      } while (cursor !== '0')
    }
  }

  return {
    name: 'redis',
    versions: {
      server: `Redis ${server}`,
      client: `ioredis ${packageVersion('ioredis')}, one connection`,
      url: redactUrl(url),
    },
    notes: [],
    provider: provider(client),
    raw: rawRedis(client, environment),
    counted() {
      const { client: counted, counter } = countingProxy(client, COUNT)
      return {
        provider: provider(counted),
        raw: rawRedis(counted, environment),
        counter,
        runLedger: redisRunLedger({ client: counted, environment }),
      }
    },
    async separateNode() {
      const own = await open(url)
      clients.push(own)
      const { client: counted, counter } = countingProxy(own, COUNT)
      return { provider: provider(counted), counter, close: async () => void (await own.quit()) }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const own = await open(url, SCALE_DB[label])
      clients.push(own)
      keyspaces.push(own)
      return {
        provider: provider(own),
        async fill(names) {
          const pipeline = own.pipeline()
          for (const name of names) pipeline.set(`job-lock:${environment}:${name}`, 'another-node', 'PX', 3_600_000)
          await pipeline.exec()
        },
        drain: () => sweep(own),
      }
    },
    async peers(): Promise<Peer[]> {
      const Redlock = createRequire(import.meta.url)('redlock') as RedlockConstructor
      const redlock = new Redlock([client], { retryCount: 0 })
      return [
        {
          label: 'redlock',
          description: `redlock ${packageVersion('redlock')}, one client, retryCount 0, lock() + unlock()`,
          maxConcurrency: Number.POSITIVE_INFINITY,
          async operation(worker) {
            const lock = await redlock.lock(`${context.runId}-redlock-${worker}`, 60_000)
            await lock.unlock()
          },
          async close() {},
        },
        {
          label: 'redis-semaphore',
          description: `redis-semaphore ${packageVersion('redis-semaphore')}, Mutex with lockTimeout 60 s, tryAcquire() + release()`,
          maxConcurrency: Number.POSITIVE_INFINITY,
          async operation(worker) {
            const mutex = new Mutex(client, `${context.runId}-semaphore-${worker}`, { lockTimeout: 60_000 })
            if (!(await mutex.tryAcquire()))
              throw new Error('redis-semaphore: tryAcquire() found an uncontended lock held')
            await mutex.release()
          },
          async close() {},
        },
      ]
    },
    async close() {
      try {
        for (const c of keyspaces) await sweep(c)
      } finally {
        await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())))
      }
    },
  }
}
