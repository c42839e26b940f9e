import { redact } from './redact.ts'

/**
 * How a run ended, as the run ledger records it:
 * - `running`: started more than the executor's `recordRunningAfter` ago (1 s by default), not
 *   finished (or its node died: see {@link RunRecord.finishedAt}); a shorter run is written
 *   once, when it ends, and never reads back as `running`;
 * - `ok`: the task resolved;
 * - `failed`: the task threw or rejected (`error` says what);
 * - `lock-lost`: the lock could no longer be trusted while the task ran (its signal aborted with
 *   `LockLostError`): another node may have run the task at the same time;
 * - `skipped`: a slot run that did not start because the task's lock was held (a long run of an
 *   earlier slot); recorded once, by the node that claimed the slot.
 */
export type RunOutcome = 'running' | 'ok' | 'failed' | 'lock-lost' | 'skipped'

/** What the ledger keeps of a failure: the error's class and the first line of its message (secrets redacted, at most 500 characters). */
export interface RunError {
  readonly type: string
  readonly message: string
}

/** One run of a task, as the run ledger keeps it. Times are on the clock of the node that ran it. */
export interface RunRecord {
  /** Unique per run. */
  readonly id: string
  /** The lock's name. */
  readonly name: string
  /** The scheduled fire time it ran for, when the run was a slot run. */
  readonly slot: Date | undefined
  /** Which node ran it: the lock's `locked_by` where the store keeps one, else `<host>:<pid>`. */
  readonly node: string
  readonly startedAt: Date
  readonly finishedAt: Date | undefined
  readonly outcome: RunOutcome
  /** Wall time of the task in milliseconds, once finished. */
  readonly durationMs: number | undefined
  readonly error: RunError | undefined
  /** The fencing token of the lock the run held, where the store hands out tokens; `undefined` otherwise (and for skipped slots). */
  readonly fencingToken?: bigint | undefined
}

/** A task's health, from its runs in the ledger. */
export interface TaskHealth {
  readonly name: string
  /** The latest run, whatever its outcome. */
  readonly lastRun: RunRecord | undefined
  /** The latest run that ended `ok`. */
  readonly lastSuccess: RunRecord | undefined
  /** The latest run that ended `failed` or `lock-lost`. */
  readonly lastFailure: RunRecord | undefined
  /** Runs ended `failed` or `lock-lost` since the last `ok` (skipped and running ones do not count). */
  readonly consecutiveFailures: number
}

/** Options of {@link RunLedger.history}. */
export interface HistoryOptions {
  /** At most this many runs, newest first. @default 50 */
  limit?: number
}

/** The start of a run, as the executor hands it to the ledger. */
export interface RunStart {
  readonly name: string
  readonly slot: Date | undefined
  readonly node: string
  readonly startedAt: Date
  /** The fencing token of the run's lock, where the store hands out tokens; every ledger keeps it and reads it back. */
  readonly fencingToken?: bigint | undefined
}

/** The end of a run. */
export interface RunEnd {
  readonly finishedAt: Date
  readonly outcome: Exclude<RunOutcome, 'running'>
  readonly durationMs: number
  readonly error?: RunError | undefined
}

/**
 * A run started in a {@link RunLedger}: it knows its row (or entry), so that recording the end
 * needs no look-up.
 */
export interface RunHandle {
  /** The run's id in the ledger, as {@link RunRecord.id}. */
  readonly id: string
  /** Records the run's end. */
  finish(end: RunEnd): Promise<void>
}

/**
 * A run history, kept out of the lock table (Java ShedLock's table stays exactly Java's): give
 * one to `createLockingTaskExecutor(provider, { runLedger })` and every execution is recorded.
 * Writing it never makes a task fail or run twice: a failed write is reported to the listener's
 * `onRunLedgerFailed` and the debug log, and the run goes on. A run shorter than the executor's
 * `recordRunningAfter` is one `record()`; a longer one a `start()` and its handle's `finish()`.
 * Stores that have one:
 * `postgresRunLedger`, `mysqlRunLedger`, `sqliteRunLedger`, `redisRunLedger`.
 */
export interface RunLedger {
  /** Short store name, e.g. `"postgres"`. */
  readonly name: string
  /**
   * Records a run's start, as `running`; resolves to the run's handle, which records its end. The
   * executor calls it for a run still going after its `recordRunningAfter` (1 s by default).
   */
  start(run: RunStart): Promise<RunHandle>
  /**
   * Records a whole run in one write: a run that ended within the executor's `recordRunningAfter`
   * (any outcome but `running`), or a slot that was skipped. A ledger without it (plain
   * JavaScript) gets `start()` and `finish()` instead.
   */
  record(run: RunStart & RunEnd): Promise<void>
  /** The task's runs, newest first. */
  history(name: string, options?: HistoryOptions): Promise<RunRecord[]>
  /** The task's health, from its recent runs. */
  health(name: string): Promise<TaskHealth>
  /** The health of every task the ledger has runs of, sorted by name. */
  tasks(): Promise<TaskHealth[]>
}

/**
 * A task's health from its runs, newest first: what every ledger's `health()` computes from the
 * runs it keeps.
 */
export function healthOf(name: string, runs: readonly RunRecord[]): TaskHealth {
  let consecutiveFailures = 0
  let counting = true
  let lastSuccess: RunRecord | undefined
  let lastFailure: RunRecord | undefined
  for (const run of runs) {
    if (run.outcome === 'ok') {
      lastSuccess ??= run
      counting = false
    } else if (run.outcome === 'failed' || run.outcome === 'lock-lost') {
      lastFailure ??= run
      if (counting) consecutiveFailures++
    }
    if (lastSuccess && lastFailure && !counting) break
  }
  return { name, lastRun: runs[0], lastSuccess, lastFailure, consecutiveFailures }
}

/** What the ledger keeps of an error: its class and the first line of its message with its secrets redacted (`redact()`: URL passwords, `password=...`), at most 500 characters. */
export function runErrorOf(error: unknown): RunError {
  const type = error instanceof Error ? error.name || error.constructor.name : typeof error
  const message = redact((error instanceof Error ? error.message : String(error)).split('\n')[0]!).slice(0, 500)
  return { type: type.slice(0, 100), message }
}
