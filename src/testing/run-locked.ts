import { lockConfiguration } from '../core/lock-configuration.ts'
import { ActiveLock, runWithActiveLock } from '../core/lock-context.ts'

/**
 * Runs `fn` as if it held a lock, so that unit tests can call tasks that start with
 * `assertLocked()`. No provider is involved: `extendActiveLock()` inside validates its
 * arguments and resolves without doing anything. (Java ShedLock's `makeAllAssertsPass`.)
 *
 * ```ts
 * await runLocked(() => service.nightlyReport())
 * ```
 */
export function runLocked<T>(fn: () => T, name = 'shedlock-test-lock'): T {
  const configuration = lockConfiguration({ name, lockAtMostFor: 24 * 3_600_000 })
  return runWithActiveLock(new ActiveLock(configuration, undefined, { simulated: true }), fn)
}
