import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import { connectOrSkip } from './backends.ts'

/** The Redis server of the tests: `SHEDLOCK_REDIS_URL`, by default the CI machine's. */
export const REDIS_URL = process.env.SHEDLOCK_REDIS_URL ?? 'redis://127.0.0.1:6379'
/** The etcd server of the tests: `SHEDLOCK_ETCD_URL`, by default the one `scripts/services.sh` starts. */
export const ETCD_URL = process.env.SHEDLOCK_ETCD_URL ?? 'http://127.0.0.1:2379'

/** `url` with shedlock's keys under `environment`, as the CLI takes it. */
export function redisUrlIn(environment: string, url: string = REDIS_URL): string {
  return `${url}${url.includes('?') ? '&' : '?'}environment=${environment}`
}

/** Deletes what shedlock keeps under `environment`: its locks and its run history. */
export async function dropRedisEnvironment(redis: Redis, environment: string): Promise<void> {
  const keys = [
    ...(await redis.keys(`job-lock:${environment}:*`)),
    ...(await redis.keys(`shedlock-runs:${environment}:*`)),
  ]
  if (keys.length > 0) await redis.del(...keys)
}

/**
 * An ioredis client that has answered `PING`, without retries (a dead server fails at once);
 * `undefined` (skipped) when unreachable and not required.
 */
export function redisOrSkip(): Promise<Redis | undefined> {
  return connectOrSkip('redis', `${REDIS_URL} (SHEDLOCK_REDIS_URL)`, async () => {
    const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null })
    // ioredis rejects connect() with a generic "Connection is closed"; the socket error says why.
    let socketError: unknown
    client.on('error', (error) => {
      socketError ??= error
    })
    try {
      await client.connect()
      await client.ping()
    } catch (error) {
      client.disconnect()
      throw socketError ?? error
    }
    return client
  })
}

/**
 * A new ioredis client on the tests' server whose commands are counted: `sent` holds each
 * command's name, in the order sent (an `EVALSHA` answered `NOSCRIPT` adds its `EVAL`).
 */
export function countedRedis(): { client: Redis; sent: string[] } {
  const client = new Redis(REDIS_URL)
  const sent: string[] = []
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
    sent.push(command.name)
    return (send as (...args: unknown[]) => unknown)(command, ...rest)
  }) as typeof client.sendCommand
  return { client, sent }
}

/** An etcd3 client that has answered a read; `undefined` (skipped) when unreachable and not required. */
export function etcdOrSkip(): Promise<Etcd3 | undefined> {
  return connectOrSkip('etcd', `${ETCD_URL} (SHEDLOCK_ETCD_URL)`, async () => {
    const client = new Etcd3({ hosts: ETCD_URL })
    try {
      await client.get('shedlock-connection-probe').string()
    } catch (error) {
      client.close()
      throw error
    }
    return client
  })
}
