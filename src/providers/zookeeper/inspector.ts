import { type Clock, systemClock } from '../../core/clock.ts'
import type { Duration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { parseSlotRecordName } from '../../core/slots.ts'
import {
  type Attempt,
  checkTimeout,
  clientSource,
  timedGuard,
  type ZooKeeperCalls,
  type ZooKeeperStat,
  zookeeperCalls,
} from './client.ts'
import {
  CODE,
  DEFAULT_ROOT,
  decodeLockUntil,
  describeZooKeeperError,
  encodeLockUntil,
  hasCode,
  lockNodePath,
  PROVIDER,
  validRoot,
  zookeeperLockName,
} from './format.ts'
import { byName, inBatches } from '../../support/inspection.ts'

/**
 * The part of a node-zookeeper-client 1.x `Client` that {@link zookeeperLockInspector} calls (its
 * callback API): the provider's client as it is.
 */
export interface ZooKeeperInspectorClient {
  getData(
    path: string,
    callback: (error: unknown, data: Buffer | undefined, stat: ZooKeeperStat | undefined) => void,
  ): void
  setData(
    path: string,
    data: Buffer,
    version: number,
    callback: (error: unknown, stat: ZooKeeperStat | undefined) => void,
  ): void
  getChildren(path: string, callback: (error: unknown, children: string[]) => void): void
  /** Deletes a node if its version is `version` (for `removeExpired()`). */
  remove(path: string, version: number, callback: (error: unknown) => void): void
}

/** Options of {@link zookeeperLockInspector}: the provider's client, path, timeout and clock. */
export interface ZooKeeperLockInspectorOptions {
  /** Your connected node-zookeeper-client `Client` (the provider's), or a function that returns the client to use now. */
  client: ZooKeeperInspectorClient | (() => ZooKeeperInspectorClient)
  /** The node whose children are the lock nodes, as the provider's `path`. @default "/shedlock" */
  path?: string
  /**
   * How long one call (`list()`, `get()`, `release()` or `removeExpired()`, all its requests together) may take, in
   * milliseconds or a duration string; past it, the call rejects with `LockProviderError`.
   * @default "5s"
   */
  timeout?: Duration
  /**
   * The clock the providers decide expiry on: `now`, `held` and `remainingMs` are read on it, and
   * a force-release writes its time. @default systemClock
   */
  clock?: Clock
}

// A release by name reads the node and writes at the version read; a write in between (the
// holder extending, say) moves the version, and the release reads again, this many times.
const RELEASE_ATTEMPTS = 3

/**
 * Reads and force-releases the locks of ZooKeeper lock nodes, the children of `path`, in the
 * provider's (and Java ShedLock's) format: for dashboards, health endpoints and operators. Node
 * names decode to lock names with {@link zookeeperLockName}.
 *
 * A node keeps only `lockUntil` (ISO-8601 text): `lockedBy` and `lockedAt` are always
 * `undefined`. Expiry is decided on each node's clock, so `now`, `held` and `remainingMs` are
 * read on `clock`, this host's by default. A node with empty or unreadable data (ShedLock before
 * 2.5, or another program's child of `path`) reads as held with an unknown `lockUntil`, as the
 * provider treats it. A missing `path` lists no locks. Java ShedLock stores a name with `/` as
 * nested nodes (`a/b` is the node `b` under `a`), where shedlock escapes it (`a%2Fb`): `list()`
 * reads only the children of `path`, so it shows such a Java lock as its first segment (`a`).
 *
 * A force-release writes `lockUntil` = now into the node at the version read and keeps the node
 * (deleting it would restart its version at 0, which an earlier holder's version could match).
 * The lock is free at once, and the holder's release or extension, conditional on the version it
 * wrote, fails with BADVERSION and changes nothing. Given a record, it writes at the version read
 * only: a node keeps no holder and no time it was taken, so a write by the holder (an extension,
 * a lease's renewal) cannot be told from another node's acquisition, and after either the record
 * releases nothing (`false`); read the lock again, or release it by name.
 *
 * `removeExpired()` deletes only expired slot records (`<name>@<slot>`, see `slotRecordName`),
 * each at the version read (a node written since is kept), and keeps every other node, expired
 * or not: for the same reason, a deleted node created again restarts at version 0, which a
 * stale holder's version-checked release or extension could match, shortening a newer holder's
 * lock so that another node runs the task too. A slot record's claim is never released or
 * extended once its slot is decided, so no holder writes to it again. It reads every child of
 * `path` whose name starts with the prefix, and deletes those that expired.
 *
 * ```ts
 * import { zookeeperLockInspector } from 'shedlock/zookeeper'
 * const inspector = zookeeperLockInspector({ client, path: '/shedlock' })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing client, a `path` that is not an absolute ZooKeeper
 *   path below the root, or a `timeout` that is not a positive duration. `get` and `release`
 *   throw it too for a name the provider refuses.
 */
export function zookeeperLockInspector(options: ZooKeeperLockInspectorOptions): LockInspector {
  if (options === null || typeof options !== 'object')
    throw new LockConfigurationError('zookeeper: pass options { client, path? }')
  const zk: ZooKeeperCalls = zookeeperCalls(
    clientSource(options.client, ['getData', 'setData', 'getChildren', 'remove']),
  )
  const root = validRoot(options.path ?? DEFAULT_ROOT)
  const timeout = checkTimeout(options.timeout)
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('zookeeper: clock must have a now() method returning epoch milliseconds')
  const guard = timedGuard(describeZooKeeperError(root, timeout), timeout)
  // What a record was read as: release(record) writes only at that node version.
  const readAs = new WeakMap<LockRecord, NodeState>()

  /** The data and version of `path`, or undefined when there is no such node. */
  const read = async (path: string): Promise<NodeState | undefined> => {
    const node = await zk.read(path)
    return node === undefined ? undefined : { lockUntil: decodeLockUntil(node.data), version: node.stat.version }
  }
  const toRecord = (node: string, state: NodeState, now: number): LockRecord => {
    const until = state.lockUntil
    const record: LockRecord = Object.freeze({
      name: zookeeperLockName(node),
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: undefined,
      lockedBy: undefined,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, state)
    return record
  }
  // Empty or unreadable data counts as held, as the provider treats it.
  const heldAt = (lockUntil: number | undefined): boolean => lockUntil === undefined || lockUntil > clock.now()
  /** Writes lockUntil = now at `version`; false when another write came first or the node is gone. */
  const releaseAt = async (path: string, version: number, attempt: Attempt): Promise<boolean> => {
    // The caller has been told that the release failed: it must not happen later.
    if (attempt.timedOut) return false
    return (await zk.writeAt(path, encodeLockUntil(clock.now()), version)) !== undefined
  }

  /** The nodes under `root` whose lock name starts with the selection's prefix and passes `keep`, with what they hold. */
  const readChildren = async (
    selection: LockSelection | undefined,
    keep: (name: string) => boolean,
  ): Promise<[string, NodeState][]> => {
    const prefix = selection?.prefix ?? ''
    let children: string[]
    try {
      children = await zk.getChildren(root)
    } catch (error) {
      // No lock was ever taken under this path (the provider creates it with the first).
      if (!hasCode(error, CODE.NO_NODE)) throw error
      children = []
    }
    const selected = children.filter((node) => {
      const name = zookeeperLockName(node)
      return name.startsWith(prefix) && keep(name)
    })
    const states = await inBatches(selected, async (node) => [node, await read(`${root}/${node}`)] as const)
    return states.flatMap(([node, state]) => (state ? [[node, state] as [string, NodeState]] : []))
  }
  /** Deletes `path` if its version is still `version`; false when another write came first or the node is gone. */
  const removeAt = async (path: string, version: number, attempt: Attempt): Promise<boolean> => {
    if (attempt.timedOut) return false
    try {
      await zk.remove(path, version)
      return true
    } catch (error) {
      if (hasCode(error, CODE.BAD_VERSION) || hasCode(error, CODE.NO_NODE)) return false
      throw error
    }
  }

  return {
    name: PROVIDER,
    clock: "this host's clock (ZooKeeper locks expire on each node's clock)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const found = await readChildren(selection, () => true)
        const now = clock.now()
        const locks = found.map(([node, state]) => toRecord(node, state, now))
        return { now: new Date(now), locks: locks.sort(byName) }
      }),
    get: async (name) => {
      const path = lockNodePath(root, name)
      return guard('inspect', name, async () => {
        const state = await read(path)
        return state && toRecord(path.slice(root.length + 1), state, clock.now())
      })
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      // Outside the guard: a name the provider refuses rejects with its own LockConfigurationError.
      const path = lockNodePath(root, name)
      const expected = typeof lock === 'string' ? undefined : readAs.get(lock)
      return guard('release', name, async (attempt) => {
        // Given a record, only the state it was read in: the same version, still held.
        if (expected) return heldAt(expected.lockUntil) && releaseAt(path, expected.version, attempt)
        for (let i = 0; i < RELEASE_ATTEMPTS; i++) {
          const state = await read(path)
          if (!state || !heldAt(state.lockUntil)) return false
          if (await releaseAt(path, state.version, attempt)) return true
          if (attempt.timedOut) return false
        }
        return false
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async (attempt) => {
        // Slot records only: see the rule above.
        const found = await readChildren(selection, (name) => parseSlotRecordName(name) !== undefined)
        const now = clock.now()
        const expired = found.filter(([, state]) => state.lockUntil !== undefined && state.lockUntil <= now)
        const removed = await inBatches(expired, ([node, state]) => removeAt(`${root}/${node}`, state.version, attempt))
        return removed.filter(Boolean).length
      }),
  }
}

/** What a lock node holds: its `lockUntil` (undefined when unreadable) and the version that write made. */
interface NodeState {
  readonly lockUntil: number | undefined
  readonly version: number
}
