import { ExecutorClosedError, LockConfigurationError } from './errors.ts'
import type { LockExecution } from './diagnostics.ts'
import type { Duration } from './duration.ts'
import type { LockConfiguration, LockConfigurationOptions } from './lock-configuration.ts'
import type { ActiveLock } from './active-lock.ts'
import type { OverlapPolicy } from './overlap.ts'

/** What a locked task receives. */
export interface TaskContext {
  /**
   * Aborts when the task should stop: with a `LockLostError` when the lock can no longer be
   * trusted (`lockAtMostUntil` passed without an extension, or a keep-alive extension failed),
   * with an `ExecutorClosedError` when the executor is closed (a shutdown), or with the reason of
   * the caller's own `signal`. Long tasks should stop when it aborts.
   */
  readonly signal: AbortSignal
  /** The lock the task runs under. */
  readonly configuration: LockConfiguration
  /** The scheduled fire time this run is for: a slot run, or a catch-up of a missed slot; `undefined` otherwise. */
  readonly slot: Date | undefined
  /**
   * The fencing token of the lock the task runs under: pass it with each write to a resource that
   * checks it (docs/fencing.md). `undefined` where the store hands out none (see `SimpleLock.fencingToken`).
   */
  readonly fencingToken: bigint | undefined
}

/** A task to run under a lock. */
export type LockedTask<T> = (context: TaskContext) => T | Promise<T>

/**
 * Why `executeWithLock()` did not run the task:
 * - `'held'`: another node (or another call of this process) holds the lock;
 * - `'slot-done'`: a slot run (the `slot` option) that ran, or was skipped, on some node already;
 * - `'owed'`: a slot run whose lock was held: the slot is owed, and runs once the lock frees, on
 *   whichever node takes it next (this one polls for it in the background; see `overlap`);
 * - `'paused'`: an operator paused the task (`shedlock pause`): its lock is held by the pause
 *   until it is resumed or its `--for` passes; a slot due meanwhile is not owed (see docs/cli.md);
 * - `'closed'`: the executor was closed (`close()`, on a shutdown) and runs nothing new.
 */
export type SkipReason = 'held' | 'slot-done' | 'owed' | 'paused' | 'closed'

/**
 * The outcome of `executeWithLock()`: the task's result, or `{ executed: false, reason }` when it
 * did not run. Test `executed` first; `reason` says why it was skipped.
 */
export type TaskResult<T> = { executed: true; result: T } | { executed: false; reason: SkipReason }

/**
 * Per-call options of `executeWithLock()`, next to the lock's: pass them in the options object,
 * or as the third argument with a ready `LockConfiguration`.
 */
export interface ExecutionOptions {
  /**
   * The caller's signal: aborted before the lock is taken, the call rejects with its reason and
   * the store is not asked; aborted while the task runs, the task's own `signal` aborts with the
   * same reason (the lock stays held until the task ends, and is released as usual).
   */
  signal?: AbortSignal
  /**
   * The scheduled fire time this run is for (a slot). For one name and slot, the task runs at most
   * once across all nodes, for as long as the slot's record is kept (`slotRetention`), whatever
   * the nodes' clocks, `lockAtLeastFor` or the task's duration: a later attempt resolves to
   * `{ executed: false, reason: 'slot-done' }`. The first node to claim the slot decides it: it
   * runs the task, or, when the lock is held (a run of an earlier slot, a catch-up, a holder that
   * died), owes it by `overlap`. A failed run counts as run. See docs/slots.md.
   */
  slot?: Date
  /**
   * A slot run whose lock is held: `'all'` owes the slot, which runs once the lock frees, after
   * the slots owed before it (`{ executed: false, reason: 'owed' }` here); `'once'` owes it too,
   * but only the latest owed slot runs then, the older ones are recorded as skipped; `'skip'`
   * records it as skipped (`reason: 'held'`) and it never runs.
   * @default the executor's `overlap`, else "all"
   */
  overlap?: OverlapPolicy
  /**
   * How long a slot's record is kept, in milliseconds or a duration string: longer than the worst
   * clock skew and scheduling delay between nodes, and than any catch-up window.
   * @default the executor's `slotRetention`, else "24h"
   */
  slotRetention?: Duration
  /**
   * The task's next fire time after now, as its scheduler computes it (croner's `job.nextRun()`,
   * cron's `job.nextDate()`, node-schedule's `job.nextInvocation()`, node-cron's
   * `task.getNextRun()`, or the last fire plus the interval): called when a run of the task is
   * written to the run ledger, which keeps the date with the run, so that `shedlock status`,
   * `/healthz`, the metrics and the dashboard call the task overdue once that time passes by more
   * than a grace with no run, even with no replica up. The integrations (`withLock`,
   * `@SchedulerLock`, the node-cron coordinator) pass it for you. Not called without a ledger; a
   * throw or a non-date records the run without it. @default none: the task is never overdue
   */
  nextFireAt?: () => Date | null | undefined
}

/** What `executeWithLock()` takes: the lock's options and the call's. */
export type LockRequest = LockConfigurationOptions & ExecutionOptions

/** The {@link TaskContext} of one run: its signal is the lock's, made only when the task reads it. */
export class RunContext implements TaskContext {
  readonly #active: ActiveLock
  readonly configuration: LockConfiguration
  readonly slot: Date | undefined

  constructor(active: ActiveLock, configuration: LockConfiguration, slot: Date | undefined) {
    this.#active = active
    this.configuration = configuration
    this.slot = slot
  }

  get signal(): AbortSignal {
    return this.#active.signal
  }

  get fencingToken(): bigint | undefined {
    return this.#active.fencingToken
  }
}

/** The reason a running task's signal aborts when its executor closes. */
export function closedReason(): ExecutorClosedError {
  return new ExecutorClosedError(
    'The executor was closed (a shutdown): stop the task, so that its lock is released before the process exits',
  )
}

/** `signal` when it is an AbortSignal (or absent); anything else is a configuration error. */
export function callerSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined
  if (!(signal instanceof AbortSignal))
    throw new LockConfigurationError(`executeWithLock(): signal must be an AbortSignal, got ${typeof signal}`)
  return signal
}

let lastExecutionId = 0

/**
 * The {@link LockExecution} of one call: frozen, but for its fencing token, set once its lock is
 * taken. The token is a getter on the prototype, not an own property, so that a listener that
 * spreads or JSON-serializes the execution meets no bigint.
 */
class Execution implements LockExecution {
  readonly id: number
  readonly provider: string | undefined
  readonly reentrant: boolean
  #fencingToken: bigint | undefined

  constructor(provider: string | undefined, reentrant: boolean, fencingToken: bigint | undefined) {
    lastExecutionId += 1
    this.id = lastExecutionId
    this.provider = provider
    this.reentrant = reentrant
    this.#fencingToken = fencingToken
    Object.freeze(this)
  }

  get fencingToken(): bigint | undefined {
    return this.#fencingToken
  }

  static taken(execution: LockExecution, fencingToken: bigint | undefined): void {
    if (execution instanceof Execution) execution.#fencingToken = fencingToken
  }
}

/**
 * A new {@link LockExecution}: the object every hook of one call receives. A re-entrant one
 * carries the outer lock's `fencingToken` from the start.
 */
export function newExecution(
  provider: string | undefined,
  reentrant: boolean,
  fencingToken?: bigint | undefined,
): LockExecution {
  return new Execution(provider, reentrant, fencingToken)
}

/** Records on `execution` the fencing token of the lock it just took (before `onLockAcquired`). */
export function lockTaken(execution: LockExecution, fencingToken: bigint | undefined): void {
  Execution.taken(execution, fencingToken)
}

/** The message of an error, or the text of anything else thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
