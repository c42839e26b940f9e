import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { CatchUpResult, CloseOptions, LockRequest, OverlapPolicy } from '../core/locking-task-executor.ts'
import { fireTimesOf } from './fire-times.ts'
import {
  type CatchUpSettings,
  checkDurations,
  checkName,
  checkSlotSettings,
  type ExecutorOrProvider,
  kindOf,
  slotFromFunction,
  skippedCatchUp,
  toExecutor,
  withContext,
} from './lock-options.ts'
import { nextFireOfCall } from './next-fire.ts'
import { nominalFireTime } from './nominal-fire-time.ts'
import type { CatchUpSchedule } from './scheduler-types.ts'
import { isShutdownStop, runInTaskContext } from './task-context.ts'

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
   * not run), the task's own error, or a `LockConfigurationError` from a dynamic name or slot. The
   * call then resolves to `undefined`. Use it where nobody awaits the returned promise, as in
   * croner, node-schedule or `setInterval`, where a rejection is an unhandled rejection that ends
   * the process. If `onError` throws, the call rejects with that error. @default undefined: reject
   */
  onError?: (error: unknown) => void
  /**
   * Makes each call a slot run: it runs at most once per (name, scheduled fire time) across all
   * nodes, however late a node fires it and whatever `lockAtLeastFor` says (see docs/slots.md).
   *
   * - `true`: the scheduler's nominal fire time, read from its call: croner's `Cron` job (first
   *   argument), node-schedule's fire date (first argument), node-cron 4's context (first
   *   argument), cron's `CronJob` (`this` of `onTick`). A call that carries none (by hand, cron's
   *   `context` option) rejects with `LockConfigurationError`.
   * - a function of the call's arguments (and `this`) that returns the slot, e.g.
   *   {@link intervalSlot} for `setInterval`. Returning anything but a valid `Date` rejects the
   *   call with `LockConfigurationError`: a call never runs without its slot.
   */
  slot?: true | ((this: This, ...args: Args) => Date | undefined)
  /** How long a slot's record is kept (with `slot`). @default the executor's, else "24h" */
  slotRetention?: Duration
  /**
   * With `slot`: what happens to a fire time that comes while the task's lock is held: `'all'`
   * owes it, and it runs once the lock frees; `'once'` owes it, but only the latest owed fire runs
   * then; `'skip'` drops it (see docs/slots.md). @default the executor's, else "all"
   */
  overlap?: OverlapPolicy
  /**
   * The task's next fire time after now, for the run ledger (see `ExecutionOptions.nextFireAt`):
   * a task whose next fire time passed by more than a grace with no run reads as overdue in
   * `shedlock status`, `/healthz` and the dashboard. Read from the call for croner, cron,
   * node-schedule and node-cron 4; give it for anything else, e.g. for `setInterval(fn, period)`:
   * `() => new Date(Date.now() + period)`. @default the scheduler's, where the call carries it
   */
  nextFireAt?: () => Date | null | undefined
  /**
   * A shutdown signal: once it aborts, new calls resolve to `undefined` without asking the store,
   * and running calls' task signals (see `taskContext()`) abort with its reason. A call that then
   * rejects with that reason resolves to `undefined`.
   */
  signal?: AbortSignal
  /**
   * What `catchUp(schedule)` of the returned function does about the slots every node missed
   * (needs `slot`, and a fixed `name`). @default no catch-up
   */
  catchUp?: CatchUpSettings
}

/** The methods of a {@link withLock} function, besides the call itself. */
export interface LockedFunctionControls {
  /**
   * Runs the slots every node missed, by the `catchUp` option's policy: the fire times of
   * `schedule` within `catchUp.within` after the task's latest slot record. Call it once when
   * the node starts. Each catch-up run calls the function without arguments (`this` undefined);
   * `taskContext().slot` says which slot it is for. Without the `catchUp` option, or once the
   * `signal` aborted or the executor closed, resolves to `{ outcome: 'skipped' }`.
   *
   * @param schedule the scheduler's own fire times: a croner `Cron`, a cron `CronJob`, a
   *   node-cron `ScheduledTask`, or a function `(from, to) => Date[]`.
   * @throws LockConfigurationError for a schedule of another kind, or a provider without an inspector.
   * @throws LockProviderError when the store fails.
   */
  catchUp(schedule: CatchUpSchedule): Promise<CatchUpResult>
  /**
   * Closes the executor this function runs on (the one passed to `withLock`, or the one it built
   * over the provider): see `executor.close()`. Calls then resolve to `undefined`.
   */
  close(options?: CloseOptions): Promise<void>
}

/** What {@link withLock} returns: `fn`'s parameters and `this`, resolving to its result, or to `undefined` when skipped. */
export type LockedFunction<This, Args extends unknown[], R> = ((
  this: This,
  ...args: Args
) => Promise<Awaited<R> | undefined>) &
  LockedFunctionControls

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
 * With `slot`, each scheduled fire runs at most once across nodes, however late a node fires it;
 * `catchUp(schedule)` of the returned function runs the fires every node missed; `close()` (or
 * the `signal` option) stops it on a shutdown. See docs/slots.md.
 *
 * ```ts
 * const report = withLock(provider, { name: 'nightly-report', lockAtMostFor: '10m', slot: true, catchUp: { policy: 'once', within: '6h' }, onError }, sendReport)
 * const job = new Cron('0 3 * * *', report)
 * await report.catchUp(job)
 * process.once('SIGTERM', () => void report.close().then(() => process.exit(0)))
 * ```
 *
 * @param executorOrProvider a `LockProvider`, or a `LockingTaskExecutor` to keep its listener.
 * @throws LockConfigurationError at once for a missing or blank name, bad durations,
 *   `lockAtLeastFor` above `lockAtMostFor`, a `fn` or provider of the wrong kind, or bad `slot`,
 *   `slotRetention`, `signal` or `catchUp` options.
 * @returns a function whose promise rejects with `LockProviderError` when the store fails (the
 *   task did not run), with `LockConfigurationError` when the call's slot cannot be known, and
 *   with `fn`'s own errors, unless `onError` is given. A run stopped by the shutdown (its task
 *   rejects with the reason its signal aborted with) resolves to `undefined`.
 */
export function withLock<This, Args extends unknown[], R>(
  executorOrProvider: ExecutorOrProvider,
  options: WithLockOptions<This, Args>,
  fn: (this: This, ...args: Args) => R,
): LockedFunction<This, Args, R> {
  const label =
    typeof options?.name === 'string' && options.name.trim() !== ''
      ? `withLock() of lock "${options.name}"`
      : 'withLock()'
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError(`${label}: options are missing; pass { name, lockAtMostFor, lockAtLeastFor? }`)
  }
  const { name, lockAtMostFor, lockAtLeastFor, onError } = options
  checkName(label, name)
  if (lockAtMostFor === undefined) {
    throw new LockConfigurationError(
      `${label}: lockAtMostFor is required; set it well above the task's normal duration, e.g. "10m"`,
    )
  }
  const durations = checkDurations(label, lockAtMostFor, lockAtLeastFor)
  if (typeof fn !== 'function')
    throw new LockConfigurationError(`${label}: the task must be a function, got ${typeof fn}`)
  if (onError !== undefined && typeof onError !== 'function')
    throw new LockConfigurationError(`${label}: onError must be a function, got ${typeof onError}`)
  const { slot, signal, overlap, nextFireAt } = options
  if (nextFireAt !== undefined && typeof nextFireAt !== 'function')
    throw new LockConfigurationError(
      `${label}: nextFireAt must be a function that returns the next fire time, got ${kindOf(nextFireAt)}`,
    )
  if (overlap !== undefined && overlap !== 'all' && overlap !== 'once' && overlap !== 'skip')
    throw new LockConfigurationError(`${label}: overlap must be 'all', 'once' or 'skip', got ${kindOf(overlap)}`)
  if (slot !== undefined && slot !== true && typeof slot !== 'function') {
    throw new LockConfigurationError(
      `${label}: slot must be true (the scheduler's fire time) or a function that returns the slot, got ${kindOf(slot)}`,
    )
  }
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new LockConfigurationError(`${label}: signal must be an AbortSignal, got ${kindOf(signal)}`)
  const settings = checkSlotSettings(label, options)
  const executor = toExecutor(label, executorOrProvider)
  const slotRetention = settings.slotRetention === undefined ? {} : { slotRetention: settings.slotRetention }
  const shutdown = signal === undefined ? {} : { signal }

  const run = async (self: This, args: Args): Promise<Awaited<R> | undefined> => {
    try {
      // Everything up to executeWithLock() runs in the scheduler's own call, before any await:
      // croner's currentRun() and cron's lastDate() are still this run's.
      if (signal?.aborted) return undefined
      const lockName = typeof name === 'function' ? nameOf(self, args) : name
      // Written out, one shape for every call: with spreads of the optional parts this function
      // was 2.5 % of a profile of slot runs, 0.4 % without.
      const request: LockRequest = {
        name: lockName,
        lockAtMostFor: durations.lockAtMostFor!,
        lockAtLeastFor: durations.lockAtLeastFor ?? 0,
        slot: slot === undefined ? undefined : slotOf(self, args, lockName),
        slotRetention: settings.slotRetention,
        overlap,
        signal,
        nextFireAt: nextFireAt ?? nextFireOfCall(self, args),
      }
      const outcome = await executor.executeWithLock(
        (context) => runInTaskContext(context, () => fn.apply(self, args)),
        request,
      )
      return outcome.executed ? (outcome.result as Awaited<R>) : undefined
    } catch (error) {
      // Stopped by the shutdown (the signal, or a closed executor): skipped, not failed.
      if (isShutdownStop(error, executor, signal)) return undefined
      if (!onError) throw error
      onError(error)
      return undefined
    }
  }

  // The slot of one call: the scheduler's fire time, or the slot function's; checked here.
  const slotOf = (self: This, args: Args, lockName: string): Date => {
    const where = `withLock() of lock "${lockName}"`
    if (slot === true) return nominalFireTime(where, self, args)
    return slotFromFunction(slot as (...args: never[]) => unknown, self, args, where)
  }

  // A computed name is checked here, so that its error says where the name came from.
  const nameOf = (self: This, args: Args): string => {
    let computed: unknown
    try {
      computed = (name as (this: This, ...args: Args) => string).apply(self, args)
    } catch (error) {
      throw new LockConfigurationError(
        `${label}: the name function threw: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      )
    }
    try {
      lockConfiguration({
        name: computed as string,
        lockAtMostFor: durations.lockAtMostFor!,
        lockAtLeastFor: durations.lockAtLeastFor ?? 0,
      })
    } catch (error) {
      throw withContext(`${label}: the name function returned ${JSON.stringify(computed) ?? String(computed)}`, error)
    }
    return computed as string
  }

  const controls: LockedFunctionControls = {
    async catchUp(schedule) {
      const fireTimes = fireTimesOf(schedule)
      const catchUp = settings.catchUp
      if (!catchUp || signal?.aborted || executor.closed) return skippedCatchUp()
      const request: LockRequest = {
        name: name as string,
        lockAtMostFor: durations.lockAtMostFor!,
        lockAtLeastFor: durations.lockAtLeastFor ?? 0,
        ...slotRetention,
        ...shutdown,
      }
      try {
        return await executor.catchUp(
          (context) => runInTaskContext(context, () => fn.apply(undefined as This, [] as unknown as Args)),
          request,
          {
            policy: catchUp.policy,
            within: catchUp.within,
            fireTimes,
          },
        )
      } catch (error) {
        if (isShutdownStop(error, executor, signal)) return skippedCatchUp()
        throw error
      }
    },
    close: (closeOptions) => executor.close(closeOptions),
  }
  const locked = function (this: This, ...args: Args) {
    return run(this, args)
  }
  return Object.assign(locked, controls)
}
