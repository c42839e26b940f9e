import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { DescribeStoreError, StoreAction } from '../../support/store-errors.ts'
import { timedStoreCall } from '../../support/with-timeout.ts'
import { CODE, hasCode } from './format.ts'

// node-zookeeper-client's callback API as promises, and the time limit around each operation:
// shared by the provider and the inspector, which each call a part of it.

/** The part of a node's `Stat` that shedlock reads. */
export interface ZooKeeperStat {
  readonly version: number
  /**
   * The zxid of the node's last change, 8 bytes big-endian, as node-zookeeper-client reports it:
   * the provider's fencing token, read from the Stat of the write that took the lock.
   */
  readonly mzxid?: Uint8Array
}

/** The part of a node-zookeeper-client `Transaction` (a multi) that the provider builds. */
interface CallbackTransaction {
  create(path: string, data: Buffer, mode: number): CallbackTransaction
  setData(path: string, data: Buffer, version: number): CallbackTransaction
  commit(callback: (error: unknown, results: readonly { stat?: ZooKeeperStat }[] | undefined) => void): void
}

/** Every method of a node-zookeeper-client 1.x `Client` that the provider or the inspector calls. */
interface CallbackClient {
  getData(
    path: string,
    callback: (error: unknown, data: Buffer | undefined, stat: ZooKeeperStat | undefined) => void,
  ): void
  create(path: string, data: Buffer, mode: number, callback: (error: unknown) => void): void
  setData(
    path: string,
    data: Buffer,
    version: number,
    callback: (error: unknown, stat: ZooKeeperStat | undefined) => void,
  ): void
  mkdirp(path: string, callback: (error: unknown) => void): void
  getChildren(path: string, callback: (error: unknown, children: string[] | undefined) => void): void
  remove(path: string, version: number, callback: (error: unknown) => void): void
  transaction(): CallbackTransaction
}

/** The client's calls as promises. */
export interface ZooKeeperCalls {
  /** `getData`, resolving to `undefined` when the node is missing. */
  read(path: string): Promise<{ data: Buffer | undefined; stat: ZooKeeperStat } | undefined>
  /**
   * A PERSISTENT node, and its Stat, from one multi that creates it and sets its data again (ZooKeeper
   * reports no Stat for a create in this client's protocol, but does for a setData): the Stat's
   * `mzxid` is the create's zxid, and its version 1. `undefined` when the node exists already.
   * Rejects with NO_NODE when its parent is missing.
   */
  createIfAbsent(path: string, data: Buffer): Promise<ZooKeeperStat | undefined>
  /** `setData` at `version`: the node's new Stat, or `undefined` when the version moved on or the node is gone. */
  writeAt(path: string, data: Buffer, version: number): Promise<ZooKeeperStat | undefined>
  mkdirp(path: string): Promise<void>
  getChildren(path: string): Promise<string[]>
  /** Deletes the node if its version is `version`. */
  remove(path: string, version: number): Promise<void>
}

// node-zookeeper-client's CreateMode.PERSISTENT (ZooKeeper's wire value).
const PERSISTENT = 0

/** Has `client` every one of `methods`? */
export function hasMethods(client: unknown, methods: readonly (keyof CallbackClient)[]): boolean {
  const c = client as Partial<Record<keyof CallbackClient, unknown>> | null | undefined
  return typeof c === 'object' && c !== null && methods.every((method) => typeof c[method] === 'function')
}

/**
 * The client to call now: `client` itself, or what the function `client` returns, checked to
 * have `methods`.
 * @throws LockConfigurationError when `client` is neither a function nor a client with `methods`.
 */
export function clientSource(client: unknown, methods: readonly (keyof CallbackClient)[]): () => unknown {
  if (typeof client === 'function') {
    return () => {
      const current: unknown = client()
      if (!hasMethods(current, methods))
        throw new TypeError('the client function returned no node-zookeeper-client Client')
      return current
    }
  }
  if (!hasMethods(client, methods)) {
    throw new LockConfigurationError(
      `zookeeper: pass your connected node-zookeeper-client Client as { client }, or a function that returns it (an object with ${methods.join(', ')})`,
    )
  }
  return () => client
}

// node-zookeeper-client validates arguments with assert() and throws synchronously, and so may
// the client function; the Promise constructor turns both into rejections. A missing Stat is an
// error, never version -1, which ZooKeeper would read as "any version".
/** The calls of the client that `clientNow` returns, as promises. */
export function zookeeperCalls(clientNow: () => unknown): ZooKeeperCalls {
  const client = (): CallbackClient => clientNow() as CallbackClient
  const statOf = (stat: ZooKeeperStat | undefined): ZooKeeperStat => {
    if (typeof stat?.version !== 'number')
      throw new TypeError('the ZooKeeper client reported no node Stat; pass a node-zookeeper-client Client')
    return stat
  }
  // The replies that are answers, not failures (no node, node exists, bad version), are mapped
  // in the client's callback, where they arrive: the callers get `undefined`, not an error to sort.
  return {
    read: (path) =>
      new Promise((resolve, reject) =>
        client().getData(path, (error, data, stat) => {
          if (error) {
            if (hasCode(error, CODE.NO_NODE)) resolve(undefined)
            else reject(error)
            return
          }
          try {
            resolve({ data, stat: statOf(stat) })
          } catch (invalid) {
            reject(invalid)
          }
        }),
      ),
    createIfAbsent: (path, data) =>
      new Promise((resolve, reject) =>
        // The setData's version -1 ("any"): the multi's create made the node, nothing came between.
        client()
          .transaction()
          .create(path, data, PERSISTENT)
          .setData(path, data, -1)
          .commit((error, results) => {
            if (error) {
              if (hasCode(error, CODE.NODE_EXISTS)) resolve(undefined)
              else reject(error)
              return
            }
            try {
              resolve(statOf(results?.[1]?.stat))
            } catch (invalid) {
              reject(invalid)
            }
          }),
      ),
    writeAt: (path, data, version) =>
      new Promise((resolve, reject) =>
        client().setData(path, data, version, (error, stat) => {
          if (error) {
            if (hasCode(error, CODE.BAD_VERSION) || hasCode(error, CODE.NO_NODE)) resolve(undefined)
            else reject(error)
            return
          }
          try {
            resolve(statOf(stat))
          } catch (invalid) {
            reject(invalid)
          }
        }),
      ),
    mkdirp: (path) =>
      new Promise((resolve, reject) => client().mkdirp(path, (error) => (error ? reject(error) : resolve()))),
    getChildren: (path) =>
      new Promise((resolve, reject) =>
        client().getChildren(path, (error, children) => (error ? reject(error) : resolve(children ?? []))),
      ),
    remove: (path, version) =>
      new Promise((resolve, reject) => client().remove(path, version, (error) => (error ? reject(error) : resolve()))),
  }
}

/** One operation's state, for its steps to see. */
export interface Attempt {
  /** Set when the operation's timeout fired: its remaining steps must not write. */
  timedOut: boolean
}

/**
 * The wrapper around every operation: it rejects with the store's `LockProviderError` after
 * `timeout` ms (node-zookeeper-client queues requests while disconnected, without a limit of its
 * own), and tells the operation, so that it sends no write after that.
 */
export function timedGuard(
  describe: DescribeStoreError,
  timeout: number,
): <T>(action: StoreAction, name: string, run: (attempt: Attempt) => Promise<T>) => Promise<T> {
  return (action, name, run) => {
    const attempt: Attempt = { timedOut: false }
    const onTimeout = (): void => {
      attempt.timedOut = true
    }
    // One promise and one timer for the timeout and the error mapping (see timedStoreCall).
    return timedStoreCall({ store: 'ZooKeeper', timeoutMs: timeout, describe, onTimeout }, action, name, () =>
      run(attempt),
    )
  }
}

/**
 * The `timeout` option in milliseconds. @default 5 s
 * @throws LockConfigurationError for a timeout that is not a positive duration.
 */
export function checkTimeout(timeout: Duration | undefined): number {
  const ms = parseDuration(timeout ?? '5s')
  if (ms <= 0) throw new LockConfigurationError('zookeeper: timeout must be longer than 0ms')
  return ms
}
