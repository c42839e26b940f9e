import { type Clock, systemClock } from '../../core/clock.ts'
import type { Duration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLock, ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock, type LockOperations } from '../../core/define-lock.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeError } from '../../support/store-errors.ts'
import { type StartingSteps, type TimedStoreCall, timedStoreCall } from '../../support/with-timeout.ts'
import { type Attempt, clientSource, checkTimeout, type ZooKeeperStat, zookeeperCalls } from './client.ts'
import {
  CODE,
  DEFAULT_ROOT,
  describeZooKeeperError,
  encodeLockUntil,
  decodeLockUntil,
  hasCode,
  lockNodePath,
  PROVIDER,
  validRoot,
} from './format.ts'
import { type ZooKeeperLockInspectorOptions, zookeeperLockInspector } from './inspector.ts'

/**
 * The part of a node-zookeeper-client 1.x `Client` that this provider calls (its callback API).
 * We don't import node-zookeeper-client: any client with these methods works. Connect it
 * (`client.connect()`) before use; the provider never connects, closes or configures it.
 */
export interface ZooKeeperClient {
  getData(
    path: string,
    callback: (error: unknown, data: Buffer | undefined, stat: ZooKeeperStat | undefined) => void,
  ): void
  create(path: string, data: Buffer, mode: number, callback: (error: unknown) => void): void
  /** A multi: the provider creates a lock node and sets its data in one, for the Stat of the write. */
  transaction(): ZooKeeperTransaction
  setData(
    path: string,
    data: Buffer,
    version: number,
    callback: (error: unknown, stat: ZooKeeperStat | undefined) => void,
  ): void
  mkdirp(path: string, callback: (error: unknown) => void): void
}

/** The part of a node-zookeeper-client `Transaction` this provider builds and commits. */
export interface ZooKeeperTransaction {
  create(path: string, data: Buffer, mode: number): ZooKeeperTransaction
  setData(path: string, data: Buffer, version: number): ZooKeeperTransaction
  commit(callback: (error: unknown, results: readonly { stat?: ZooKeeperStat }[] | undefined) => void): void
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
 * hand and created again by this provider has version 1 again, so the acquisition that had
 * created the old node could release the new one.
 *
 * Fencing: each lock's `fencingToken` is the zxid of the write that took it (the `mzxid` in the
 * Stat the write returns). ZooKeeper orders every write of the ensemble by zxid, so a token is
 * greater than that of every earlier acquisition, of this name or any other, Java's included; no
 * extra request. A new node is created in a multi with a `setData` of the same data (a create
 * reports no Stat in node-zookeeper-client's protocol), so new nodes start at version 1. An
 * extension keeps the token. An ensemble rebuilt from scratch (not restored from its snapshots
 * and logs) starts its zxids over, and so tokens.
 *
 * Expiry is decided on the app clock (`clock`) of the node that tries to acquire, as in Java:
 * keep node clocks in sync.
 *
 * Lock names are path segments. Every name ZooKeeper accepts as a node name is used as it is,
 * the node Java uses (`100%` too); the others are escaped, one-to-one, as described at
 * {@link zookeeperNodeName} (`a/b` becomes `a%2Fb`, where Java would create the nested node
 * `a/b`), and a name spelled like another name's escaped node (`a%2Fb`) is refused with
 * `LockConfigurationError`.
 *
 * A node's path, `<path>/<node name>`, is at most 500,000 bytes of UTF-8. ZooKeeper closes the
 * connection on a request larger than its `jute.maxbuffer` (1 MB by default), failing every
 * request in flight on it, and the multi that creates a lock node carries its path twice; a
 * longer name is refused with `LockConfigurationError` before anything is sent. (Measured on
 * ZooKeeper 3.8 with the default setting: a plain create breaks from a path of 1,048,505 bytes.)
 * A server with a smaller `jute.maxbuffer` needs shorter names.
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
 * `provider.inspector()` is {@link zookeeperLockInspector} over the same client, path, timeout
 * and clock (it throws `LockConfigurationError` for a client without `getChildren` and `remove`).
 *
 * @throws LockConfigurationError for a missing client, a `path` that is not an absolute
 *   ZooKeeper path below the root, or a `timeout` that is not a positive duration.
 */
export function zookeeperLockProvider(
  options: ZooKeeperLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('zookeeper: pass options { client, path? }')
  }
  const zk = zookeeperCalls(clientSource(options.client, ['getData', 'transaction', 'setData', 'mkdirp']))
  const root = validRoot(options.path ?? DEFAULT_ROOT)
  const timeout = checkTimeout(options.timeout)
  const clock = options.clock ?? systemClock
  const call: TimedStoreCall<unknown> = {
    store: 'ZooKeeper',
    timeoutMs: timeout,
    describe: describeZooKeeperError(root, timeout),
  }

  const create = async (node: string, until: number, attempt: Attempt): Promise<ZooKeeperStat | undefined> => {
    try {
      return await zk.createIfAbsent(node, encodeLockUntil(until))
    } catch (error) {
      if (!hasCode(error, CODE.NO_NODE) || attempt.timedOut) throw error
    }
    // The parent is missing: create it, then try once more.
    await zk.mkdirp(root)
    return zk.createIfAbsent(node, encodeLockUntil(until))
  }

  // The node's Stat after our write, or undefined when the lock is held or another write came first.
  const acquire = async (node: string, until: number, attempt: Attempt): Promise<ZooKeeperStat | undefined> => {
    const read = await zk.read(node)
    if (read === undefined) return attempt.timedOut ? undefined : create(node, until, attempt)
    const lockUntil = decodeLockUntil(read.data)
    // Empty or unreadable data (a legacy ephemeral node, or a stranger's) counts as held, as in Java.
    if (lockUntil === undefined || lockUntil > clock.now() || attempt.timedOut) return undefined
    return zk.writeAt(node, encodeLockUntil(until), read.stat.version)
  }

  // One object per acquisition: it runs the attempt within the timeout, maps the result to the
  // handle, and is the handle's operations; taking a lock builds no closures of its own.
  class Acquisition
    implements StartingSteps<ZooKeeperStat | undefined, ExtensibleLock | undefined>, LockOperations, Attempt
  {
    readonly clock = clock
    readonly configuration: LockConfiguration
    readonly node: string
    timedOut = false
    // The node version our last write produced: the owner check of unlock and extend.
    version = 0
    fencingToken: bigint | undefined

    constructor(configuration: LockConfiguration, node: string) {
      this.configuration = configuration
      this.node = node
    }

    start(): Promise<ZooKeeperStat | undefined> {
      return acquire(this.node, this.configuration.lockAtMostUntil.getTime(), this)
    }

    onTimeout(): void {
      this.timedOut = true
    }

    map(written: ZooKeeperStat | undefined): ExtensibleLock | undefined {
      if (written === undefined) return undefined
      this.version = written.version
      // The zxid of the write that took the lock: ZooKeeper orders every write of the ensemble by
      // zxid, so it is greater than that of every earlier acquisition (Java's included).
      const token = zxidOf(written)
      if (token === undefined) {
        this.late(written)
        throw storeError(
          PROVIDER,
          'acquire',
          this.configuration.name,
          'the ZooKeeper client reported no mzxid in the Stat of the write that took the lock, so the lock has no fencing token; it was given back and the task was not run. Pass a node-zookeeper-client 1.x Client',
          undefined,
        )
      }
      this.fencingToken = token
      return defineLock(this.configuration, this as Acquisition & { extend: Acquisition['extend'] })
    }

    // The caller has been told the attempt failed, but the write went through: release it (at
    // our version, so nothing else is touched) instead of blocking the name until lockAtMostUntil.
    late(written: ZooKeeperStat | undefined): void {
      if (written !== undefined) zk.writeAt(this.node, encodeLockUntil(clock.now()), written.version).catch(() => {})
    }

    unlock(current: LockConfiguration): Promise<void> {
      return timedStoreCall(call, 'release', this.configuration.name, () => this.release(current))
    }

    async release(current: LockConfiguration): Promise<void> {
      const next = await zk.writeAt(
        this.node,
        encodeLockUntil(Math.max(clock.now(), current.lockAtLeastUntil.getTime())),
        this.version,
      )
      if (next !== undefined) this.version = next.version
    }

    extend(next: LockConfiguration, current: LockConfiguration): Promise<boolean> {
      return timedStoreCall(call, 'extend', this.configuration.name, () => this.extendTo(next, current))
    }

    async extendTo(next: LockConfiguration, current: LockConfiguration): Promise<boolean> {
      // The node holds what we wrote at `version`: our lockUntil, which may have passed while no
      // other node took the lock. An expired lock is not extended.
      if (current.lockAtMostUntil.getTime() <= clock.now()) return false
      const written = await zk.writeAt(this.node, encodeLockUntil(next.lockAtMostUntil.getTime()), this.version)
      if (written === undefined) return false
      this.version = written.version
      return true
    }
  }

  return {
    name: PROVIDER,
    // node-zookeeper-client's Client also has the getChildren and remove the inspector calls.
    inspector: () =>
      zookeeperLockInspector({
        client: options.client as unknown as ZooKeeperLockInspectorOptions['client'],
        path: root,
        timeout,
        clock,
      }),
    lock(configuration: LockConfiguration): Promise<ExtensibleLock | undefined> {
      let node: string
      try {
        checkLockRequest(PROVIDER, configuration, clock)
        // Checked before anything is sent: an oversized request drops the connection of every lock.
        node = lockNodePath(root, configuration.name)
      } catch (error) {
        return Promise.reject(error)
      }
      return timedStoreCall(
        call as TimedStoreCall<ZooKeeperStat | undefined>,
        'acquire',
        configuration.name,
        new Acquisition(configuration, node),
      )
    },
  }
}

// The 8 big-endian bytes of a zxid as a bigint; undefined when the client did not report them.
function zxidOf(stat: ZooKeeperStat): bigint | undefined {
  const zxid = stat.mzxid
  if (!(zxid instanceof Uint8Array) || zxid.length !== 8) return undefined
  const token = Buffer.from(zxid.buffer, zxid.byteOffset, 8).readBigInt64BE(0)
  return token > 0n ? token : undefined
}
