import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver, isNotFound, lookedFrom } from '../../support/import-driver.ts'
import { type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import type { StoreUrl } from '../../support/store-url.ts'
import { type RedisClient, toRedisCommands } from './client.ts'
import { redisKeySpace, redisLockKey } from './format.ts'
import { redisLockInspector } from './inspector.ts'
import { redisLockProvider } from './provider.ts'
import { redisRunLedger } from './run-ledger.ts'

/** A connected client of either library. */
interface ConnectedRedis {
  readonly library: 'ioredis' | 'node-redis'
  readonly client: RedisClient
  close(): Promise<void>
}

const CONNECT_TIMEOUT_MS = 10_000

/** `shedlock schema redis`: the key format; Redis needs nothing created. */
export function schema(table: string | undefined): string {
  if (table !== undefined) throw new UsageError('--table does not apply to redis: locks are keys')
  return `# Redis needs no schema: each lock is a key job-lock:<environment>:<name> holding ADDED:<ISO time>@<owner>, with an expiry.`
}

/**
 * Opens a `redis://` or `rediss://` URL with ioredis when it is installed, else with node-redis
 * (`redis`). `?environment=` and `?keyPrefix=` select the keys `<keyPrefix>:<environment>:<name>`
 * (defaults `job-lock` and `default`, as the provider's); other query parameters go to the client.
 * One server only: the CLI does not follow a Redis Cluster.
 */
export async function open(url: StoreUrl, _options: StoreOptions): Promise<StoreAdmin> {
  const own = new Map<string, string>()
  const driverUrl = new URL(url.raw)
  for (const key of ['environment', 'keyPrefix']) {
    const value = driverUrl.searchParams.get(key)
    if (value !== null) own.set(key, value)
    driverUrl.searchParams.delete(key)
  }
  // The provider's own checks of environment and keyPrefix, before connecting.
  const space = redisKeySpace({ environment: own.get('environment'), keyPrefix: own.get('keyPrefix') })
  const options = { environment: space.environment, keyPrefix: space.keyPrefix }
  const redis = await connect(driverUrl.toString(), url)
  const commands = toRedisCommands(redis.client)
  // Both adapters have command(): the CLI only ever passes ioredis and node-redis clients.
  const command = (args: readonly string[]): Promise<unknown> => commands.command!(args)
  // Tokens always: a counter key beside each lock key, which needs nothing created (shedlock run
  // hands them to its command as SHEDLOCK_FENCING_TOKEN).
  const provider = redisLockProvider({ client: redis.client, ...options, fencingTokens: true })
  const inspector = redisLockInspector({ client: redis.client, ...options })

  return {
    kind: 'Redis',
    where: `${url.redacted} (keys ${space.prefix}*)`,
    extensible: true,
    provider: (holder) =>
      holder?.lockedBy === undefined
        ? provider
        : redisLockProvider({ client: redis.client, ...options, fencingTokens: true, lockedBy: holder.lockedBy }),
    inspector,
    runLedger: redisRunLedger({ client: redis.client, environment: space.environment }),
    // Streams are created by the first run, capped and expired by the ledger itself.
    runLedgerReady: async () => true,
    init: async () => [
      `Redis needs no setup: each lock is a key ${space.prefix}<name>, created when the lock is taken`,
    ],
    async ping() {
      const info = String(await command(['INFO', 'server']))
      return `Redis ${/^redis_version:(\S+)/m.exec(info)?.[1] ?? '?'} (${redis.library})`
    },
    structure: async () => [],
    async remove(name) {
      await command(['DEL', redisLockKey(space, name)])
    },
    readClock: () =>
      timed('TIME', 1, async () => {
        const [seconds, micros] = (await command(['TIME'])) as [unknown, unknown]
        return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
      }),
    clockDependence: 'Redis expires lock keys on its own clock, so host clocks only stamp the informational ADDED time',
    close: () => redis.close(),
  }
}

async function connect(driverUrl: string, url: StoreUrl): Promise<ConnectedRedis> {
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
      throw new CliError(
        `redis:// URLs need the ioredis or the redis package, and neither is installed: ${lookedFrom()}; run npm install ioredis in your project`,
        { cause: error },
      )
    }
  }
  try {
    if (ioredis) return await connectIoredis(ioredis.Redis, driverUrl)
    return await connectNodeRedis(nodeRedis!.createClient, driverUrl)
  } catch (error) {
    if (error instanceof CliError) throw error
    throw new CliError(
      `cannot reach Redis at ${url.redacted}: ${firstLine(error)}; check the URL, the password and that the server runs`,
      { cause: error },
    )
  }
}

interface IoredisLike {
  connect(): Promise<void>
  on(event: 'error', listener: (error: Error) => void): unknown
  quit(): Promise<unknown>
  disconnect(): void
}

async function connectIoredis(
  Redis: new (url: string, options: object) => IoredisLike,
  driverUrl: string,
): Promise<ConnectedRedis> {
  // One attempt, no reconnection: a CLI command should fail at once, not wait for a server.
  const client = new Redis(driverUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
    connectTimeout: CONNECT_TIMEOUT_MS,
  })
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
  // ioredis before 5.10 resolves connect() when AUTH is refused and only emits the refusal
  // (WRONGPASS); its next command would fail with a bare "Connection is closed".
  if (failure) {
    client.disconnect()
    throw failure
  }
  return {
    library: 'ioredis',
    client: client as unknown as RedisClient,
    close: async () => {
      await client.quit().catch(() => client.disconnect())
    },
  }
}

interface NodeRedisLike {
  connect(): Promise<unknown>
  on(event: 'error', listener: (error: Error) => void): unknown
  close?(): Promise<void>
  quit(): Promise<unknown>
  destroy?(): void
}

async function connectNodeRedis(
  createClient: (options: object) => NodeRedisLike,
  driverUrl: string,
): Promise<ConnectedRedis> {
  const client = createClient({
    url: driverUrl,
    socket: { reconnectStrategy: false, connectTimeout: CONNECT_TIMEOUT_MS },
  })
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
    client: client as unknown as RedisClient,
    close: async () => {
      await (client.close ? client.close() : client.quit()).catch(() => client.destroy?.())
    },
  }
}
