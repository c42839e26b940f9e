import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import { checkDurations, checkName, type ExecutorOrProvider, toExecutor, withContext } from './lock-options.ts'

/** Options of {@link withLock}. */
export interface WithLockOptions<This = unknown, Args extends unknown[] = unknown[]> {
  /**
   * The lock's name, the same on every node. A function computes it from each call's arguments
   * (and `this`), for one lock per tenant, per file… (ShedLock's dynamic lock names).
   */
  name: string | ((this: This, ...args: Args) => string)
  /** How long the lock is held at most if the holder dies. Milliseconds or a duration string (`"10m"`). */
  lockAtMostFor: Duration
  /**
   * How long the lock is held at least, even after a shorter run, so that a node whose clock or
   * scheduler is a little late skips the same tick. Keep it below the schedule's period. @default 0
   */
  lockAtLeastFor?: Duration
  /**
   * Called instead of rejecting: with the `LockProviderError` when the store fails (the task did
   * not run), the task's own error, or a `LockConfigurationError` from a dynamic name. The call
   * then resolves to `undefined`. Use it where nobody awaits the returned promise, as in croner,
   * node-schedule or `setInterval`, where a rejection is an unhandled rejection that ends the
   * process. If `onError` throws, the call rejects with that error. @default undefined: reject
   */
  onError?: (error: unknown) => void
}

/** What {@link withLock} returns: `fn`'s parameters and `this`, resolving to its result, or to `undefined` when skipped. */
export type LockedFunction<This, Args extends unknown[], R> = (this: This, ...args: Args) => Promise<Awaited<R> | undefined>

/**
 * Wraps `fn` so that each call runs it under the lock, or skips it at once when another node
 * holds the lock. The returned function takes `fn`'s arguments and `this` and resolves to `fn`'s
 * result, or to `undefined` when skipped. Inside `fn`, `assertLocked()` and `extendActiveLock()`
 * work. For croner, cron (`onTick`), node-schedule and `setInterval`.
 *
 * ```ts
 * const report = withLock(provider, { name: 'nightly-report', lockAtMostFor: '10m', lockAtLeastFor: '30s' }, async () => {
 *   await sendReport()
 * })
 * new Cron('0 3 * * *', { catch: (error) => log.error(error) }, report)
 * ```
 *
 * @param executorOrProvider a `LockProvider`, or a `LockingTaskExecutor` to keep its listener.
 * @throws LockConfigurationError at once for a missing or blank name, bad durations,
 *   `lockAtLeastFor` above `lockAtMostFor`, or a `fn` or provider of the wrong kind.
 * @returns a function whose promise rejects with `LockProviderError` when the store fails (the
 *   task did not run) and with `fn`'s own errors, unless `onError` is given.
 */
export function withLock<This, Args extends unknown[], R>(
  executorOrProvider: ExecutorOrProvider,
  options: WithLockOptions<This, Args>,
  fn: (this: This, ...args: Args) => R,
): LockedFunction<This, Args, R> {
  const label = typeof options?.name === 'string' && options.name.trim() !== '' ? `withLock() of lock "${options.name}"` : 'withLock()'
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError(`${label}: options are missing; pass { name, lockAtMostFor, lockAtLeastFor? }`)
  }
  const { name, lockAtMostFor, lockAtLeastFor, onError } = options
  checkName(label, name)
  if (lockAtMostFor === undefined) {
    throw new LockConfigurationError(`${label}: lockAtMostFor is required; set it well above the task's normal duration, e.g. "10m"`)
  }
  const durations = checkDurations(label, lockAtMostFor, lockAtLeastFor)
  if (typeof fn !== 'function') throw new LockConfigurationError(`${label}: the task must be a function, got ${typeof fn}`)
  if (onError !== undefined && typeof onError !== 'function') throw new LockConfigurationError(`${label}: onError must be a function, got ${typeof onError}`)
  const executor = toExecutor(label, executorOrProvider)

  const run = async (self: This, args: Args): Promise<Awaited<R> | undefined> => {
    try {
      const lock = { name: typeof name === 'function' ? nameOf(self, args) : name, lockAtMostFor: durations.lockAtMostFor!, lockAtLeastFor: durations.lockAtLeastFor ?? 0 }
      const outcome = await executor.executeWithLock(() => fn.apply(self, args), lock)
      return outcome.executed ? (outcome.result as Awaited<R>) : undefined
    } catch (error) {
      if (!onError) throw error
      onError(error)
      return undefined
    }
  }

  // A computed name is checked here, so that its error says where the name came from.
  const nameOf = (self: This, args: Args): string => {
    let computed: unknown
    try {
      computed = (name as (this: This, ...args: Args) => string).apply(self, args)
    } catch (error) {
      throw new LockConfigurationError(`${label}: the name function threw: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
    }
    try {
      lockConfiguration({ name: computed as string, lockAtMostFor: durations.lockAtMostFor!, lockAtLeastFor: durations.lockAtLeastFor ?? 0 })
    } catch (error) {
      throw withContext(`${label}: the name function returned ${JSON.stringify(computed) ?? String(computed)}`, error)
    }
    return computed as string
  }
  return function (this: This, ...args: Args) {
    return run(this, args)
  }
}
