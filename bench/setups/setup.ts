import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import type { RunLedger } from '../../src/core/run-ledger.ts'
import type { CallCounter } from '../counting.ts'
import type { Operation } from '../harness.ts'
import type { Store } from '../options.ts'

/** What the baseline keeps after acquiring: enough to release. */
export interface RawLock {
  release(): Promise<void>
}

/**
 * The baseline: the provider's own statements or commands, issued straight through the same
 * client with no library around them (no configuration object, no owner string building, no
 * handle state, no error mapping). What a hand-written lock on this store would cost at least.
 */
export interface RawOperations {
  /** Resolves to the held lock, or `undefined` when the name is held. */
  acquire(name: string): Promise<RawLock | undefined>
}

/** A provider and the baseline on a counting proxy of the setup's client. */
export interface CountedClient {
  readonly provider: LockProvider
  readonly raw: RawOperations
  readonly counter: CallCounter
  /** The store's run ledger on the same counted client, for the slot-run counts (stores that have one). */
  readonly runLedger?: RunLedger
}

/** A provider on a connection of its own, as another node would have. */
export interface SeparateNode {
  readonly provider: LockProvider
  /** Counts this node's calls to the store. */
  readonly counter: CallCounter
  close(): Promise<void>
}

/** A namespace of the store (a table, a bucket, a database, a key prefix) for the scale measurement. */
export interface ScaleSpace {
  readonly provider: LockProvider
  /** Stores `names` as locks held by another node for an hour. */
  fill(names: readonly string[]): Promise<void>
  /** Removes what `fill` stored. */
  drain(): Promise<void>
}

/** A peer library's acquire+release on the same server, for the peers measurement. */
export interface Peer {
  readonly label: string
  /** `<package> <version>` and how it was configured. */
  readonly description: string
  /** Acquire+release on a name of caller `worker`'s own. */
  readonly operation: Operation
  /** Callers the peer can run at once without exhausting the server (advisory-lock opens a connection per lock). */
  readonly maxConcurrency: number
  close(): Promise<void>
}

/** One store, connected, with everything the measurements need; `close()` removes what the run created. */
export interface StoreSetup {
  readonly name: Store
  /** Server, driver and settings, for the method section of the report. */
  readonly versions: Readonly<Record<string, string>>
  /** Facts a reader needs to read the figures (an in-process server, a synchronous driver...). */
  readonly notes: readonly string[]
  /** Our provider on the setup's client. */
  readonly provider: LockProvider
  /** The baseline on the same client. */
  readonly raw: RawOperations
  /** Ours and the baseline again, on a counting proxy of the same client. */
  counted(): CountedClient
  /** A provider on a new connection of its own. */
  separateNode(): Promise<SeparateNode>
  /**
   * `separate`: each space is its own table, bucket or database, so both are filled at once and
   * measured in alternate blocks. `shared`: the store has one keyspace (etcd, ZooKeeper,
   * memcached), so the large space is filled and drained around its blocks.
   */
  readonly scaleMode: 'separate' | 'shared'
  scaleSpace(label: 'small' | 'large'): Promise<ScaleSpace>
  /** Peer libraries on this store's server (Redis, PostgreSQL). */
  peers?(): Promise<Peer[]>
  /** Removes every table, key, bucket or node the run created, and closes the connections. */
  close(): Promise<void>
}

/** Where a setup puts its names and namespaces: unique per run, so runs and tests never meet. */
export interface SetupContext {
  /** Short, `[a-z0-9]` only: fits table names, key parts and NATS bucket names. */
  readonly runId: string
}

/**
 * A unique owner for each baseline acquisition, so that its release is owner-checked like ours.
 * A counter, not random bytes: the baseline carries no library cost.
 */
export function rawOwner(): string {
  return `bench:${process.pid}:${++owners}`
}
let owners = 0

/** Runs `work` over `items` with at most `parallel` at once (seeding thousands of names). */
export async function inParallel<T>(
  items: readonly T[],
  parallel: number,
  work: (item: T, index: number) => Promise<unknown>,
): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++
      await work(items[index]!, index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(parallel, items.length) }, worker))
}

/** `items` in slices of `size`. */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** The `version` of an installed package, from the nearest `node_modules/<name>/package.json`; `unknown` when absent. */
export function packageVersion(name: string): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')) as {
        version?: unknown
      }
      if (typeof pkg.version === 'string') return pkg.version
    } catch {
      // Not installed at this level; look one folder up.
    }
    if (dirname(dir) === dir) return 'unknown'
  }
}

/** Hides a password in a connection URL before it goes into a report or an error. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@\s]*):[^@\s]*@/g, '$1:***@')
}
