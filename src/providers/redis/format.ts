import { createHash } from 'node:crypto'
import { LockConfigurationError, type LockProviderError } from '../../core/errors.ts'
import {
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  SOCKET_FAILURE_CODES,
  type StoreAction,
  storeError,
} from '../../support/store-errors.ts'
import { keyTooLong } from '../../support/lock-request.ts'
import { OperationTimeoutError } from '../../support/with-timeout.ts'
import type { RedisCommands } from './commands.ts'

// Java ShedLock's lock keys in Redis, the Lua scripts that change them, and what Redis's errors
// mean. The provider, the inspector and the CLI read them from here. Values are the shared
// `ADDED:<time>@<owner>` (support/added-value.ts).

export const PROVIDER = 'redis'
export const DEFAULT_KEY_PREFIX = 'job-lock'
export const DEFAULT_ENVIRONMENT = 'default'

// Redis's proto-max-bulk-len (512 MiB by default) bounds every argument: on a longer key Redis
// answers "Protocol error: invalid bulk length" and closes the connection, failing every command
// on it. 64 KiB stay for an ioredis keyPrefix, which the client adds to the key.
export const MAX_KEY_BYTES: number = 512 * 1024 * 1024 - 64 * 1024

/** Where in Redis the locks of one fleet live: the two fixed parts of `<keyPrefix>:<environment>:<name>`. */
export interface RedisKeySpace {
  readonly keyPrefix: string
  readonly environment: string
  /** `<keyPrefix>:<environment>:`, the start of every lock key. */
  readonly prefix: string
}

/**
 * The key space of the options `keyPrefix` and `environment` (defaults `job-lock` and `default`),
 * checked as the provider checks them.
 * @throws LockConfigurationError for an empty part or one that contains `:`.
 */
export function redisKeySpace(options: { keyPrefix?: unknown; environment?: unknown }): RedisKeySpace {
  const keyPrefix = keyPart('keyPrefix', options.keyPrefix, DEFAULT_KEY_PREFIX)
  const environment = keyPart('environment', options.environment, DEFAULT_ENVIRONMENT)
  return { keyPrefix, environment, prefix: `${keyPrefix}:${environment}:` }
}

/** Default first part of the run ledger's keys: not the locks' prefix, so no SCAN for locks finds a run history. */
export const DEFAULT_RUNS_KEY_PREFIX = 'shedlock-runs'

/** The key space of the run ledger's streams, `<keyPrefix>:<environment>:<name>` (defaults `shedlock-runs` and `default`), checked as the lock key space is. */
export function redisRunsKeySpace(options: { keyPrefix?: unknown; environment?: unknown }): RedisKeySpace {
  return redisKeySpace({ keyPrefix: options.keyPrefix ?? DEFAULT_RUNS_KEY_PREFIX, environment: options.environment })
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

/**
 * The key of lock `name`: `<keyPrefix>:<environment>:<name>`, the name as it is (Redis keys are
 * binary-safe, and neither fixed part contains `:`, so every name has its own key, Java's).
 */
export function redisLockKey(space: RedisKeySpace, name: string): string {
  return space.prefix + name
}

/**
 * {@link redisLockKey}, checked before anything is sent: Redis closes the connection on a key over
 * {@link MAX_KEY_BYTES}, failing every command on it.
 * @throws LockConfigurationError for a name whose key is longer.
 */
export function checkedRedisLockKey(space: RedisKeySpace, name: string): string {
  const key = space.prefix + name
  const tooLong = keyTooLong(PROVIDER, name, key, MAX_KEY_BYTES, space.prefix)
  if (tooLong) throw tooLong
  return key
}

/** The lock name of `key`, the inverse of {@link redisLockKey}; `undefined` for a key outside the key space. */
export function redisLockName(space: RedisKeySpace, key: string): string | undefined {
  return key.startsWith(space.prefix) ? key.slice(space.prefix.length) : undefined
}

/**
 * The `SCAN … MATCH` pattern of every key of the key space (of the names that start with
 * `namePrefix`): its prefix as a literal, then `*`.
 * `clientPrefix` is what the client adds to the keys it sends (its `keyPrefix` option), which
 * clients do not add to patterns.
 */
export function redisScanPattern(space: RedisKeySpace, clientPrefix: string = '', namePrefix: string = ''): string {
  return `${(clientPrefix + space.prefix + namePrefix).replace(/[*?[\]\\]/g, '\\$&')}*`
}

/** A Lua script and its SHA-1, the name EVALSHA knows it by. */
export interface Script {
  readonly source: string
  readonly sha1: string
}

function script(source: string): Script {
  return { source, sha1: createHash('sha1').update(source).digest('hex') }
}

// Compare-and-set: only the acquisition whose unique value is stored may touch the key, so a
// holder whose lock expired (and was taken by another node) can neither prolong nor delete the
// new holder's lock. Java ShedLock does the same with safeUpdate=true; here it is the only mode.
// GET and PEXPIRE/DEL run atomically because a script runs without interleaving.

/** `EXPIRE_IF_OWNED key value ms`: `PEXPIRE key ms` if `key` holds `value`; 1 when it did. Unlock within lockAtLeastFor, and extend. */
export const EXPIRE_IF_OWNED: Script = script(
  `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`,
)

/** `DELETE_IF_OWNED key value`: `DEL key` if `key` holds `value`; 1 when it did. Unlock, and the inspector's force-release. */
export const DELETE_IF_OWNED: Script = script(
  `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`,
)

/**
 * `RELEASE_MANY key… value ms …`: for each key, with its pair of arguments in the keys' order, if
 * it holds `value`: `PEXPIRE key ms` when `ms` is above 0 (what is left of lockAtLeastFor), else
 * `DEL key`. A turn's releases in one call (the task locks of a tick's slot runs); the keys are in
 * different Cluster slots: single-node Redis only.
 */
export const RELEASE_MANY: Script = script(
  `for i = 1, #KEYS do if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then local ms = tonumber(ARGV[2 * i]) ` +
    `if ms > 0 then redis.call('PEXPIRE', KEYS[i], ms) else redis.call('DEL', KEYS[i]) end end end return #KEYS`,
)

/**
 * `ACQUIRE_FENCED lockKey counterKey value ms`: `SET lockKey value NX PX ms` and, when it set the
 * key, `INCR counterKey`: the new count, the acquisition's fencing token; 0 when the lock is held.
 * Both keys are declared, in one slot (see `redisFenceKey`). A counter INCR refuses (not an
 * integer, or at its end) deletes the key just set and answers the error, so that no lock is
 * held without a token.
 */
export const ACQUIRE_FENCED: Script = script(
  `if #KEYS ~= 2 then return redis.error_reply('shedlock: ACQUIRE_FENCED needs the lock key and the counter key; a RedisCommands port must pass moreKeys') end ` +
    `if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end ` +
    `local n = redis.pcall('INCR', KEYS[2]) ` +
    `if type(n) == 'table' and n.err then redis.call('DEL', KEYS[1]) end return n`,
)

/**
 * `ACQUIRE_PAIRS perPair claimKey lockKey [counterKey] … claimValue claimMs lockValue lockMs …`:
 * slot records and their tasks' locks, pair by pair, in one call (see `LockPair`; a tick's pairs
 * are batched): `SET claimKey claimValue NX PX claimMs`; only when it set the key, `SET lockKey
 * lockValue NX PX lockMs`; when that set it too and the pair has a counter key (`perPair` 3:
 * fencing tokens), `INCR counterKey`. Answers `{claimed, locked}` per pair, flattened: 0 or 1 each,
 * `locked` the new count (the lock's fencing token) with a counter key. A refused INCR deletes its
 * pair's two keys and answers `{-1, error}` for that pair alone: the other pairs' keys are set and
 * must reach their callers. Records get no counter: nobody fences with a slot record's token, and
 * a counter per slot would be a key kept for good. The keys are in different Cluster slots:
 * single-node Redis only.
 */
export const ACQUIRE_PAIRS: Script = script(
  `local per = tonumber(ARGV[1]) local out = {} ` +
    `for i = 0, #KEYS / per - 1 do ` +
    `local k, a = i * per, 2 + i * 4 local claimed, locked = 0, 0 ` +
    `if redis.call('SET', KEYS[k + 1], ARGV[a], 'NX', 'PX', ARGV[a + 1]) then claimed = 1 ` +
    `if redis.call('SET', KEYS[k + 2], ARGV[a + 2], 'NX', 'PX', ARGV[a + 3]) then locked = 1 ` +
    `if per == 3 then local n = redis.pcall('INCR', KEYS[k + 3]) ` +
    `if type(n) == 'table' and n.err then redis.call('DEL', KEYS[k + 1], KEYS[k + 2]) claimed, locked = -1, n.err else locked = n end ` +
    `end end end out[#out + 1] = claimed out[#out + 1] = locked end return out`,
)

/**
 * `READ_LOCK key`: one lock key read at one instant, on the clock of the node that holds it
 * (which decides its expiry): `{type}` when the key is missing (`none`) or not a string (not a
 * lock), else `{'string', value, pttl, seconds, microseconds}`, the last two from `TIME`. A
 * script, so that the value, its expiry and the time cannot come from different moments, and so
 * that a Cluster client routes it by its key. Reads only: `TIME` is allowed in any script that
 * writes nothing.
 */
export const READ_LOCK: Script = script(
  `local t = redis.call('TYPE', KEYS[1])['ok'] if t ~= 'string' then return {t} end local now = redis.call('TIME') ` +
    `return {t, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), now[1], now[2]}`,
)

/**
 * `APPEND_RUN key runId json maxEntries ttlMs`: appends a run's state to the task's stream,
 * trimmed to `maxEntries` entries, and (re)sets the stream's expiry. Redis 5 and 6 replicate a
 * script as a whole unless told to replicate its effects, and refuse a write after XADD's
 * generated id without that; Redis 7 always replicates effects.
 */
export const APPEND_RUN: Script = script(
  `if redis.replicate_commands then redis.replicate_commands() end ` +
    `redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '*', 'id', ARGV[1], 'run', ARGV[2]) redis.call('PEXPIRE', KEYS[1], ARGV[4]) return 1`,
)

/**
 * `APPEND_RUNS key… maxEntries ttlMs runId json …`: APPEND_RUN for each key with its run (`runId`
 * and `json` the key's pair of arguments, in the keys' order): a turn's ended runs in one call.
 * The keys are in different Cluster slots: single-node Redis only.
 */
export const APPEND_RUNS: Script = script(
  `if redis.replicate_commands then redis.replicate_commands() end ` +
    `for i = 1, #KEYS do redis.call('XADD', KEYS[i], 'MAXLEN', ARGV[1], '*', 'id', ARGV[1 + 2 * i], 'run', ARGV[2 + 2 * i]) ` +
    `redis.call('PEXPIRE', KEYS[i], ARGV[2]) end return #KEYS`,
)

/**
 * `READ_RUNS key count`: the task's newest `count` stream entries, newest first; none when the
 * key is not a stream. A script so that a Cluster client routes it by the key.
 */
export const READ_RUNS: Script = script(
  `if redis.call('TYPE', KEYS[1])['ok'] ~= 'stream' then return {} end return redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])`,
)

/**
 * Runs `s` on the node that holds `key`: `EVALSHA` (40 bytes instead of the script, one round
 * trip once cached), and `EVAL` when that node does not have it cached (`NOSCRIPT`: Redis forgets
 * its script cache on restart, failover and SCRIPT FLUSH, and each Cluster node has its own; EVAL
 * both runs the script and caches it there). SCRIPT LOAD up front would have to reach every node.
 */
export async function runScript(
  commands: RedisCommands,
  s: Script,
  key: string,
  args: readonly string[],
): Promise<unknown> {
  try {
    return await commands.evalSha(s.sha1, key, args)
  } catch (error) {
    if (!isNoScript(error)) throw error
    return commands.eval(s.source, key, args)
  }
}

/**
 * Runs `s` over several keys, as {@link runScript} runs it over one: the keys must be on one node
 * (single-node Redis), and the port must pass `moreKeys` (the adapters do).
 */
export async function runScriptOnKeys(
  commands: RedisCommands,
  s: Script,
  keys: readonly [string, ...string[]],
  args: readonly string[],
): Promise<unknown> {
  const [key, ...moreKeys] = keys
  try {
    return await commands.evalSha(s.sha1, key, args, moreKeys)
  } catch (error) {
    if (!isNoScript(error)) throw error
    return commands.eval(s.source, key, args, moreKeys)
  }
}

/** Whether `error` is Redis's `NOSCRIPT` reply: the script is not in that node's cache. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

// Client-side failures that mean "Redis is not reachable right now" (ioredis, node-redis, Node sockets).
const UNREACHABLE_CODES: ReadonlySet<string> = new Set(SOCKET_FAILURE_CODES)
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
const UNREACHABLE_MESSAGES = [
  /^Connection is closed/,
  /enableOfflineQueue options is false/,
  /^The client is offline/,
  /^Socket closed unexpectedly/,
  /^None of startup nodes is available/,
]

/**
 * What a Redis error means for the lock and what to do about it. `client` names the client
 * library (`ioredis`, `node-redis`), `timeout` is the caller's timeout in milliseconds, `role`
 * who calls (`provider` or `inspector`).
 */
export function describeRedisError(
  error: unknown,
  action: StoreAction,
  lockName: string,
  client: string,
  timeout: number,
  role: string = 'provider',
): LockProviderError {
  const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown }
  const detail = redactUrlPasswords(messageOf(error))
  const reply = /^([A-Z]+)\b/.exec(detail)?.[1]
  const outcome = outcomeOf(action)
  const unreachable = `Redis is unreachable (${detail}); ${outcome}. Check the server; the ${role} works again once the client has reconnected`
  let advice: string
  if (error instanceof OperationTimeoutError) {
    advice = `Redis did not answer within ${timeout}ms (the ${role}'s timeout); ${outcome}. Check the server and the client's connection; raise timeout if Redis is just slow`
  } else if (name === 'ClientClosedError' || detail === 'The client is closed') {
    advice = `the ${client} client is closed (${detail}); ${outcome}. Call await client.connect() before taking locks, and do not close the client while locks are used`
  } else if (
    (typeof code === 'string' && UNREACHABLE_CODES.has(code)) ||
    (typeof name === 'string' && UNREACHABLE_NAMES.has(name)) ||
    UNREACHABLE_MESSAGES.some((m) => m.test(detail))
  ) {
    advice = unreachable
  } else if (reply === 'MOVED' || reply === 'ASK' || reply === 'CROSSSLOT') {
    advice = `the key lives on another Redis Cluster node (${detail}); pass a Cluster client (ioredis new Cluster(...) or node-redis createCluster(...))`
  } else if (reply === 'READONLY') {
    advice = `the client is connected to a read-only replica (${detail}); point it at the master`
  } else if (reply === 'NOAUTH' || reply === 'WRONGPASS' || reply === 'NOPERM') {
    advice = `Redis refused the command (${detail}); the client's user needs SET, EVAL and EVALSHA on the lock keys (and SCAN and TIME to inspect them)`
  } else if (reply === 'OOM') {
    advice = `Redis is out of memory (${detail}); free memory or raise maxmemory`
  } else if (
    reply === 'LOADING' ||
    reply === 'BUSY' ||
    reply === 'CLUSTERDOWN' ||
    reply === 'TRYAGAIN' ||
    reply === 'MASTERDOWN'
  ) {
    advice = `Redis cannot serve the command right now (${detail}); ${outcome}. The ${role} works again once Redis has recovered`
  } else {
    advice = detail
  }
  return storeError(PROVIDER, action, lockName, advice, withoutCredentials(error))
}

/**
 * ioredis attaches the failed command to its reply errors (`error.command.args`): for the AUTH or
 * HELLO it sends on connect, that is the password, which `console.log(error)` would print with
 * the cause. Those arguments are blanked in place.
 */
function withoutCredentials(error: unknown): unknown {
  const command = (error as { command?: { name?: unknown; args?: unknown } } | null)?.command
  if (
    command &&
    typeof command.name === 'string' &&
    /^(auth|hello)$/i.test(command.name) &&
    Array.isArray(command.args)
  ) {
    command.args = command.args.map(() => '***')
  }
  return error
}
