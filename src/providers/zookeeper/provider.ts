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
 * Locks as persistent ZooKeeper nodes in Java ShedLock's format (`<path>/<name>` holding the
 * ISO-8601 `lockUntil`), through your `node-zookeeper-client` client, so Java and Node nodes share
 * locks. Extensible; expiry is decided on each node's `clock`; a lock's `fencingToken` is the zxid
 * of the write that took it.
 *
 * ```ts
 * import zookeeper from 'node-zookeeper-client'
 * import { zookeeperLockProvider } from 'shedlock/zookeeper'
 * const client = zookeeper.createClient('127.0.0.1:2181')
 * client.connect()
 * const provider = zookeeperLockProvider({ client })
 * ```
 *
 * Pass `client` as a function returning the current client to replace one whose session expired
 * or whose handshake hangs, without a new provider. See docs/providers/zookeeper.md.
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
