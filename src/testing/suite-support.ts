import assert from 'node:assert/strict'
import { type LockConfiguration, lockConfiguration } from '../core/lock-configuration.ts'
import type { LockProvider, SimpleLock } from '../core/lock-provider.ts'

/** The suites' default lockAtMostFor, in ms: long enough that no case waits for it by accident. */
export const FIVE_MINUTES = 5 * 60_000

/** A configuration made now: `lockAtMostFor` five minutes unless given, no `lockAtLeastFor` unless given (ms). */
export function suiteConfiguration(
  name: string,
  lockAtMostFor: number = FIVE_MINUTES,
  lockAtLeastFor = 0,
): LockConfiguration {
  return lockConfiguration({ name, lockAtMostFor, lockAtLeastFor })
}

/** Takes `configuration` from `provider`, failing the case when the lock is not granted. */
export async function mustLock(provider: LockProvider, configuration: LockConfiguration): Promise<SimpleLock> {
  const lock = await provider.lock(configuration)
  assert.ok(lock, `expected to acquire "${configuration.name}"`)
  return lock
}
