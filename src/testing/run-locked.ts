import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import { ActiveLock } from '../core/active-lock.ts'
import { runWithActiveLock } from '../core/lock-context.ts'

/** Options of {@link runLocked}. */
export interface RunLockedOptions {
  /** The simulated lock's name. @default "shedlock-test-lock" */
  name?: string
  /**
   * The fencing token `activeFencingToken()` returns inside, for tasks that pass it to a
   * resource (docs/fencing.md). @default undefined, as from a store that hands out none
   */
  fencingToken?: bigint
}

/**
 * Runs `fn` as if it held a lock, so that unit tests can call tasks that start with
 * `assertLocked()`. No provider is involved: `extendActiveLock()` inside validates its
 * arguments and resolves without doing anything. (Java ShedLock's `makeAllAssertsPass`.) The
 * second argument is the lock's name, or options with a `fencingToken` too.
 *
 * ```ts
 * await runLocked(() => service.nightlyReport())
 * await runLocked(() => service.fencedWrite(), { fencingToken: 42n })
 * ```
 *
 * @throws LockConfigurationError for a `fencingToken` that is not a bigint.
 */
export function runLocked<T>(fn: () => T, nameOrOptions: string | RunLockedOptions = {}): T {
  const options = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : nameOrOptions
  const { fencingToken } = options
  if (fencingToken !== undefined && typeof fencingToken !== 'bigint')
    throw new LockConfigurationError(
      `runLocked(): fencingToken must be a bigint (e.g. 42n), got ${typeof fencingToken}`,
    )
  const configuration = lockConfiguration({ name: options.name ?? 'shedlock-test-lock', lockAtMostFor: 24 * 3_600_000 })
  return runWithActiveLock(new ActiveLock(configuration, undefined, { simulated: true, fencingToken }), fn)
}
