import type { Clock } from './clock.ts'
import type { LockExecution } from './diagnostics.ts'
import type { Duration } from './duration.ts'
import { LockProviderError, type LockProviderErrorOptions } from './errors.ts'
import type { Emit } from './executor-events.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import type { ActiveLock } from './active-lock.ts'
import type { LockInspector } from './lock-inspector.ts'
import type { LockProvider, SimpleLock } from './lock-provider.ts'
import type { RunRecorder } from './run-recorder.ts'
import type { LockedTask, TaskContext, TaskResult } from './task.ts'

/**
 * What to do about slots every node missed (all were down at their fire time: a deploy, an outage):
 * - `'skip'`: nothing (the default of the integrations);
 * - `'once'`: one run for all of them (for the latest; the others are recorded as skipped);
 * - `'all'`: each of them, oldest first.
 * Catch-up runs are slot runs too: each slot runs at most once across nodes.
 */
export type CatchUpPolicy = 'skip' | 'once' | 'all'

/** Options of `LockingTaskExecutor.catchUp()`. */
export interface CatchUpOptions {
  policy: CatchUpPolicy
  /** How far back a missed slot still counts, in milliseconds or a duration string; at most the slot retention. */
  within: Duration
  /**
   * The schedule's fire times between `from` and `to` (both included), oldest first: what the
   * scheduler would have fired. The integrations ask the scheduler itself (croner's `enumerate()`,
   * cron's `CronTime`, node-cron's `match()`).
   */
  fireTimes: (from: Date, to: Date) => Iterable<Date>
}

/** What `LockingTaskExecutor.catchUp()` did. */
export interface CatchUpResult {
  /**
   * - `'ran'`: missed slots were found and handled (see `ran`, `failed` and `notRun`);
   * - `'nothing-missed'`: the task's latest slot is its schedule's latest fire time;
   * - `'no-history'`: no slot record of the task within the retention: a new task, or one stopped
   *   longer than the retention, has nothing to catch up;
   * - `'held'`: another node holds the lock (it runs, or catches up, right now): the missed slots
   *   are owed in the store, and run when the lock frees (this node waits for it in the background);
   * - `'paused'`: the task is paused (`shedlock pause`): nothing is owed or run, and this node
   *   does not try again; call `catchUp()` after `shedlock resume` for fire times missed before it;
   * - `'skipped'`: the policy is `'skip'`, or the executor is closed.
   */
  readonly outcome: 'ran' | 'nothing-missed' | 'no-history' | 'held' | 'paused' | 'skipped'
  /** The slots this node found missed, oldest first. */
  readonly missed: readonly Date[]
  /** The slots run by this catch-up, oldest first. */
  readonly ran: readonly Date[]
  /** The catch-up runs whose task failed, with the error (each recorded in the run ledger). */
  readonly failed: readonly { readonly slot: Date; readonly error: unknown }[]
  /**
   * Owed slots this catch-up meant to run and did not, because it stopped first (`stoppedBy`
   * says why) or another node held the lock (`outcome: 'held'`): they stay owed in the store, and
   * the next node to take the task's lock runs them. Empty when it ran every one.
   */
  readonly notRun: readonly Date[]
  /**
   * Why the catch-up stopped before handling every missed slot: an `ExecutorClosedError` (a
   * shutdown), a `LockLostError` (its lock expired, or could not be extended in time), or the
   * caller's signal's reason. `undefined` when it handled them all. A store failure rejects
   * instead, with a {@link CatchUpError}.
   */
  readonly stoppedBy?: unknown
}

/**
 * A catch-up the store failed in the middle of: the `LockProviderError` of the failure, with what
 * the catch-up did before it in `result` (the slots it ran, those that failed, and those it did not
 * run: given back, so that a later catch-up can run them).
 */
export class CatchUpError extends LockProviderError {
  override name = 'CatchUpError'
  /** What the catch-up did before the store failed. */
  readonly result: CatchUpResult

  constructor(message: string, result: CatchUpResult, options: LockProviderErrorOptions = {}) {
    super(message, options)
    this.result = result
  }
}

/** A task lock held by a catch-up, registered with the executor (close() aborts it) until `done()`. */
export interface HeldTaskLock {
  readonly active: ActiveLock
  /**
   * The task ended: unregisters the lock, at once, or, where runs joined to it (re-entrant calls)
   * still run, through the promise it returns, once they settled.
   */
  done(): Promise<void> | undefined
}

/** What a catch-up needs of its executor: the same lock, run, release and recording steps as every run (run-steps.ts). */
export interface CatchUpRuntime {
  /** Takes task locks (a keep-alive wrapper, when the caller gave one). */
  readonly provider: LockProvider
  /** Takes slot claims: the provider without a keep-alive wrapper, as claims must expire by themselves. */
  readonly claimer: LockProvider
  readonly providerName: string | undefined
  readonly clock: Clock
  /** The executor's slot retention, in milliseconds. */
  readonly defaultRetention: number
  /** How long the store holds a task lock at a time, in milliseconds; 0: not leased. */
  readonly leaseMs: number
  /** What the store is asked for to take the task lock of `configuration` (a lease of it, where leases apply). */
  taskLock(configuration: LockConfiguration): LockConfiguration
  readonly emit: Emit
  /** Where runs are recorded, if the executor has a ledger. */
  readonly recorder: RunRecorder
  /** True once the executor was closed. */
  closed(): boolean
  /** The claimer's inspector, made once. */
  inspector(): LockInspector | undefined
  /** `call`, tracked: close() waits for it. */
  track<T>(call: Promise<T>): Promise<T>
  /** Asks `from` for `lock`; a store failure is reported as the failure of `configuration` and thrown as a `LockProviderError`. */
  acquire(
    from: LockProvider,
    lock: LockConfiguration,
    configuration: LockConfiguration,
    execution: LockExecution,
  ): Promise<SimpleLock | undefined>
  /** Watches a task lock just taken (lock loss, close()) until `done()`. */
  hold(configuration: LockConfiguration, handle: SimpleLock, execution: LockExecution): HeldTaskLock
  /** Releases a task lock, bounded in time; a failure is reported, never thrown. */
  release(active: ActiveLock, execution: LockExecution): Promise<void>
  runTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): Promise<TaskResult<T>>
  /** Who holds `handle`, as the ledger names nodes. */
  ownerOf(handle: SimpleLock): string
}
