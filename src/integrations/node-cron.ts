import type { Duration } from '../core/duration.ts'
import { LockConfigurationError, NoActiveLockError } from '../core/errors.ts'
import { type LockConfigurationOptions, lockConfiguration } from '../core/lock-configuration.ts'
import type { CatchUpResult, CloseOptions, LockRequest } from '../core/locking-task-executor.ts'
import { fireTimesOf } from './fire-times.ts'
import {
  type CatchUpSettings,
  checkSlotSettings,
  type ExecutorOrProvider,
  kindOf,
  type SlotSettings,
  skippedCatchUp,
  toExecutor,
  withContext,
} from './lock-options.ts'
import { isNodeCronTask, type NodeCronTaskLike } from './scheduler-types.ts'
import { currentTaskContext, isShutdownStop, runInTaskContext } from './task-context.ts'

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
  /**
   * Makes each fire a slot run: the fire time in node-cron's key (`<task name>:<fire time>`, the
   * scheduled time, not the time the timer fired) is the slot, so each fire runs at most once
   * across all nodes, however late a node fires it (see docs/slots.md). @default false
   */
  slot?: boolean
  /** How long a slot's record is kept (with `slot`). @default the executor's, else "24h" */
  slotRetention?: Duration
  /** What the coordinator's `catchUp(task)` does about the slots every node missed (needs `slot`). @default no catch-up */
  catchUp?: CatchUpSettings
}

/** A node-cron 4 run coordinator that locks each fire, with a catch-up and a shutdown of its own. */
export interface LockingRunCoordinator extends Required<NodeCronRunCoordinator> {
  /**
   * Runs the slots every node missed, by the `catchUp` option's policy: the fire times of `task`
   * (its `match()`) within `catchUp.within` after the task's latest slot record, each run with
   * `task.execute()` under the lock (node-cron reports them as `'invoked'` executions); inside
   * them `assertLocked()` works and `taskContext().slot` says which slot it is. Call it once
   * when the node starts. Without the `catchUp` option, or once closed, resolves to
   * `{ outcome: 'skipped' }`.
   *
   * @throws LockConfigurationError when `task` is not a node-cron `ScheduledTask`, or for a provider without an inspector.
   * @throws LockProviderError when the store fails.
   */
  catchUp(task: NodeCronTaskLike): Promise<CatchUpResult>
  /**
   * Listens to the task's `execution:failed`, so that a fire that throws is recorded as `failed`
   * (with its error) in the run ledger and reported to the listener as a failure. node-cron tells
   * a run coordinator only that a fire completed (`onComplete(key)`), never how: without this, every
   * fire the coordinator ran is recorded `ok`. Call it once, with what `cron.schedule()` returned;
   * `catchUp(task)` calls it too. A second call for the same task does nothing.
   *
   * @throws LockConfigurationError when `task` is not a node-cron `ScheduledTask`.
   */
  watch(task: NodeCronWatchableTask): void
  /**
   * Closes the executor the coordinator runs on (see `executor.close()`): later fires are
   * skipped (`'not-elected'`), and the locks of fires in progress are released once they complete.
   */
  close(options?: CloseOptions): Promise<void>
  /**
   * The fencing token of the lock a fire runs under (docs/fencing.md), for the task to pass with
   * its writes: give it the context node-cron passes the task (`fire.date` is the fire time). In
   * a run of `catchUp(task)`, the catch-up's token. `undefined` where the store hands out none.
   *
   * ```ts
   * cron.schedule('0 3 * * *', (fire) => backup(options.runCoordinator.fencingToken(fire)), options)
   * ```
   *
   * @throws NoActiveLockError when no fire at `fire.date` holds the lock on this node (a call
   *   after the fire completed, or for another task's fire).
   */
  fencingToken(fire: { readonly date: Date }): bigint | undefined
}

/** The part of node-cron 4's `TaskOptions` that {@link lockingTaskOptions} fills in. */
export interface NodeCronLockingTaskOptions {
  name: string
  distributed: true
  runCoordinator: LockingRunCoordinator
  /** Milliseconds: `lockAtMostFor`, so node-cron's lease hint and the lock agree. */
  distributedLease: number
}

/** What {@link LockingRunCoordinator.watch} needs of a node-cron 4 `ScheduledTask`. */
export interface NodeCronWatchableTask extends NodeCronTaskLike {
  /** The task's name: node-cron's coordinator key is `<name>:<fire time>`. */
  readonly name?: string | undefined
  on(event: 'execution:failed', listener: (context: NodeCronFailedContext) => void): void
}

/** What node-cron 4 passes an `execution:failed` listener (the part we read). */
export interface NodeCronFailedContext {
  /** The fire time (for a scheduled fire, the time in the coordinator's key). */
  readonly date: Date
  readonly execution?: { readonly error?: unknown } | undefined
}

interface Held {
  /** Ends the run as the task ended: `failure` is the task's error, `undefined` when it succeeded. */
  settle(failure?: { error: unknown }): void
  /** The fencing token of the fire's lock. */
  readonly fencingToken: bigint | undefined
  /** Set by the task's `execution:failed`, which node-cron emits before `onComplete`. */
  failure: { error: unknown } | undefined
  readonly execution: Promise<unknown>
}

/**
 * A node-cron 4 run coordinator that runs each fire of a task under one named lock, with
 * shedlock's semantics: the fire runs on the node that takes the lock, every other node skips it
 * at once (`execution:skipped` with reason `'not-elected'`), and the lock is released after the
 * run, or kept until `lockAtLeastFor` has passed.
 *
 * - One lock per task, named by `options.name`, not one per fire: node-cron's key
 *   (`<task name>:<ISO time>`) pairs `shouldRun` with its `onComplete`, and with `slot: true`
 *   gives the slot (its time is the scheduled fire time): each fire then runs at most once
 *   across nodes, even on a node whose timer fired it late (skipped with `'not-elected'`).
 * - `catchUp(task)` runs the fires every node missed; `close()` closes the executor on a shutdown.
 * - Fails closed: when the store fails, `shouldRun` rejects with `LockProviderError`, so node-cron
 *   skips the fire with reason `'coordinator-error'` and logs the error.
 * - node-cron's `ttlMs` (`distributedLease`) is ignored: the lock is held at most `lockAtMostFor`.
 * - node-cron tells a coordinator when a fire completed, not how: the coordinator finds the task
 *   by its name in node-cron's registry (`getTasks()`) at its first fire and listens to its
 *   `execution:failed`, so that a fire that throws is recorded `failed`, not `ok`. Where
 *   node-cron cannot be imported from shedlock's location (a second copy of it), pass the task to
 *   `watch(task)` (or `catchUp(task)`).
 * - The task runs in node-cron's async context, not in the lock's, so `assertLocked()` and
 *   `extendActiveLock()` do not work inside it. For those, schedule `withLock(…)` from `shedlock`
 *   as the task instead. The lock's fencing token: `coordinator.fencingToken(context)`.
 *
 * Give each task its own coordinator (node-cron's `runCoordinator` task option, or
 * {@link lockingTaskOptions}); a coordinator set for all tasks with `setRunCoordinator()` would
 * put every task under the same lock.
 *
 * ```ts
 * const coordinator = lockingRunCoordinator(provider, { name: 'nightly-backup', lockAtMostFor: '10m', lockAtLeastFor: '1m' })
 * const task = cron.schedule('0 3 * * *', backup, {
 *   name: 'nightly-backup',
 *   distributed: true,
 *   runCoordinator: coordinator,
 * })
 * coordinator.watch(task)
 * ```
 *
 * @param executorOrProvider a `LockProvider`, or a `LockingTaskExecutor` to keep its listener.
 * @throws LockConfigurationError at once for a blank name, bad durations or a wrong provider.
 */
export function lockingRunCoordinator(
  executorOrProvider: ExecutorOrProvider,
  options: LockingRunCoordinatorOptions,
): LockingRunCoordinator {
  const { settings, ...lock } = check('lockingRunCoordinator()', options)
  const where = `lockingRunCoordinator() of lock "${lock.name}"`
  const executor = toExecutor(where, executorOrProvider)
  const slotRetention = settings.slotRetention === undefined ? {} : { slotRetention: settings.slotRetention }
  // shouldRun and onComplete are separate calls: the run's lock waits here, keyed by the fire.
  const held = new Map<string, Held>()
  const watched = new WeakSet<object>()
  let nextFireAt: (() => Date | undefined) | undefined
  const watch = (task: NodeCronWatchableTask): void => {
    if (!isNodeCronTask(task) || typeof (task as Partial<NodeCronWatchableTask>).on !== 'function')
      throw new LockConfigurationError(
        `${where}: watch() needs the node-cron ScheduledTask (what cron.schedule() returns), got ${kindOf(task)}`,
      )
    if (watched.has(task)) return
    watched.add(task)
    // The task's schedule, for the ledger's next fire time (overdue tasks).
    const scheduled = task as { getNextRun?: () => Date | null }
    if (typeof scheduled.getNextRun === 'function') nextFireAt = () => scheduled.getNextRun!() ?? undefined
    // node-cron emits execution:failed synchronously from its error hook, before it calls
    // onComplete (for a background task too: both cross one IPC channel, in that order). A fire's
    // key is `<task name>:<fire time>`, the fire time being the context's date.
    task.on('execution:failed', (context) => {
      const date = context?.date
      if (!(date instanceof Date) || typeof task.name !== 'string') return
      const entry = held.get(`${task.name}:${date.toISOString()}`)
      // A task that threw nothing still failed: the ledger would read `undefined` as success.
      if (entry)
        entry.failure = { error: context.execution?.error ?? new Error('the node-cron task failed without an error') }
    })
  }

  // The tasks of each name this coordinator was asked about, found once in node-cron's own
  // registry and watched: so that a failing fire is recorded failed without a watch() call.
  const looked = new Map<string, Promise<void>>()
  const watchByName = (key: string): Promise<void> => {
    const match = typeof key === 'string' ? KEY_SLOT.exec(key) : null
    const name = match ? key.slice(0, match.index) : undefined
    if (!name) return Promise.resolve()
    let found = looked.get(name)
    if (!found) {
      found = registeredTasks().then((tasks) => {
        for (const task of tasks)
          if (task.name === name && isNodeCronTask(task) && typeof task.on === 'function') watch(task)
      })
      looked.set(name, found)
    }
    return found
  }

  return {
    async shouldRun(key) {
      // The same fire asked twice while it runs (two tasks sharing this coordinator and a name).
      if (held.has(key)) return false
      await watchByName(key)
      let fencingToken: bigint | undefined
      let started!: () => void
      const acquired = new Promise<true>((resolve) => {
        started = () => resolve(true)
      })
      let settle!: Held['settle']
      const finished = new Promise<void>((resolve, reject) => {
        settle = (failure) => (failure ? reject(failure.error) : resolve())
      })
      const next = nextFireAt === undefined ? {} : { nextFireAt }
      const request: LockRequest =
        options.slot === true
          ? { ...lock, slot: slotOfKey(where, key), ...slotRetention, ...next }
          : { ...lock, ...next }
      const execution = executor.executeWithLock((context) => {
        fencingToken = context.fencingToken
        started()
        return finished
      }, request)
      // Resolves true once the lock is taken, false when another node holds it; rejects (fail
      // closed) when the store fails.
      const skipped = execution.then(() => false as const)
      const run = await Promise.race([acquired, skipped])
      if (run) {
        skipped.catch(() => undefined) // after the lock was taken, onComplete awaits the execution
        held.set(key, { settle, failure: undefined, execution, fencingToken })
      }
      return run
    },
    async onComplete(key) {
      const entry = held.get(key)
      if (!entry) return
      held.delete(key)
      const { failure } = entry
      entry.settle(failure)
      try {
        await entry.execution
      } catch (error) {
        // The task's own error, which node-cron reported already (execution:failed). The executor
        // reports a failed release to its listener (or as a warning): it rejects with nothing else.
        if (!failure || error !== failure.error) throw error
      }
    },
    watch,
    async catchUp(task) {
      if (!isNodeCronTask(task))
        throw new LockConfigurationError(
          `${where}: catchUp() needs the node-cron ScheduledTask (what cron.schedule() returns), got ${kindOf(task)}`,
        )
      if (typeof (task as Partial<NodeCronWatchableTask>).on === 'function') watch(task as NodeCronWatchableTask)
      const catchUp = settings.catchUp
      if (!catchUp || executor.closed) return skippedCatchUp()
      try {
        return await executor.catchUp(
          (context) => runInTaskContext(context, () => task.execute()),
          { ...lock, ...slotRetention },
          { policy: catchUp.policy, within: catchUp.within, fireTimes: fireTimesOf(task) },
        )
      } catch (error) {
        if (isShutdownStop(error, executor, undefined)) return skippedCatchUp()
        throw error
      }
    },
    close: (closeOptions) => executor.close(closeOptions),
    fencingToken(fire) {
      const date = fire?.date
      const at = date instanceof Date && !Number.isNaN(date.getTime()) ? `:${date.toISOString()}` : undefined
      if (at !== undefined) {
        for (const [key, entry] of held) {
          if (key.endsWith(at)) return entry.fencingToken
        }
      }
      // A catch-up run: node-cron's execute() runs the task in the catch-up's lock context.
      const context = currentTaskContext()
      if (context?.configuration.name === lock.name) return context.fencingToken
      throw new NoActiveLockError(
        `${where}: fencingToken(): no fire at ${at === undefined ? String(date) : date!.toISOString()} holds the lock on this node; call it with the context node-cron passes the task, while the task runs`,
      )
    },
  }
}

// node-cron's key: `<task name>:<fire time, toISOString()>`; the name may hold colons itself.
const KEY_SLOT = /:(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/

/** The fire time in node-cron's key. @throws LockConfigurationError when the key holds none. */
let nodeCronTasks: Promise<() => Iterable<NodeCronWatchableTask>> | undefined

/**
 * The tasks of node-cron's registry (`getTasks()`), where node-cron can be imported from here
 * (one copy of it in the application, the usual install); none otherwise, and then only the
 * tasks given to `watch()` report their failures.
 */
async function registeredTasks(): Promise<NodeCronWatchableTask[]> {
  nodeCronTasks ??= import('node-cron' as string).then(
    (module: {
      getTasks?: () => Map<string, NodeCronWatchableTask>
      default?: { getTasks?: () => Map<string, NodeCronWatchableTask> }
    }) => {
      const getTasks = module.getTasks ?? module.default?.getTasks
      return typeof getTasks === 'function' ? () => getTasks().values() : () => []
    },
    () => () => [],
  )
  try {
    return [...(await nodeCronTasks)()]
  } catch {
    return []
  }
}

function slotOfKey(where: string, key: string): Date {
  const match = typeof key === 'string' ? KEY_SLOT.exec(key) : null
  const slot = match ? new Date(match[1]!) : undefined
  if (!slot || Number.isNaN(slot.getTime())) {
    throw new LockConfigurationError(
      `${where}: slot: true needs node-cron's key "<task name>:<fire time>", got ${JSON.stringify(key)}; the fire was not run`,
    )
  }
  return slot
}

/**
 * node-cron 4 task options that put the task under a lock: `name`, `distributed: true`, a
 * {@link lockingRunCoordinator} and `distributedLease`. Spread them into the options of
 * `cron.schedule()`; see {@link lockingRunCoordinator} for the semantics.
 *
 * ```ts
 * import cron from 'node-cron'
 * import { lockingTaskOptions } from 'shedlock/node-cron'
 * const options = lockingTaskOptions(provider, { name: 'nightly-backup', lockAtMostFor: '10m', lockAtLeastFor: '1m' })
 * const task = cron.schedule('0 3 * * *', backup, { ...options, noOverlap: true })
 * options.runCoordinator.watch(task) // a fire that throws is recorded failed
 * ```
 *
 * @throws LockConfigurationError at once for a blank name, bad durations or a wrong provider.
 */
export function lockingTaskOptions(
  executorOrProvider: ExecutorOrProvider,
  options: LockingRunCoordinatorOptions,
): NodeCronLockingTaskOptions {
  const lock = check('lockingTaskOptions()', options)
  return {
    name: lock.name,
    distributed: true,
    runCoordinator: lockingRunCoordinator(executorOrProvider, options),
    distributedLease: lock.lockAtMostFor,
  }
}

function check(
  where: string,
  options: LockingRunCoordinatorOptions,
): LockConfigurationOptions & { lockAtMostFor: number; lockAtLeastFor: number; settings: SlotSettings } {
  if (options === null || typeof options !== 'object')
    throw new LockConfigurationError(`${where}: options are missing; pass { name, lockAtMostFor, lockAtLeastFor? }`)
  let lock: { name: string; lockAtMostFor: number; lockAtLeastFor: number }
  try {
    const { name, lockAtMostFor, lockAtLeastFor } = lockConfiguration({
      name: options.name,
      lockAtMostFor: options.lockAtMostFor,
      lockAtLeastFor: options.lockAtLeastFor ?? 0,
    })
    lock = { name, lockAtMostFor, lockAtLeastFor }
  } catch (error) {
    throw withContext(where, error)
  }
  const at = `${where} of lock "${lock.name}"`
  if (options.slot !== undefined && typeof options.slot !== 'boolean')
    throw new LockConfigurationError(`${at}: slot must be true or false, got ${kindOf(options.slot)}`)
  return { ...lock, settings: checkSlotSettings(at, { ...options, slot: options.slot === true ? true : undefined }) }
}
