import { LockConfigurationError } from '../../core/errors.ts'

/** Sends one raw command to a Redis server: `args` are the command's words, e.g. `['SCAN', '0', 'COUNT', '100']`; resolves to Redis's reply. */
export type RedisCommand = (args: readonly string[]) => Promise<unknown>

/**
 * The Redis commands shedlock sends, as a small port so that it does not depend on one client
 * library. Build one with {@link fromIoredis} or {@link fromNodeRedis}, or write your own for
 * another client.
 *
 * The provider needs `setIfAbsent`, `evalSha` and `eval` only. Every one of them names one key,
 * so a Cluster client routes it to the node that owns the key's slot; with the provider's
 * `fencingTokens`, the acquisition's script also names the lock's counter key, in the same slot,
 * as `moreKeys`. The inspector
 * (`redisLockInspector`) also needs `command`, for `TIME` and `SCAN`, and uses `masters` and
 * `keyPrefix` where the client has them. Errors are passed through as the client raised them:
 * shedlock turns them into `LockProviderError`s and recognises a `NOSCRIPT` reply by its message.
 */
export interface RedisCommands {
  /** Which client this port drives, e.g. `ioredis` or `node-redis`; used in error messages. */
  readonly client: string
  /** `SET key value NX PX milliseconds`. Resolves to `true` when Redis replied `OK` (the key was absent and is now set). */
  setIfAbsent(key: string, value: string, milliseconds: number): Promise<boolean>
  /**
   * `EVALSHA sha1 1 key ...args` (`EVALSHA sha1 <1 + moreKeys.length> key ...moreKeys ...args` when
   * `moreKeys` is given): resolves to the script's reply; rejects with Redis's `NOSCRIPT` error when
   * the script is not cached. `moreKeys` (the fencing counter's key, in `key`'s slot) is passed
   * only with the provider's `fencingTokens`; a port that ignores it makes that script fail.
   */
  evalSha(sha1: string, key: string, args: readonly string[], moreKeys?: readonly string[]): Promise<unknown>
  /** `EVAL script 1 key ...args` (with `moreKeys` as `evalSha`): resolves to the script's reply (and caches the script on that Redis node). */
  eval(script: string, key: string, args: readonly string[], moreKeys?: readonly string[]): Promise<unknown>
  /**
   * Optional: sends a raw command (a {@link RedisCommand}) and resolves to Redis's reply, as the
   * client returns it (strings, numbers, arrays, `null`). The provider never calls it; the
   * inspector needs it, for the keyless `TIME` and `SCAN`, and refuses a port without it. On a
   * Cluster client, a keyless command goes to a node of the client's choice.
   */
  command?(args: readonly string[]): Promise<unknown>
  /**
   * Optional, Cluster clients only: one {@link RedisCommand} per master node. The inspector's
   * `list()` SCANs each of them (a SCAN cursor belongs to one node). A Cluster port without it
   * lists only the keys of the node that `command` reaches.
   */
  masters?(): Promise<readonly RedisCommand[]>
  /**
   * Optional, for the provider's `waitForReplicas`: `SET key value NX PX milliseconds`, then
   * `WAIT replicas waitMilliseconds` on the same connection, sent together. `WAIT` counts the
   * replicas that have every write of its own connection, so it must follow the `SET` on the
   * connection that sent it, with nothing in between that could reconnect. Resolves to whether
   * the key was set and how many replicas acknowledged it. `fromIoredis` sends both in one
   * pipeline (a Cluster client sends a pipeline to the node of its key), `fromNodeRedis` back to
   * back on the client (on a cluster, the key's node).
   */
  setIfAbsentAndWait?(
    key: string,
    value: string,
    milliseconds: number,
    replicas: number,
    waitMilliseconds: number,
  ): Promise<ReplicatedSet>
  /**
   * Optional, for the provider's `waitForReplicas` with `fencingTokens`: `EVAL script <keys.length>
   * ...keys ...args`, then `WAIT replicas waitMilliseconds` on the same connection, sent together
   * as `setIfAbsentAndWait` sends its two. The script's writes (the lock key and its counter) are
   * the connection's latest, so `WAIT` counts the replicas that have both. `EVAL`, not `EVALSHA`:
   * a `NOSCRIPT` inside the pair would leave nothing to wait for. Resolves to the script's reply
   * and how many replicas acknowledged.
   */
  evalAndWait?(
    script: string,
    keys: readonly string[],
    args: readonly string[],
    replicas: number,
    waitMilliseconds: number,
  ): Promise<ReplicatedEval>
  /**
   * Optional: the prefix the client itself adds to every key it sends (ioredis's and node-redis's
   * `keyPrefix` option). Clients do not add it to SCAN patterns, nor strip it from the keys SCAN
   * returns, so the inspector does both. `fromIoredis` and `fromNodeRedis` read it from the client.
   */
  readonly keyPrefix?: string
}

/** What {@link RedisCommands.setIfAbsentAndWait} resolves to. */
export interface ReplicatedSet {
  /** Whether Redis replied `OK` to the `SET … NX` (the key was absent and is now set). */
  readonly set: boolean
  /** The reply of `WAIT`: how many replicas acknowledged the connection's writes within its timeout. */
  readonly replicas: number
}

/** What {@link RedisCommands.evalAndWait} resolves to. */
export interface ReplicatedEval {
  /** The script's reply. */
  readonly reply: unknown
  /** The reply of `WAIT`: how many replicas acknowledged the connection's writes within its timeout. */
  readonly replicas: number
}

/**
 * The `SET … NX PX` of an acquisition as the client sends it, its reply not yet mapped: the
 * provider maps it in the promise it already has, where an async `setIfAbsent` added a promise and
 * a turn per lock. `fromIoredis` and `fromNodeRedis` attach it under {@link SET_REPLY}; a port of
 * your own is called through its `setIfAbsent`. Internal: not exported by `shedlock/redis`.
 */
export interface SetReply {
  send(key: string, value: string, milliseconds: number): PromiseLike<unknown>
  /** Whether the reply means the key was set (Redis's `OK`). */
  acquired(reply: unknown): boolean
}

/** Where an adapter keeps its {@link SetReply}. */
export const SET_REPLY: unique symbol = Symbol('shedlock.redis.setReply')

/**
 * The part of an ioredis (5 or 6) `Redis` or `Cluster` client that {@link fromIoredis} calls. We
 * don't import ioredis: any object with these methods works.
 */
export interface IoredisClient {
  set(key: string, value: string, millisecondsToken: 'PX', milliseconds: number, nx: 'NX'): Promise<unknown>
  evalsha(sha1: string, numkeys: number, ...args: string[]): Promise<unknown>
  eval(script: string, numkeys: number, ...args: string[]): Promise<unknown>
}

/** The part of an ioredis pipeline that `setIfAbsentAndWait` and `evalAndWait` use. */
interface IoredisPipeline {
  set(key: string, value: string, millisecondsToken: 'PX', milliseconds: number, nx: 'NX'): IoredisPipeline
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): IoredisPipeline
  wait(replicas: number, milliseconds: number): IoredisPipeline
  exec(): Promise<[Error | null, unknown][] | null>
}

/** `keys` and `arguments` of a node-redis `eval`/`evalSha` call. */
export interface NodeRedisEvalOptions {
  keys: string[]
  arguments: string[]
}

/**
 * The part of a node-redis (the `redis` package, 5 or 6) client, from `createClient()` or
 * `createCluster()`, that {@link fromNodeRedis} calls. We don't import redis: any object with
 * these methods works. Legacy-mode clients (`legacyMode: true`, `client.legacy()`) are callback
 * based and do not fit; pass the regular client.
 */
export interface NodeRedisClient {
  // `{ PX, NX: true }` is understood by node-redis 4, 5 and 6 (5 and 6 also accept `{ expiration, condition }`).
  set(key: string, value: string, options: { PX: number; NX: true }): Promise<unknown>
  evalSha(sha1: string, options: NodeRedisEvalOptions): Promise<unknown>
  eval(script: string, options: NodeRedisEvalOptions): Promise<unknown>
}

/** What `redisLockProvider` accepts as `client`. */
export type RedisClient = IoredisClient | NodeRedisClient | RedisCommands

/** @deprecated Renamed to {@link RedisClient}; this alias goes in the next major. */
export type RedisClientLike = RedisClient

/**
 * Adapts an ioredis `Redis` or `Cluster` client. Options of the client apply: its `keyPrefix`,
 * if set, is prepended to every lock key (Java ShedLock sharing the store must use the same
 * prefix), and its offline queue and retry settings decide how long a command waits while Redis
 * is down (the provider's `timeout` bounds that wait).
 *
 * For the inspector, the port also has `command` (the client's `call()`), the client's
 * `keyPrefix`, and on a `Cluster` `masters` (`cluster.nodes('master')`).
 *
 * @throws LockConfigurationError when `client` lacks `set`, `evalsha` or `eval`.
 */
export function fromIoredis(client: IoredisClient): RedisCommands {
  requireMethods(client, 'ioredis', ['set', 'evalsha', 'eval'])
  // Read by shape: IoredisClient declares only what the provider needs.
  const c = client as unknown as {
    call?: (command: string, ...args: string[]) => Promise<unknown>
    isCluster?: unknown
    nodes?: (role: 'master') => readonly { call(command: string, ...args: string[]): Promise<unknown> }[]
    options?: { keyPrefix?: unknown; redisOptions?: { keyPrefix?: unknown } }
    pipeline?: () => IoredisPipeline
  }
  const call = c.call
  const keyPrefix = prefixText(c.options?.keyPrefix ?? c.options?.redisOptions?.keyPrefix)
  const setReply: SetReply = {
    send: (key, value, milliseconds) => client.set(key, value, 'PX', milliseconds, 'NX'),
    acquired: (reply) => reply === 'OK',
  }
  // After a failover, ioredis does not redirect a Cluster pipeline whose key moved: WAIT answers
  // on the old node, so the replies are not all redirections, and its slot map stays old; every
  // later acquisition went to the old node (MOVED) until the map's next refresh, which a loaded
  // cluster can postpone for good. A keyed command through the Cluster follows the MOVED and
  // updates the map; then the pipeline is sent once more: its first command did not run.
  const followedMove = async (replies: [Error | null, unknown][] | null, key: string): Promise<boolean> => {
    const error = replies?.[0]?.[0]
    if (c.isCluster !== true || typeof call !== 'function' || !error?.message.startsWith('MOVED ')) return false
    await call.call(client, 'EXISTS', key)
    return true
  }
  const port: RedisCommands = {
    client: 'ioredis',
    setIfAbsent: async (key, value, milliseconds) => (await client.set(key, value, 'PX', milliseconds, 'NX')) === 'OK',
    // Not async functions: the client's promise is returned as it is (an async wrapper adds a
    // promise and two turns per call); a synchronous throw still becomes a rejection.
    evalSha(sha1, key, args, moreKeys) {
      try {
        if (moreKeys !== undefined && moreKeys.length > 0)
          return promised(client.evalsha(sha1, 1 + moreKeys.length, key, ...moreKeys, ...args))
        // The provider's scripts take one or two arguments: passed as they are, not spread.
        return promised(
          args.length === 1
            ? client.evalsha(sha1, 1, key, args[0]!)
            : args.length === 2
              ? client.evalsha(sha1, 1, key, args[0]!, args[1]!)
              : client.evalsha(sha1, 1, key, ...args),
        )
      } catch (error) {
        return Promise.reject(error)
      }
    },
    eval(script, key, args, moreKeys = []) {
      try {
        return promised(client.eval(script, 1 + moreKeys.length, key, ...moreKeys, ...args))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    ...(typeof call === 'function' && { command: ([name, ...args]) => call.call(client, name!, ...args) }),
    ...(typeof c.pipeline === 'function' && {
      // One pipeline: on one connection, in order; a Cluster client sends it to the node of the
      // SET's key, which is where WAIT must run. Not MULTI: inside a transaction WAIT does not wait.
      setIfAbsentAndWait: async (key, value, milliseconds, replicas, waitMilliseconds) => {
        const send = () =>
          c.pipeline!().set(key, value, 'PX', milliseconds, 'NX').wait(replicas, waitMilliseconds).exec()
        let replies = await send()
        if (await followedMove(replies, key)) replies = await send()
        const [[setError, setReply] = [], [waitError, waitReply] = []] = replies ?? []
        if (setError) throw setError
        if (waitError) throw waitError
        return { set: setReply === 'OK', replicas: Number(waitReply) }
      },
      evalAndWait: async (script, keys, args, replicas, waitMilliseconds) => {
        const send = () =>
          c.pipeline!()
            .eval(script, keys.length, ...keys, ...args)
            .wait(replicas, waitMilliseconds)
            .exec()
        let replies = await send()
        if (await followedMove(replies, keys[0]!)) replies = await send()
        const [[evalError, evalReply] = [], [waitError, waitReply] = []] = replies ?? []
        if (evalError) throw evalError
        if (waitError) throw waitError
        return { reply: evalReply, replicas: Number(waitReply) }
      },
    }),
    ...(c.isCluster === true &&
      typeof c.nodes === 'function' && {
        masters: async () =>
          c.nodes!('master').map(
            (node): RedisCommand =>
              ([name, ...args]) =>
                node.call(name!, ...args),
          ),
      }),
    ...(keyPrefix !== undefined && { keyPrefix }),
  }
  return withSetReply(port, setReply)
}

/**
 * Adapts a node-redis (`redis` 5 or 6) client from `createClient()` or `createCluster()`. The
 * client must be connected (`await client.connect()`) before locks are taken: node-redis rejects
 * commands of a client that is not open with "The client is closed".
 *
 * For the inspector, the port also has `command` (the client's `sendCommand()`), the client's
 * `keyPrefix` (node-redis 6), and on a cluster `masters` (`cluster.masters` and
 * `cluster.nodeClient()`).
 *
 * @throws LockConfigurationError when `client` lacks `set`, `evalSha` or `eval`.
 */
export function fromNodeRedis(client: NodeRedisClient): RedisCommands {
  requireMethods(client, 'node-redis', ['set', 'evalSha', 'eval'])
  // Read by shape: NodeRedisClient declares only what the provider needs. A cluster's
  // sendCommand() takes (firstKey, isReadonly, args), a client's (args).
  const c = client as unknown as {
    sendCommand?: (...args: unknown[]) => Promise<unknown>
    nodeClient?: (node: unknown) => unknown
    masters?: unknown
    getMasters?: () => unknown
    options?: { keyPrefix?: unknown }
    _options?: { keyPrefix?: unknown }
  }
  const send = c.sendCommand
  const cluster = typeof c.nodeClient === 'function'
  const keyPrefix = prefixText((c.options ?? c._options)?.keyPrefix)
  const masters = async (): Promise<RedisCommand[]> => {
    const nodes = Array.isArray(c.masters) ? c.masters : typeof c.getMasters === 'function' ? c.getMasters() : []
    const clients = await Promise.all(
      (nodes as unknown[]).map(
        async (node) => (await c.nodeClient!(node)) as { sendCommand(args: string[]): Promise<unknown> },
      ),
    )
    return clients.map(
      (node): RedisCommand =>
        (args) =>
          node.sendCommand([...args]),
    )
  }
  const setReply: SetReply = {
    send: (key, value, milliseconds) => client.set(key, value, { PX: milliseconds, NX: true }),
    // A client with a type mapping may return the reply as a Buffer; String() covers both.
    acquired: (reply) => String(reply) === 'OK',
  }
  const port: RedisCommands = {
    client: 'node-redis',
    setIfAbsent: async (key, value, milliseconds) =>
      setReply.acquired(await client.set(key, value, { PX: milliseconds, NX: true })),
    evalSha(sha1, key, args, moreKeys = []) {
      try {
        return promised(client.evalSha(sha1, { keys: [key, ...moreKeys], arguments: [...args] }))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    eval(script, key, args, moreKeys = []) {
      try {
        return promised(client.eval(script, { keys: [key, ...moreKeys], arguments: [...args] }))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    ...(typeof send === 'function' && {
      command: (args) => (cluster ? send.call(client, undefined, true, [...args]) : send.call(client, [...args])),
    }),
    ...(typeof send === 'function' && {
      // Both sent in this turn, so that they leave on the same connection one after the other (on
      // a cluster, the connection to the key's node: WAIT is routed by the key passed with it).
      setIfAbsentAndWait: async (key, value, milliseconds, replicas, waitMilliseconds) => {
        const wait = ['WAIT', String(replicas), String(waitMilliseconds)]
        const set = client.set(key, value, { PX: milliseconds, NX: true })
        const acked = cluster ? send.call(client, key, false, wait) : send.call(client, wait)
        const [setAnswer, waitAnswer] = await Promise.all([set, acked])
        return { set: setReply.acquired(setAnswer), replicas: Number(waitAnswer) }
      },
      evalAndWait: async (script, keys, args, replicas, waitMilliseconds) => {
        const wait = ['WAIT', String(replicas), String(waitMilliseconds)]
        const evaluated = client.eval(script, { keys: [...keys], arguments: [...args] })
        const acked = cluster ? send.call(client, keys[0], false, wait) : send.call(client, wait)
        const [reply, waitAnswer] = await Promise.all([evaluated, acked])
        return { reply, replicas: Number(waitAnswer) }
      },
    }),
    ...(cluster && { masters }),
    ...(keyPrefix !== undefined && { keyPrefix }),
  }
  return withSetReply(port, setReply)
}

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

/**
 * Attaches the adapter's raw SET, not enumerable: a port copied with a spread and a method
 * replaced (`{ ...fromIoredis(client), setIfAbsent }`) must be called through that method.
 */
function withSetReply(port: RedisCommands, setReply: SetReply): RedisCommands {
  return Object.defineProperty(port, SET_REPLY, { value: setReply })
}

/** The client's promise as it is; anything else (a test double's value) resolved. */
function promised(result: unknown): Promise<unknown> {
  return result instanceof Promise ? result : Promise.resolve(result)
}

/** A client's `keyPrefix` option as text; `undefined` when it has none. */
function prefixText(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value
  if (value instanceof Uint8Array) return value.length === 0 ? undefined : Buffer.from(value).toString('utf8')
  return undefined
}

function requireMethods(client: unknown, what: string, methods: readonly string[]): void {
  const c = client as Record<string, unknown> | null | undefined
  const missing = c === null || typeof c !== 'object' ? methods : methods.filter((m) => typeof c[m] !== 'function')
  if (missing.length > 0) {
    throw new LockConfigurationError(
      `redis: the ${what} client passed has no ${missing.map((m) => `${m}()`).join(', ')}; pass a ${what} client`,
    )
  }
}
