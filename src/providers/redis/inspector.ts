import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord } from '../../core/lock-inspector.ts'
import { parseAddedValue } from '../../support/added-value.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { type RedisClient, toRedisCommands } from './client.ts'
import {
  checkedRedisLockKey,
  DELETE_IF_OWNED,
  describeRedisError,
  PROVIDER,
  READ_LOCK,
  redisKeySpace,
  redisLockKey,
  redisLockName,
  redisScanPattern,
  runScript,
} from './format.ts'
import { scanKeys, scanNodes, textOf } from './scan.ts'
import { byName, inBatches, keyedGetAndRelease } from '../../support/inspection.ts'

/** Options of {@link redisLockInspector}: the provider's client and key options. */
export interface RedisLockInspectorOptions {
  /**
   * Your connected client, as the provider takes it: an ioredis `Redis` or `Cluster`, a node-redis
   * client from `createClient()` or `createCluster()`, or a `RedisCommands` port that has
   * `command` (and, for a Cluster, `masters`).
   */
  client: RedisClient
  /** Second part of every key, `<keyPrefix>:<environment>:<name>`: the provider's. @default "default" */
  environment?: string
  /** First part of every key, `<keyPrefix>:<environment>:<name>`: the provider's. @default "job-lock" */
  keyPrefix?: string
  /**
   * How long one Redis command may take, in milliseconds or a duration string; past it, the
   * call rejects with `LockProviderError`. `list()` sends several (one `SCAN` per page, one read
   * per key), each with this bound. @default "5s"
   */
  timeout?: Duration
}

/**
 * Reads and force-releases the locks of the Redis lock provider, in its (and Java ShedLock's)
 * format: keys `<keyPrefix>:<environment>:<name>` holding `ADDED:<ISO time>@<owner>`. For
 * dashboards, health endpoints and operators.
 *
 * - `get(name)`: one Lua script reads the value, its `PTTL` and `TIME` at one instant on the node
 *   that holds the key. `lockUntil` is that node's `TIME` plus `PTTL` (expiry is decided on the
 *   Redis server's clock), `lockedAt` and `lockedBy` come from the value (`lockedAt` was taken
 *   on the holder's clock). A key exists only while it is held: Redis deletes it on expiry, and
 *   an unlock deletes it, so every record reads as held.
 * - `list()`: `SCAN … MATCH <keyPrefix>:<environment>:*` (1000 keys a page), then one read per
 *   key; `now` is the server's `TIME`. On a Cluster client it SCANs every master (ioredis
 *   `Cluster`, node-redis `createCluster()`); a `RedisCommands` port without `masters` lists only
 *   the node its `command` reaches. Keys that are not strings are not locks and are skipped.
 * - `release(nameOrRecord)`: deletes the key if it still holds the value read (the provider's own
 *   compare-and-delete script, `DELETE_IF_OWNED`), so that a lock another node took meanwhile is
 *   left alone. The holder's later unlock or extension compares its own value and finds none:
 *   it changes nothing (the operator wins).
 *
 * A client `keyPrefix` option (ioredis, node-redis 6) is honoured: SCAN looks for it, and it is
 * stripped from the keys found. `get` and `release` reject with `LockConfigurationError` for a
 * name whose key is longer than the provider allows (512 MiB − 64 KiB): no lock can have it.
 *
 * ```ts
 * import { Redis } from 'ioredis'
 * import { redisLockInspector } from 'shedlock/redis'
 * const inspector = redisLockInspector({ client: new Redis(url), environment: 'production' })
 * const { now, locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing or unrecognised client, a client that cannot send
 *   raw commands (a `RedisCommands` port without `command`), an empty `keyPrefix` or
 *   `environment`, one containing `:`, or a `timeout` that is not a positive duration.
 */
export function redisLockInspector(options: RedisLockInspectorOptions): LockInspector {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('redis: pass options { client, environment?, keyPrefix? } to redisLockInspector')
  }
  const commands = toRedisCommands(options.client)
  const command = commands.command?.bind(commands)
  if (typeof command !== 'function') {
    throw new LockConfigurationError(
      `redis: the inspector sends TIME and SCAN, which the ${commands.client} port passed as client cannot: give it a command(args) method that sends a raw command (see RedisCommands.command), or pass an ioredis or node-redis client`,
    )
  }
  const space = redisKeySpace(options)
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('redis: timeout must be longer than 0ms')
  const clientPrefix = commands.keyPrefix ?? ''
  const guard = storeGuard((error, action, name) =>
    describeRedisError(error, action, name, commands.client, timeout, 'inspector'),
  )
  const bounded = <T>(promise: Promise<T>): Promise<T> => withTimeout(promise, timeout, { store: 'Redis' })
  // The value a record was read with: release(record) deletes the key only while it holds that.
  const readAs = new WeakMap<LockRecord, string>()

  const read = async (name: string, key: string): Promise<LockRecord | undefined> => {
    const reply = await bounded(runScript(commands, READ_LOCK, key, []))
    if (!Array.isArray(reply) || textOf(reply[0]) !== 'string') return undefined
    const value = textOf(reply[1]) ?? ''
    const pttl = Number(reply[2])
    const now = millisOf(reply[3], reply[4])
    // PTTL -1: a key without expiry, which no shedlock or Java ShedLock node writes; held until deleted.
    const expires = pttl >= 0
    const added = parseAddedValue(value)
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: expires ? new Date(now + pttl) : undefined,
      lockedAt: added.lockedAt === undefined ? undefined : new Date(added.lockedAt),
      lockedBy: added.lockedBy,
      held: !expires || pttl > 0,
      remainingMs: expires ? pttl : undefined,
    })
    readAs.set(record, value)
    return record
  }

  return {
    name: PROVIDER,
    clock: "the Redis server's clock (TIME, plus each key's PTTL)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const prefix = selection?.prefix ?? ''
        const nodes = await scanNodes(commands, command, bounded)
        const time = await bounded(nodes[0]!(['TIME']))
        const now = Array.isArray(time) ? millisOf(time[0], time[1]) : Number.NaN
        if (!Number.isFinite(now)) throw new Error(`TIME answered ${JSON.stringify(time)}, not [seconds, microseconds]`)
        const names: string[] = []
        for (const key of await scanKeys(nodes, redisScanPattern(space, clientPrefix, prefix), clientPrefix, bounded)) {
          const name = redisLockName(space, key)
          if (name !== undefined) names.push(name)
        }
        const selected = names.filter((name) => name.startsWith(prefix))
        // A key may expire or be released between SCAN and its read: it is no lock any more.
        const records = (await inBatches(selected, (name) => read(name, redisLockKey(space, name)))).filter(
          (record): record is LockRecord => record !== undefined,
        )
        return { now: new Date(now), locks: records.sort(byName) }
      }),
    // Keys checked as the provider checks them, before anything is sent.
    ...keyedGetAndRelease(
      guard,
      (name) => checkedRedisLockKey(space, name),
      read,
      readAs,
      (key, value) => bounded(runScript(commands, DELETE_IF_OWNED, key, [value])).then((reply) => Number(reply) === 1),
    ),
    // Redis deletes every lock key when its expiry passes: there is never an expired record.
    removeExpired: async () => 0,
  }
}

/** Epoch milliseconds of a `TIME` reply's seconds and microseconds. */
function millisOf(seconds: unknown, micros: unknown): number {
  return Number(textOf(seconds)) * 1000 + Math.floor(Number(textOf(micros)) / 1000)
}
