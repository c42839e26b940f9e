import { createHash } from 'node:crypto'
import { type Clock, systemClock } from '../core/clock.ts'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { defineLock } from '../support/define-lock.ts'
import { lockOwner } from '../support/lock-owner.ts'
import { type RedisClientLike, type RedisCommands, toRedisCommands } from '../support/redis/redis-commands.ts'
import { OperationTimeoutError, withTimeout } from '../support/with-timeout.ts'

export {
  fromIoredis,
  fromNodeRedis,
  type IoredisClient,
  type NodeRedisClient,
  type NodeRedisEvalOptions,
  type RedisClientLike,
  type RedisCommands,
  toRedisCommands,
} from '../support/redis/redis-commands.ts'

/** Options of {@link redisLockProvider}. */
export interface RedisLockProviderOptions {
  /**
   * Your connected client: an ioredis (5 or 6) `Redis` or `Cluster`, a node-redis (4 to 6)
   * client from `createClient()` or `createCluster()`, or a {@link RedisCommands} port (see
   * `fromIoredis`, `fromNodeRedis`). The kind is recognised by shape: see `toRedisCommands`.
   * The provider never connects, closes or configures it.
   */
  client: RedisClientLike
  /** Second part of every key, `<keyPrefix>:<environment>:<name>`. Must not be empty or contain `:`. @default "default" */
  environment?: string
  /** First part of every key, `<keyPrefix>:<environment>:<name>`. Must not be empty or contain `:`. @default "job-lock" */
  keyPrefix?: string
  /**
   * Prefix of the owner in each value. Each acquisition stores
   * `ADDED:<ISO time>@<lockedBy>:<pid>:<random>`, unique per acquisition. @default the host name
   */
  lockedBy?: string
  /**
   * How long one Redis operation may take, in milliseconds or a duration string. Past it, the
   * operation rejects with `LockProviderError` and the task does not run. It bounds the wait of
   * a client that queues commands while Redis is down (node-redis does so without end by
   * default; ioredis until `maxRetriesPerRequest` reconnection attempts failed). @default "5s"
   */
  timeout?: Duration
  /** Clock used to turn `lockAtMostUntil` and `lockAtLeastUntil` into relative expiries. @default systemClock */
  clock?: Clock
}

const PROVIDER = 'redis'

/** A Lua script and its SHA-1, the name EVALSHA knows it by. */
interface Script {
  readonly source: string
  readonly sha1: string
}

const script = (source: string): Script => ({ source, sha1: createHash('sha1').update(source).digest('hex') })

// Compare-and-set: only the acquisition whose unique value is stored may touch the key, so a
// holder whose lock expired (and was taken by another node) can neither prolong nor delete the
// new holder's lock. Java ShedLock does the same with safeUpdate=true; here it is the only mode.
// GET and PEXPIRE/DEL run atomically because a script runs without interleaving.
const EXPIRE_IF_OWNED = script(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`)
const DELETE_IF_OWNED = script(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`)

type Action = 'acquire' | 'extend' | 'release'

/**
 * Locks in Redis keys in Java ShedLock's format, so Java and Node nodes can share locks: the key
 * is `<keyPrefix>:<environment>:<name>` (default `job-lock:default:<name>`), the value
 * `ADDED:<ISO-8601 time, 3 fraction digits>@<owner>`, unique per acquisition (Java's values are
 * `ADDED:<time>@<host>:<uuid>`; values are opaque to other nodes, so both kinds mix).
 *
 * - acquire: one `SET key value NX PX <lockAtMostUntil - now>`; reply `OK` means acquired;
 * - unlock: compare-and-delete when `lockAtLeastUntil` has passed, otherwise compare-and-`PEXPIRE`
 *   to what remains of it (a Lua script, one key);
 * - extend: compare-and-`PEXPIRE` to the new `lockAtMostFor`; resolves to the new handle when this
 *   acquisition still held the key.
 *
 * Expiry is decided on the Redis server's clock: `PX` and `PEXPIRE` are relative, so the app
 * clock only measures durations and clock skew between nodes does not matter.
 *
 * Lock names are used in keys as they are: Redis keys are binary-safe, and neither `keyPrefix`
 * nor `environment` may contain `:`, so every name (with `:`, `/`, spaces, any Unicode) maps to
 * its own key, the same key Java ShedLock uses. Names have no length limit below Redis's 512 MB.
 *
 * Works with Redis Cluster (every command names one key, routed by the Cluster client) and with
 * any Redis from 2.6.12 (`SET … NX PX`, Lua scripts).
 *
 * Caveats, none of which the provider can detect:
 * - Redis replicates asynchronously, so a failover can promote a replica that has not seen a
 *   lock yet and grant it again;
 * - a Redis without persistence (RDB/AOF) forgets every lock when it restarts;
 * - every lock key has a TTL, so a `maxmemory-policy` that evicts (`volatile-*`, `allkeys-*`) may
 *   drop a held lock under memory pressure; use `noeviction` for a Redis that holds locks.
 *
 * A failed operation rejects with `LockProviderError` (its `cause` is the client's error). While
 * Redis is down, clients keep commands queued until they reconnect; `timeout` bounds that wait,
 * and an acquisition that reaches Redis after its timeout is released as soon as it lands.
 * With node-redis, attach an `'error'` listener to the client: without one, a dropped
 * connection crashes the process.
 *
 * ```ts
 * import { Redis } from 'ioredis'
 * import { redisLockProvider } from 'shedlock/redis'
 * const provider = redisLockProvider({ client: new Redis(url), environment: 'production' })
 * ```
 *
 * @throws LockConfigurationError for a missing or unrecognised client, an empty `keyPrefix`,
 *   `environment` or `lockedBy`, a `keyPrefix` or `environment` containing `:`, or a `timeout`
 *   that is not a positive duration.
 */
export function redisLockProvider(options: RedisLockProviderOptions): ExtensibleLockProvider {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('redis: pass options { client, environment?, keyPrefix?, lockedBy? }')
  }
  const commands = toRedisCommands(options.client)
  const keyPrefix = keyPart('keyPrefix', options.keyPrefix, 'job-lock')
  const environment = keyPart('environment', options.environment, 'default')
  if (options.lockedBy !== undefined && (typeof options.lockedBy !== 'string' || options.lockedBy.trim() === '')) {
    throw new LockConfigurationError(`redis: lockedBy must be a non-empty string (it starts the owner part of each value), got ${JSON.stringify(options.lockedBy)}`)
  }
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('redis: timeout must be longer than 0ms')
  const clock = options.clock ?? systemClock
  const keyOf = (name: string): string => `${keyPrefix}:${environment}:${name}`

  const guard = async <T>(action: Action, name: string, run: () => Promise<T>, late?: (value: T) => void): Promise<T> => {
    try {
      return await withTimeout(run(), timeout, { store: 'Redis', late })
    } catch (error) {
      throw describeRedisError(error, action, name, commands.client, timeout)
    }
  }

  // EVALSHA sends 40 bytes instead of the script, so each operation is one round trip once the
  // script is cached. Redis forgets its script cache on restart, failover and SCRIPT FLUSH, and
  // each Cluster node has its own: the first call on such a node gets NOSCRIPT, and EVAL both
  // runs the script and caches it there. SCRIPT LOAD up front would have to reach every node.
  const run = async (s: Script, key: string, args: readonly string[]): Promise<unknown> => {
    try {
      return await commands.evalSha(s.sha1, key, args)
    } catch (error) {
      if (!isNoScript(error)) throw error
      return commands.eval(s.source, key, args)
    }
  }

  const release = async (key: string, value: string, keepFor: number): Promise<void> => {
    if (keepFor <= 0) await run(DELETE_IF_OWNED, key, [value])
    else await run(EXPIRE_IF_OWNED, key, [value, String(keepFor)])
  }

  return {
    name: PROVIDER,
    async lock(configuration) {
      const { name } = configuration
      const key = keyOf(name)
      const now = clock.now()
      const value = `ADDED:${new Date(now).toISOString()}@${lockOwner(options.lockedBy)}`
      // PX must be at least 1: a configuration whose lockAtMostUntil has passed still gets a
      // (1 ms) lock rather than a Redis syntax error.
      const ttl = Math.max(1, configuration.lockAtMostUntil.getTime() - now)
      const acquired = await guard('acquire', name, () => commands.setIfAbsent(key, value, ttl), (late) => {
        // The SET timed out here but reached Redis later (a client queues commands while it
        // reconnects): nobody uses that acquisition, so free it rather than block the name
        // until lockAtMostFor. The delete is owner-checked, so it touches nothing else.
        if (late) run(DELETE_IF_OWNED, key, [value]).catch(() => {})
      })
      if (!acquired) return undefined
      return defineLock(configuration, {
        clock,
        unlock: (current) => guard('release', current.name, () => release(key, value, current.lockAtLeastUntil.getTime() - clock.now())),
        extend: (next) =>
          guard('extend', next.name, async () => Number(await run(EXPIRE_IF_OWNED, key, [value, String(Math.max(1, next.lockAtMostUntil.getTime() - clock.now()))])) === 1),
      })
    },
  }
}

function keyPart(option: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback
  if (typeof value !== 'string' || value === '' || value.includes(':')) {
    throw new LockConfigurationError(
      `redis: ${option} must be a non-empty string without ':' (keys are <keyPrefix>:<environment>:<name>, and ':' would let two settings share keys), got ${JSON.stringify(value)}`,
    )
  }
  return value
}


function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

// Client-side failures that mean "Redis is not reachable right now" (ioredis, node-redis, Node sockets).
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE'])
const UNREACHABLE_NAMES = new Set([
  'MaxRetriesPerRequestError',
  'ClusterAllFailedError',
  'ClientOfflineError',
  'SocketClosedUnexpectedlyError',
  'ConnectionTimeoutError',
  'SocketTimeoutError',
  'RootNodesUnavailableError',
  'ReconnectStrategyError',
])
const UNREACHABLE_MESSAGES = [/^Connection is closed/, /enableOfflineQueue options is false/, /^The client is offline/, /^Socket closed unexpectedly/, /^None of startup nodes is available/]

const OUTCOME: Readonly<Record<Action, string>> = {
  acquire: 'the task was not run',
  extend: 'the lock was not extended',
  release: 'the lock stays until it expires',
}

function describeRedisError(error: unknown, action: Action, lockName: string, client: string, timeout: number): LockProviderError {
  if (error instanceof LockProviderError) return error
  const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown }
  // Client messages do not carry passwords, but a connection URL in some wrapper's message might.
  const detail = (error instanceof Error ? error.message : String(error)).replace(/(\/\/[^:/@\s]*):[^@\s]*@/g, '$1:***@')
  const reply = /^([A-Z]+)\b/.exec(detail)?.[1]
  const outcome = OUTCOME[action]
  const unreachable = `Redis is unreachable (${detail}); ${outcome}. Check the server; the provider works again once the client has reconnected`
  let advice: string
  if (error instanceof OperationTimeoutError) {
    advice = `Redis did not answer within ${timeout}ms (the provider's timeout); ${outcome}. Check the server and the client's connection; raise timeout if Redis is just slow`
  } else if (name === 'ClientClosedError' || detail === 'The client is closed') {
    advice = `the ${client} client is closed (${detail}); ${outcome}. Call await client.connect() before taking locks, and do not close the client while locks are used`
  } else if ((typeof code === 'string' && UNREACHABLE_CODES.has(code)) || (typeof name === 'string' && UNREACHABLE_NAMES.has(name)) || UNREACHABLE_MESSAGES.some((m) => m.test(detail))) {
    advice = unreachable
  } else if (reply === 'MOVED' || reply === 'ASK' || reply === 'CROSSSLOT') {
    advice = `the key lives on another Redis Cluster node (${detail}); pass a Cluster client (ioredis new Cluster(...) or node-redis createCluster(...))`
  } else if (reply === 'READONLY') {
    advice = `the client is connected to a read-only replica (${detail}); point it at the master`
  } else if (reply === 'NOAUTH' || reply === 'WRONGPASS' || reply === 'NOPERM') {
    advice = `Redis refused the command (${detail}); the client's user needs SET, EVAL and EVALSHA on the lock keys`
  } else if (reply === 'OOM') {
    advice = `Redis is out of memory (${detail}); free memory or raise maxmemory`
  } else if (reply === 'LOADING' || reply === 'BUSY' || reply === 'CLUSTERDOWN' || reply === 'TRYAGAIN' || reply === 'MASTERDOWN') {
    advice = `Redis cannot serve the command right now (${detail}); ${outcome}. The provider works again once Redis has recovered`
  } else {
    advice = detail
  }
  return new LockProviderError(`redis: could not ${action} lock "${lockName}": ${advice}`, { cause: withoutCredentials(error), provider: PROVIDER, lockName })
}

/**
 * ioredis attaches the failed command to its reply errors (`error.command.args`): for the AUTH or
 * HELLO it sends on connect, that is the password, which `console.log(error)` would print with
 * the cause. Those arguments are blanked in place.
 */
function withoutCredentials(error: unknown): unknown {
  const command = (error as { command?: { name?: unknown; args?: unknown } } | null)?.command
  if (command && typeof command.name === 'string' && /^(auth|hello)$/i.test(command.name) && Array.isArray(command.args)) {
    command.args = command.args.map(() => '***')
  }
  return error
}
