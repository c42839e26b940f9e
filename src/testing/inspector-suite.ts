import type { LockInspector } from '../core/lock-inspector.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { inspectorAcquisitionCases } from './inspector-acquisition-cases.ts'
import { inspectorReadCases } from './inspector-read-cases.ts'
import { inspectorReleaseCases } from './inspector-release-cases.ts'
import type { InspectorSuiteContext } from './inspector-support.ts'

/** Options of {@link lockInspectorSuite}. */
export interface LockInspectorSuiteOptions {
  /** A new provider: another node. Providers and the inspector share the store (and may share a client). */
  provider: () => LockProvider | Promise<LockProvider>
  /** The inspector under test, over the same store, table or key space as the providers. */
  inspector: LockInspector
  /** Whether `list()` can enumerate the locks; `false` (memcached) expects it to reject. @default true */
  canList?: boolean
  /** Whether the store keeps `lockedBy` (SQL, MongoDB, DynamoDB, Redis, etcd, memcached) or not (NATS, ZooKeeper). @default true */
  keepsLockedBy?: boolean
  /** Whether the store reveals `lockUntil` (memcached does not). @default true */
  keepsLockUntil?: boolean
  /**
   * Whether the store keeps what tells one acquisition from another (its holder and the time it
   * was taken, or a value per acquisition), so that a record read before its holder extended the
   * lock still releases it; `false` for NATS and ZooKeeper, which keep only the expiry: there the
   * record must release nothing. @default true
   */
  keepsAcquisition?: boolean
  /** Smallest duration the store honours, in ms (memcached: 1000; etcd: 2000). @default 1 */
  timeGranularityMs?: number
  /** How far `lockUntil` may be from the holder's `lockAtMostUntil`, in ms: clock offset and rounding. @default 2000 plus the granularity */
  toleranceMs?: number
}

/** One case of {@link lockInspectorSuite}; register it as `it(c.name, c.run, c.timeoutMs)`. */
export interface LockInspectorTestCase {
  readonly name: string
  readonly timeoutMs: number
  run(): Promise<void>
}

/**
 * The contract of a `LockInspector`, as test cases against a real store: it reads what the
 * provider wrote (held, holder, expiry), lists it, and force-releases so that another node takes
 * the lock at once while the holder's own later release does not take it back (the operator
 * wins), and a release of a record releases that acquisition, extended or not, and never a later one.
 */
export function lockInspectorSuite(options: LockInspectorSuiteOptions): LockInspectorTestCase[] {
  const g = Math.max(1, options.timeGranularityMs ?? 1)
  const cases: LockInspectorTestCase[] = []
  const suite: InspectorSuiteContext = {
    add: (name, timeoutMs, run) => void cases.push({ name, timeoutMs, run }),
    inspector: options.inspector,
    node: async () => options.provider(),
    canList: options.canList ?? true,
    keepsLockedBy: options.keepsLockedBy ?? true,
    keepsLockUntil: options.keepsLockUntil ?? true,
    keepsAcquisition: options.keepsAcquisition ?? true,
    g,
    tolerance: options.toleranceMs ?? 2_000 + g,
  }
  inspectorReadCases(suite)
  inspectorReleaseCases(suite)
  inspectorAcquisitionCases(suite)
  return cases
}
