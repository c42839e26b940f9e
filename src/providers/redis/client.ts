import { LockConfigurationError } from '../../core/errors.ts'
import { type RedisCommands, requireMethods } from './commands.ts'
import { fromIoredis, type IoredisClient } from './ioredis-commands.ts'
import { fromNodeRedis, type NodeRedisClient } from './node-redis-commands.ts'

/** What `redisLockProvider` accepts as `client`. */
export type RedisClient = IoredisClient | NodeRedisClient | RedisCommands

/** @deprecated Renamed to {@link RedisClient}; this alias goes in the next major. */
export type RedisClientLike = RedisClient

/**
 * Picks the adapter for `client`, by shape rather than by class (the libraries are not imported):
 * - a {@link RedisCommands} port (it has `setIfAbsent`) is used as it is;
 * - ioredis `Redis` and `Cluster` instances have a boolean `isCluster` and lower-case `evalsha`;
 * - node-redis clients and clusters have camel-case `evalSha` and `sendCommand`.
 *
 * @throws LockConfigurationError for anything else, saying what to pass.
 */
export function toRedisCommands(client: RedisClient): RedisCommands {
  const c = client as unknown as Record<string, unknown> | null | undefined
  if (c === null || typeof c !== 'object') {
    throw new LockConfigurationError(
      `redis: pass your Redis client as { client }: an ioredis Redis or Cluster, a node-redis createClient() or createCluster(), or a RedisCommands port; got ${c === null ? 'null' : typeof c}`,
    )
  }
  if (typeof c.setIfAbsent === 'function') {
    requireMethods(c, 'RedisCommands', ['setIfAbsent', 'evalSha', 'eval'])
    return client as RedisCommands
  }
  if (typeof c.isCluster === 'boolean' && typeof c.evalsha === 'function') return fromIoredis(client as IoredisClient)
  if (typeof c.evalSha === 'function' && typeof c.sendCommand === 'function')
    return fromNodeRedis(client as NodeRedisClient)
  throw new LockConfigurationError(
    'redis: { client } is not a recognised Redis client: pass an ioredis Redis or Cluster, a node-redis client from createClient() or createCluster(), or wrap your client with fromIoredis(), fromNodeRedis() or your own RedisCommands port',
  )
}
