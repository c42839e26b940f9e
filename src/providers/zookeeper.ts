import { type Clock, systemClock } from '../core/clock.ts'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { defineLock } from '../support/define-lock.ts'
import { OperationTimeoutError, withTimeout } from '../support/with-timeout.ts'

/** The part of a node's `Stat` this provider reads. */
export interface ZooKeeperStat {
  readonly version: number
}

/**
 * The part of a node-zookeeper-client 1.x `Client` that this provider calls (its callback API).
 * We don't import node-zookeeper-client: any client with these methods works. Connect it
 * (`client.connect()`) before use; the provider never connects, closes or configures it.
 */
export interface ZooKeeperClient {
  getData(path: string, callback: (error: unknown, data: Buffer | undefined, stat: ZooKeeperStat | undefined) => void): void
  create(path: string, data: Buffer, mode: number, callback: (error: unknown) => void): void
  setData(path: string, data: Buffer, version: number, callback: (error: unknown, stat: ZooKeeperStat | undefined) => void): void
  mkdirp(path: string, callback: (error: unknown) => void): void
}

/** Options of {@link zookeeperLockProvider}. */
export interface ZooKeeperLockProviderOptions {
  /**
   * Your connected node-zookeeper-client `Client`, or a function that returns the client to use
   * now, called for every lock operation. Pass a function when your application replaces its
   * client: node-zookeeper-client never recovers from an expired session, and can wait forever
   * on a connection that never completes its handshake (seen when it reconnects while a server
   * is starting). Locks taken through an older client are then released through the new one.
   */
  client: ZooKeeperClient | (() => ZooKeeperClient)
  /**
   * The node under which lock nodes live, one child per lock, created with its parents when
   * missing. An absolute ZooKeeper path below the root, without a trailing `/`. @default "/shedlock"
   */
  path?: string
  /**
   * How long one lock operation (all its ZooKeeper requests together) may take, in
   * milliseconds or a duration string. Past it, the operation rejects with `LockProviderError`
   * and the task does not run. node-zookeeper-client queues requests while it is disconnected
   * and sends them when it reconnects, without any time limit of its own. @default "5s"
   */
  timeout?: Duration
  /** The clock that decides whether a stored `lockUntil` has passed. @default systemClock */
  clock?: Clock
}

const PROVIDER = 'zookeeper'
// node-zookeeper-client's CreateMode.PERSISTENT (ZooKeeper's wire value).
const PERSISTENT = 0
// ZooKeeper error codes (KeeperException.Code), as node-zookeeper-client reports them in `code`.
const CODE = {
  CONNECTION_LOSS: -4,
  OPERATION_TIMEOUT: -7,
  NO_NODE: -101,
  NO_AUTH: -102,
  BAD_VERSION: -103,
  NODE_EXISTS: -110,
  SESSION_EXPIRED: -112,
  AUTH_FAILED: -115,
} as const

type Action = 'acquire' | 'extend' | 'release'

/**
 * Locks in ZooKeeper nodes in Java ShedLock's format (its `ZookeeperCuratorLockProvider`), so
 * Java and Node nodes can share locks: one PERSISTENT node `<path>/<name>` per lock, whose data is
 * the UTF-8 ISO-8601 `lockUntil` with 3 fraction digits (`2024-05-01T10:00:00.000Z`). No owner
 * is stored.
 *
 * - acquire: read the node; a missing node is created (with its parents); an existing one is
 *   taken over only when its `lockUntil` has passed, with a `setData` conditioned on the version
 *   just read, so that of two contenders one wins. A node with empty or unreadable data (left by
 *   ShedLock before 2.5, which used ephemeral nodes) counts as held, as in Java: delete it by hand;
 * - unlock: writes `max(now, lockAtLeastUntil)`; extend writes the new `lockAtMostUntil` (and
 *   resolves to `undefined` once the lock has expired).
 *
 * Owner check without changing Java's format: the provider remembers the node version its own
 * write produced, and unlock and extend write only at that version. Another acquisition's write
 * (by this provider or by Java) changes the version, so a holder whose lock expired and was taken
 * touches nothing. Java's provider unlocks without this check. One gap remains: a node deleted by
 * hand and created again has version 0 again, so the acquisition that had created the old node
 * could release the new one.
 *
 * Expiry is decided on the app clock (`clock`) of the node that tries to acquire, as in Java:
 * keep node clocks in sync.
 *
 * Lock names are path segments. Names ZooKeeper accepts are used as they are, the node Java
 * uses; the others are escaped, one-to-one, as described at {@link zookeeperNodeName} (`a/b`
 * becomes `a%2Fb`, where Java would create the nested node `a/b`; and a name containing `%`
 * maps to a node Java does not use).
 *
 * After a dropped connection node-zookeeper-client reconnects by itself, and the provider works
 * again with it. Two cases need a new client, which a `client` function can hand over without
 * a new provider: an expired session (every request then fails with SESSION_EXPIRED; the client
 * emits `expired`), and a reconnection whose handshake never completes (node-zookeeper-client
 * 1.1 has no timeout for it: the client stays disconnected and every lock operation times out).
 *
 * ```ts
 * import zookeeper from 'node-zookeeper-client'
 * import { zookeeperLockProvider } from 'shedlock/zookeeper'
 * const client = zookeeper.createClient('127.0.0.1:2181')
 * client.connect()
 * const provider = zookeeperLockProvider({ client })
 *
 * // or, to replace the client when its session expires:
 * let current = connect()
 * function connect() {
 *   const next = zookeeper.createClient('127.0.0.1:2181')
 *   next.once('expired', () => { next.close(); current = connect() })
 *   next.connect()
 *   return next
 * }
 * const replaceable = zookeeperLockProvider({ client: () => current })
 * ```
 *
 * @throws LockConfigurationError for a missing client, a `path` that is not an absolute
 *   ZooKeeper path below the root, or a `timeout` that is not a positive duration.
 */
export function zookeeperLockProvider(options: ZooKeeperLockProviderOptions): ExtensibleLockProvider {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('zookeeper: pass options { client, path? }')
  }
  const { client } = options
  if (typeof client !== 'function' && !isClient(client)) {
    throw new LockConfigurationError('zookeeper: pass your connected node-zookeeper-client Client as { client }, or a function that returns it')
  }
  const root = validRoot(options.path ?? '/shedlock')
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('zookeeper: timeout must be longer than 0ms')
  const clock = options.clock ?? systemClock
  const zk = promisified(
    typeof client === 'function'
      ? () => {
          const current = client()
          if (!isClient(current)) throw new TypeError('the client function returned no node-zookeeper-client Client')
          return current
        }
      : () => client,
  )

  const guard = async <T>(action: Action, name: string, run: (attempt: Attempt) => Promise<T>): Promise<T> => {
    const attempt: Attempt = { timedOut: false }
    try {
      return await withTimeout(run(attempt), timeout, {
        store: 'ZooKeeper',
        onTimeout: () => {
          attempt.timedOut = true
        },
      })
    } catch (error) {
      throw describeZooKeeperError(error, action, name, root, timeout)
    }
  }

  // The version of the node after our write, or undefined when another write came first.
  const write = async (node: string, until: number, version: number): Promise<number | undefined> => {
    try {
      return (await zk.setData(node, isoData(until), version)).version
    } catch (error) {
      if (hasCode(error, CODE.BAD_VERSION) || hasCode(error, CODE.NO_NODE)) return undefined
      throw error
    }
  }

  const create = async (node: string, until: number, attempt: Attempt): Promise<number | undefined> => {
    try {
      await zk.create(node, isoData(until))
      // A node's version starts at 0 and counts its setData calls.
      return 0
    } catch (error) {
      if (hasCode(error, CODE.NODE_EXISTS)) return undefined
      if (!hasCode(error, CODE.NO_NODE) || attempt.timedOut) throw error
    }
    // The parent is missing: create it, then try once more.
    await zk.mkdirp(root)
    try {
      await zk.create(node, isoData(until))
      return 0
    } catch (error) {
      if (hasCode(error, CODE.NODE_EXISTS)) return undefined
      throw error
    }
  }

  const acquire = async (node: string, until: number, attempt: Attempt): Promise<number | undefined> => {
    let read: { data: Buffer | undefined; stat: ZooKeeperStat }
    try {
      read = await zk.getData(node)
    } catch (error) {
      if (!hasCode(error, CODE.NO_NODE)) throw error
      return attempt.timedOut ? undefined : create(node, until, attempt)
    }
    const lockUntil = parseLockUntil(read.data)
    // Empty or unreadable data (a legacy ephemeral node, or a stranger's) counts as held, as in Java.
    if (lockUntil === undefined || lockUntil > clock.now() || attempt.timedOut) return undefined
    return write(node, until, read.stat.version)
  }

  return {
    name: PROVIDER,
    async lock(configuration) {
      const { name } = configuration
      const node = `${root}/${zookeeperNodeName(name)}`
      const until = configuration.lockAtMostUntil.getTime()
      const acquired = await guard('acquire', name, async (attempt) => {
        const written = await acquire(node, until, attempt)
        // The caller has been told the attempt failed, but the write went through: release it
        // (at our version, so nothing else is touched) instead of blocking the name until
        // lockAtMostUntil.
        if (written !== undefined && attempt.timedOut) void write(node, clock.now(), written).catch(() => {})
        return written
      })
      if (acquired === undefined) return undefined
      // The node version our last write produced: the owner check of unlock and extend.
      let version = acquired
      return defineLock(configuration, {
        clock,
        unlock: (current) =>
          guard('release', name, async () => {
            const next = await write(node, Math.max(clock.now(), current.lockAtLeastUntil.getTime()), version)
            if (next !== undefined) version = next
          }),
        extend: (next, current) =>
          guard('extend', name, async () => {
            // The node holds what we wrote at `version`: our lockUntil, which may have passed
            // while no other node took the lock. An expired lock is not extended.
            if (current.lockAtMostUntil.getTime() <= clock.now()) return false
            const written = await write(node, next.lockAtMostUntil.getTime(), version)
            if (written === undefined) return false
            version = written
            return true
          }),
      })
    },
  }
}

/**
 * The node name (a path segment below `path`) that holds lock `name`. Names ZooKeeper accepts
 * map to themselves, the node Java ShedLock uses. Percent-escaped, as `%` and the two uppercase
 * hex digits of each UTF-8 byte: `%` (the escape character), `/` (the path separator), and the
 * characters ZooKeeper refuses in paths: U+0000–U+001F, U+007F–U+009F, U+E000–U+F8FF, U+FFF0–U+FFFF
 * and every character beyond U+FFFF (ZooKeeper's server refuses the UTF-16 surrogates that
 * encode them). A lone surrogate becomes `%u` and its four hex digits. The names `.` and `..`
 * become `%2E` and `%2E%2E`. The mapping is one-to-one, because a literal `%` is always escaped.
 *
 * ```ts
 * zookeeperNodeName('nightly report') // 'nightly report'
 * zookeeperNodeName('reports/daily')  // 'reports%2Fdaily'
 * zookeeperNodeName('100%')           // '100%25'
 * ```
 */
export function zookeeperNodeName(name: string): string {
  if (name === '.' || name === '..') return name.replaceAll('.', '%2E')
  return name.replace(ESCAPED, (character) => {
    const code = character.codePointAt(0)!
    if (character.length === 1 && code >= 0xd800 && code <= 0xdfff) return `%u${code.toString(16).toUpperCase().padStart(4, '0')}`
    let escaped = ''
    for (const byte of Buffer.from(character, 'utf8')) escaped += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
    return escaped
  })
}

// ZooKeeper's PathUtils.validatePath refuses these in any path (it checks UTF-16 code units,
// hence every character beyond U+FFFF, whose surrogates fall in U+D800–U+DFFF), plus '/' and '%'.
const ESCAPED = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff\u{10000}-\u{10ffff}%/]/gu
const INVALID_IN_PATH = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff\u{10000}-\u{10ffff}]/u

function validRoot(path: unknown): string {
  const fail = (why: string): never => {
    throw new LockConfigurationError(`zookeeper: path ${JSON.stringify(path)} ${why}; pass an absolute path below the root such as "/shedlock"`)
  }
  if (typeof path !== 'string' || path === '') return fail('is not a non-empty string')
  if (!path.startsWith('/')) return fail('does not start with "/"')
  if (path === '/') return fail('is the root, which cannot hold lock nodes next to ZooKeeper\'s own "/zookeeper"')
  if (path.endsWith('/')) return fail('ends with "/"')
  const segments = path.slice(1).split('/')
  if (segments.some((s) => s === '')) return fail('has an empty segment ("//")')
  if (segments.some((s) => s === '.' || s === '..')) return fail('has a relative segment ("." or "..")')
  if (segments[0] === 'zookeeper') return fail('is inside "/zookeeper", which ZooKeeper reserves')
  if (INVALID_IN_PATH.test(path)) return fail('contains characters ZooKeeper refuses in paths (control characters, U+E000–U+F8FF, U+FFF0–U+FFFF or characters beyond U+FFFF)')
  return path
}

/** Java's `Utils.toIsoString`: UTC, exactly 3 fraction digits. */
function isoData(ms: number): Buffer {
  return Buffer.from(new Date(ms).toISOString(), 'utf8')
}

// What Java's Instant.parse accepts in practice: seconds required, 0-9 fraction digits, Z or an offset.
const ISO_INSTANT = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/

/** The `lockUntil` in a node's data, or undefined when the data is empty or not an ISO-8601 instant. */
function parseLockUntil(data: Buffer | undefined): number | undefined {
  if (!data || data.length === 0) return undefined
  const match = ISO_INSTANT.exec(data.toString('utf8').trim())
  if (!match) return undefined
  const ms = Date.parse(`${match[1]}.${(match[2] ?? '').slice(0, 3).padEnd(3, '0')}${match[3]}`)
  return Number.isNaN(ms) ? undefined : ms
}

interface Attempt {
  /** Set when the operation's timeout fired: its remaining steps must not write. */
  timedOut: boolean
}

interface PromisifiedClient {
  getData(path: string): Promise<{ data: Buffer | undefined; stat: ZooKeeperStat }>
  create(path: string, data: Buffer): Promise<void>
  setData(path: string, data: Buffer, version: number): Promise<ZooKeeperStat>
  mkdirp(path: string): Promise<void>
}

function isClient(client: unknown): client is ZooKeeperClient {
  const c = client as Partial<Record<keyof ZooKeeperClient, unknown>> | null | undefined
  return typeof c === 'object' && c !== null && typeof c.getData === 'function' && typeof c.create === 'function' && typeof c.setData === 'function' && typeof c.mkdirp === 'function'
}

// node-zookeeper-client validates arguments with assert() and throws synchronously, and so may
// the client function; the Promise constructor turns both into rejections. A missing Stat is an
// error, never version -1, which ZooKeeper would read as "any version".
function promisified(clientNow: () => ZooKeeperClient): PromisifiedClient {
  const statOf = (stat: ZooKeeperStat | undefined): ZooKeeperStat => {
    if (typeof stat?.version !== 'number') throw new TypeError('the ZooKeeper client reported no node Stat; pass a node-zookeeper-client Client')
    return stat
  }
  return {
    getData: (path) =>
      new Promise((resolve, reject) =>
        clientNow().getData(path, (error, data, stat) => {
          if (error) reject(error)
          else {
            try {
              resolve({ data, stat: statOf(stat) })
            } catch (invalid) {
              reject(invalid)
            }
          }
        }),
      ),
    create: (path, data) => new Promise((resolve, reject) => clientNow().create(path, data, PERSISTENT, (error) => (error ? reject(error) : resolve()))),
    setData: (path, data, version) =>
      new Promise((resolve, reject) =>
        clientNow().setData(path, data, version, (error, stat) => {
          if (error) reject(error)
          else {
            try {
              resolve(statOf(stat))
            } catch (invalid) {
              reject(invalid)
            }
          }
        }),
      ),
    mkdirp: (path) => new Promise((resolve, reject) => clientNow().mkdirp(path, (error) => (error ? reject(error) : resolve()))),
  }
}

function hasCode(error: unknown, code: number): boolean {
  return (error as { code?: unknown } | null)?.code === code
}


function describeZooKeeperError(error: unknown, action: Action, lockName: string, root: string, timeout: number): LockProviderError {
  const detail = error instanceof Error ? error.message : String(error)
  const code = (error as { code?: unknown } | null)?.code
  let advice: string
  if (error instanceof OperationTimeoutError) {
    advice = `no reply from ZooKeeper within ${timeout}ms (the client is disconnected, or was never connected: call client.connect()); the task was not run. The provider recovers by itself once the client reconnects; a client that stays disconnected long after the server is back must be replaced (see the client option)`
  } else if (code === CODE.CONNECTION_LOSS || code === CODE.OPERATION_TIMEOUT) {
    advice = `the connection to ZooKeeper was lost, or the client was closed (${detail}); the task was not run. The provider recovers by itself once the client reconnects`
  } else if (code === CODE.SESSION_EXPIRED) {
    advice = `the ZooKeeper session expired (${detail}), after which node-zookeeper-client never reconnects; the task was not run. Create a new client when the client emits "expired", and pass the provider a function that returns the current client`
  } else if (code === CODE.NO_AUTH || code === CODE.AUTH_FAILED) {
    advice = `ZooKeeper refused access (${detail}); give the client's identity read, write and create permission on ${root} and its children`
  } else {
    advice = detail
  }
  return new LockProviderError(`zookeeper: could not ${action} lock "${lockName}": ${advice}`, { cause: error, provider: PROVIDER, lockName })
}
