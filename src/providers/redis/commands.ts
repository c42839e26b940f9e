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
 * Attaches the adapter's raw SET, not enumerable: a port copied with a spread and a method
 * replaced (`{ ...fromIoredis(client), setIfAbsent }`) must be called through that method.
 */
export function withSetReply(port: RedisCommands, setReply: SetReply): RedisCommands {
  return Object.defineProperty(port, SET_REPLY, { value: setReply })
}

/** The client's promise as it is; anything else (a test double's value) resolved. */
export function promised(result: unknown): Promise<unknown> {
  return result instanceof Promise ? result : Promise.resolve(result)
}

/** A client's `keyPrefix` option as text; `undefined` when it has none. */
export function prefixText(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value
  if (value instanceof Uint8Array) return value.length === 0 ? undefined : Buffer.from(value).toString('utf8')
  return undefined
}

export function requireMethods(client: unknown, what: string, methods: readonly string[]): void {
  const c = client as Record<string, unknown> | null | undefined
  const missing = c === null || typeof c !== 'object' ? methods : methods.filter((m) => typeof c[m] !== 'function')
  if (missing.length > 0) {
    throw new LockConfigurationError(
      `redis: the ${what} client passed has no ${missing.map((m) => `${m}()`).join(', ')}; pass a ${what} client`,
    )
  }
}
