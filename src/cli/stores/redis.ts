import { redisLockProvider } from '../../providers/redis.ts'
import type { RedisClientLike } from '../../support/redis/redis-commands.ts'
import { CliError, messageOf } from '../command.ts'
import { importDriver, isNotFound } from '../import-driver.ts'
import type { LockRecord, Store, StoreOptions } from '../store.ts'
import { timed } from '../store.ts'
import { parseAddedValue } from '../added-value.ts'
import type { StoreUrl } from '../store-url.ts'

/** A connected client of either library, reduced to raw commands. */
interface RawRedis {
  readonly library: 'ioredis' | 'node-redis'
  /** The client itself, for the provider. */
  readonly client: RedisClientLike
  command(args: readonly string[]): Promise<unknown>
  close(): Promise<void>
}

// The provider's compare-and-delete, so that a force-release removes only the value that was shown.
const DELETE_IF_VALUE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`
const CONNECT_TIMEOUT_MS = 10_000

/**
 * Opens a `redis://` or `rediss://` URL with ioredis when it is installed, else with node-redis
 * (`redis`). `?environment=` and `?keyPrefix=` select the keys `<keyPrefix>:<environment>:<name>`
 * (defaults `job-lock` and `default`, as the provider's); other query parameters go to the client.
 * One server only: the CLI does not follow a Redis Cluster.
 */
export async function openRedisStore(url: StoreUrl, _options: StoreOptions): Promise<Store> {
  const own = new Map<string, string>()
  const driverUrl = new URL(url.raw)
  for (const key of ['environment', 'keyPrefix']) {
    const value = driverUrl.searchParams.get(key)
    if (value !== null) own.set(key, value)
    driverUrl.searchParams.delete(key)
  }
  const environment = own.get('environment') ?? 'default'
  const keyPrefix = own.get('keyPrefix') ?? 'job-lock'
  // The provider's own checks of environment and keyPrefix, before connecting: a port that is never called.
  const unused = async (): Promise<never> => {
    throw new Error('not connected')
  }
  redisLockProvider({ client: { client: 'validation', setIfAbsent: unused, evalSha: unused, eval: unused }, environment, keyPrefix })
  const raw = await connect(driverUrl.toString(), url)
  const provider = redisLockProvider({ client: raw.client, environment, keyPrefix })
  const prefix = `${keyPrefix}:${environment}:`
  const keyOf = (name: string): string => prefix + name
  const redisNow = async (): Promise<number> => {
    const [seconds, micros] = (await raw.command(['TIME'])) as [string, string]
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  }
  const read = async (name: string, now: number): Promise<LockRecord | undefined> => {
    const key = keyOf(name)
    const [value, pttl] = await Promise.all([raw.command(['GET', key]), raw.command(['PTTL', key])])
    if (value === null || value === undefined) return undefined
    const text = String(value)
    const added = parseAddedValue(text)
    const ttl = Number(pttl)
    // PTTL -1: a key without expiry, which no shedlock or Java ShedLock node writes; held until deleted.
    return { name, lockedAt: added.lockedAt, lockedBy: added.lockedBy, lockUntil: ttl >= 0 ? now + ttl : undefined, token: text }
  }
  const clock = "the Redis server's clock (TIME, plus each key's PTTL)"
  const label = `${url.redacted} (keys ${prefix}*)`

  return {
    kind: 'Redis',
    where: label,
    extensible: true,
    provider: () => provider,
    async list() {
      const now = await redisNow()
      const names: string[] = []
      let cursor = '0'
      do {
        const [next, keys] = (await raw.command(['SCAN', cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', '1000'])) as [string, string[]]
        cursor = String(next)
        for (const key of keys) names.push(String(key).slice(prefix.length))
      } while (cursor !== '0')
      const records = (await Promise.all([...new Set(names)].map((name) => read(name, now)))).filter((r): r is LockRecord => r !== undefined)
      return { now, clock, value: records.sort((a, b) => compare(a.name, b.name)) }
    },
    async find(name) {
      const now = await redisNow()
      return { now, clock, value: await read(name, now) }
    },
    async release(record) {
      return Number(await raw.command(['EVAL', DELETE_IF_VALUE, '1', keyOf(record.name), String(record.token)])) === 1
    },
    async init() {
      return [`Redis needs no setup: each lock is a key ${prefix}<name>, created when the lock is taken`]
    },
    async ping() {
      const info = String(await raw.command(['INFO', 'server']))
      return `Redis ${/^redis_version:(\S+)/m.exec(info)?.[1] ?? '?'} (${raw.library})`
    },
    structure: async () => [],
    async remove(name) {
      await raw.command(['DEL', keyOf(name)])
    },
    readClock: () => timed('TIME', 1, redisNow),
    clockDependence: 'Redis expires lock keys on its own clock, so host clocks only stamp the informational ADDED time',
    close: () => raw.close(),
  }
}

async function connect(driverUrl: string, url: StoreUrl): Promise<RawRedis> {
  let ioredis: { Redis: new (url: string, options: object) => IoredisLike } | undefined
  try {
    ioredis = await importDriver('ioredis', 'ioredis', 'redis://')
  } catch (error) {
    if (!isNotFound(error instanceof Error ? error.cause : undefined, 'ioredis')) throw error
  }
  let nodeRedis: { createClient(options: object): NodeRedisLike } | undefined
  if (!ioredis) {
    try {
      nodeRedis = await importDriver('redis', 'redis', 'redis://')
    } catch (error) {
      if (!isNotFound(error instanceof Error ? error.cause : undefined, 'redis')) throw error
      throw new CliError('redis:// URLs need the ioredis or the redis package, and neither is installed: run npm install ioredis', { cause: error })
    }
  }
  try {
    if (ioredis) return await connectIoredis(ioredis.Redis, driverUrl)
    return await connectNodeRedis(nodeRedis!.createClient, driverUrl)
  } catch (error) {
    if (error instanceof CliError) throw error
    throw new CliError(`cannot reach Redis at ${url.redacted}: ${messageOf(error)}; check the URL, the password and that the server runs`, { cause: error })
  }
}

interface IoredisLike {
  connect(): Promise<void>
  call(command: string, ...args: string[]): Promise<unknown>
  on(event: 'error', listener: (error: Error) => void): unknown
  quit(): Promise<unknown>
  disconnect(): void
}

async function connectIoredis(Redis: new (url: string, options: object) => IoredisLike, driverUrl: string): Promise<RawRedis> {
  // One attempt, no reconnection: a CLI command should fail at once, not wait for a server.
  const client = new Redis(driverUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: CONNECT_TIMEOUT_MS })
  let failure: Error | undefined
  client.on('error', (error) => {
    failure ??= error
  })
  try {
    await client.connect()
  } catch (error) {
    client.disconnect()
    throw failure ?? error
  }
  return {
    library: 'ioredis',
    client: client as unknown as RedisClientLike,
    command: ([command, ...args]) => client.call(command!, ...args),
    close: async () => {
      await client.quit().catch(() => client.disconnect())
    },
  }
}

interface NodeRedisLike {
  connect(): Promise<unknown>
  sendCommand(args: string[]): Promise<unknown>
  on(event: 'error', listener: (error: Error) => void): unknown
  close?(): Promise<void>
  quit(): Promise<unknown>
  destroy?(): void
  disconnect?(): Promise<void>
}

async function connectNodeRedis(createClient: (options: object) => NodeRedisLike, driverUrl: string): Promise<RawRedis> {
  const client = createClient({ url: driverUrl, socket: { reconnectStrategy: false, connectTimeout: CONNECT_TIMEOUT_MS } })
  let failure: Error | undefined
  // node-redis crashes the process on an 'error' event without a listener.
  client.on('error', (error) => {
    failure ??= error
  })
  try {
    await client.connect()
  } catch (error) {
    throw failure ?? error
  }
  return {
    library: 'node-redis',
    client: client as unknown as RedisClientLike,
    command: (args) => client.sendCommand([...args]),
    close: async () => {
      await (client.close ? client.close() : client.quit()).catch(() => client.destroy?.())
    },
  }
}

/** `text` as a literal in a SCAN MATCH pattern. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&')
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
