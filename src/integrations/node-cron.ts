import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { type LockConfigurationOptions, lockConfiguration } from '../core/lock-configuration.ts'
import { type ExecutorOrProvider, toExecutor, withContext } from './lock-options.ts'

/**
 * node-cron 4's `RunCoordinator` (node-cron ≥ 4.4): asked before each fire of a `distributed`
 * task, told when the run ends. We don't import node-cron; this mirrors its type.
 */
export interface NodeCronRunCoordinator {
  shouldRun(key: string, ttlMs: number): boolean | Promise<boolean>
  onComplete?(key: string): void | Promise<void>
}

/** Options of {@link lockingRunCoordinator} and {@link lockingTaskOptions}. */
export interface LockingRunCoordinatorOptions {
  /** The lock's name: one lock for all fires of the task, the same on every node. */
  name: string
  /** How long the lock is held at most if the holder dies. Milliseconds or a duration string (`"10m"`). */
  lockAtMostFor: Duration
  /**
   * How long the lock is held at least after a shorter run, so that a node whose clock or timer
   * is a little late skips the same fire. Keep it below the schedule's period. @default 0
   */
  lockAtLeastFor?: Duration
}

/** The part of node-cron 4's `TaskOptions` that {@link lockingTaskOptions} fills in. */
export interface NodeCronLockingTaskOptions {
  name: string
  distributed: true
  runCoordinator: NodeCronRunCoordinator
  /** Milliseconds: `lockAtMostFor`, so node-cron's lease hint and the lock agree. */
  distributedLease: number
}

interface Held {
  release(): void
  readonly execution: Promise<unknown>
}

/**
 * A node-cron 4 run coordinator that runs each fire of a task under one named lock, with
 * shedlock's semantics: the fire runs on the node that takes the lock, every other node skips it
 * at once (`execution:skipped` with reason `'not-elected'`), and the lock is released after the
 * run, or kept until `lockAtLeastFor` has passed.
 *
 * - One lock per task, named by `options.name`, not one per fire: node-cron's key
 *   (`<task name>:<ISO time>`) is only used to pair `shouldRun` with its `onComplete`.
 * - Fails closed: when the store fails, `shouldRun` rejects with `LockProviderError`, so node-cron
 *   skips the fire with reason `'coordinator-error'` and logs the error.
 * - node-cron's `ttlMs` (`distributedLease`) is ignored: the lock is held at most `lockAtMostFor`.
 * - The task runs in node-cron's async context, not in the lock's, so `assertLocked()` and
 *   `extendActiveLock()` do not work inside it. For those, schedule `withLock(…)` from `shedlock`
 *   as the task instead.
 *
 * Give each task its own coordinator (node-cron's `runCoordinator` task option, or
 * {@link lockingTaskOptions}); a coordinator set for all tasks with `setRunCoordinator()` would
 * put every task under the same lock.
 *
 * ```ts
 * cron.schedule('0 3 * * *', backup, {
 *   name: 'nightly-backup',
 *   distributed: true,
 *   runCoordinator: lockingRunCoordinator(provider, { name: 'nightly-backup', lockAtMostFor: '10m', lockAtLeastFor: '1m' }),
 * })
 * ```
 *
 * @param executorOrProvider a `LockProvider`, or a `LockingTaskExecutor` to keep its listener.
 * @throws LockConfigurationError at once for a blank name, bad durations or a wrong provider.
 */
export function lockingRunCoordinator(executorOrProvider: ExecutorOrProvider, options: LockingRunCoordinatorOptions): Required<NodeCronRunCoordinator> {
  const lock = check('lockingRunCoordinator()', options)
  const executor = toExecutor(`lockingRunCoordinator() of lock "${lock.name}"`, executorOrProvider)
  // shouldRun and onComplete are separate calls: the run's lock waits here, keyed by the fire.
  const held = new Map<string, Held>()

  return {
    async shouldRun(key) {
      // The same fire asked twice while it runs (two tasks sharing this coordinator and a name).
      if (held.has(key)) return false
      let started!: () => void
      const acquired = new Promise<true>((resolve) => {
        started = () => resolve(true)
      })
      let release!: () => void
      const finished = new Promise<void>((resolve) => {
        release = resolve
      })
      const execution = executor.executeWithLock(() => {
        started()
        return finished
      }, lock)
      // Resolves true once the lock is taken, false when another node holds it; rejects (fail
      // closed) when the store fails.
      const skipped = execution.then(() => false as const)
      const run = await Promise.race([acquired, skipped])
      if (run) {
        skipped.catch(() => undefined) // after the lock was taken, onComplete awaits the execution
        held.set(key, { release, execution })
      }
      return run
    },
    async onComplete(key) {
      const entry = held.get(key)
      if (!entry) return
      held.delete(key)
      entry.release()
      // The executor reports a failed release to its listener (or as a warning); it never rejects here.
      await entry.execution
    },
  }
}

/**
 * node-cron 4 task options that put the task under a lock: `name`, `distributed: true`, a
 * {@link lockingRunCoordinator} and `distributedLease`. Spread them into the options of
 * `cron.schedule()`; see {@link lockingRunCoordinator} for the semantics.
 *
 * ```ts
 * import cron from 'node-cron'
 * import { lockingTaskOptions } from 'shedlock/node-cron'
 * cron.schedule('0 3 * * *', backup, { ...lockingTaskOptions(provider, { name: 'nightly-backup', lockAtMostFor: '10m', lockAtLeastFor: '1m' }), noOverlap: true })
 * ```
 *
 * @throws LockConfigurationError at once for a blank name, bad durations or a wrong provider.
 */
export function lockingTaskOptions(executorOrProvider: ExecutorOrProvider, options: LockingRunCoordinatorOptions): NodeCronLockingTaskOptions {
  const lock = check('lockingTaskOptions()', options)
  return { name: lock.name, distributed: true, runCoordinator: lockingRunCoordinator(executorOrProvider, options), distributedLease: lock.lockAtMostFor }
}

function check(where: string, options: LockingRunCoordinatorOptions): LockConfigurationOptions & { lockAtMostFor: number; lockAtLeastFor: number } {
  if (options === null || typeof options !== 'object') throw new LockConfigurationError(`${where}: options are missing; pass { name, lockAtMostFor, lockAtLeastFor? }`)
  try {
    const { name, lockAtMostFor, lockAtLeastFor } = lockConfiguration({ name: options.name, lockAtMostFor: options.lockAtMostFor, lockAtLeastFor: options.lockAtLeastFor ?? 0 })
    return { name, lockAtMostFor, lockAtLeastFor }
  } catch (error) {
    throw withContext(where, error)
  }
}
