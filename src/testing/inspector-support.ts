import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockInspector } from '../core/lock-inspector.ts'
import type { LockProvider, SimpleLock } from '../core/lock-provider.ts'

/** What the inspector suite's groups share: how to add a case, the inspector, the nodes, the store's traits (ms). */
export interface InspectorSuiteContext {
  add(name: string, timeoutMs: number, run: () => Promise<void>): void
  readonly inspector: LockInspector
  /** A new provider instance: another node. */
  node(): Promise<LockProvider>
  readonly canList: boolean
  readonly keepsLockedBy: boolean
  readonly keepsLockUntil: boolean
  /** Whether a record read before its holder's extensions still releases it (all but NATS and ZooKeeper). */
  readonly keepsAcquisition: boolean
  /** The store's time granularity. */
  readonly g: number
  /** How far `lockUntil` may be from the holder's `lockAtMostUntil`. */
  readonly tolerance: number
}

/** Takes `name` from `provider` (durations in ms), failing the case when the lock is not granted. */
export async function take(
  provider: LockProvider,
  name: string,
  lockAtMostFor: number,
  lockAtLeastFor = 0,
): Promise<SimpleLock> {
  const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor, lockAtLeastFor }))
  assert.ok(lock, `expected to acquire "${name}"`)
  return lock
}

/** A fresh lock name, so that cases are independent and may share a store. */
export function lockName(): string {
  return `inspect-${randomUUID()}`
}
