import type { LockRecord } from './lock-inspector.ts'
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
 *   earlier slot, with `overlap: 'skip'`), or a missed or owed slot folded into a later one by the
 *   `'once'` policy; recorded once;
 * - `abandoned`: never written, only read: a `running` run that cannot be running any more, as
 *   its node died (or was stopped) before it wrote the run's end. A run reads so once a later run
 *   of the task started (runs of one task never overlap), and, where the reader sees the lock
 *   (`shedlock history` and `status`, the dashboard), once its lock is no longer held by its node.
 *   It counts as a failure.
 */
export type RunOutcome = 'running' | 'ok' | 'failed' | 'lock-lost' | 'skipped' | 'abandoned'

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
  /**
   * The task's next fire time as its scheduler gave it when the run was written (see
   * `ExecutionOptions.nextFireAt`); `undefined` for a run without a schedule, or written before
   * ledgers kept it. A task whose latest run has one that passed long ago is overdue.
   */
  readonly nextFireAt?: Date | undefined
  /**
   * Who asked for the run with `shedlock trigger` (a manual run, outside the schedule); `undefined`
   * for a scheduled run, or one written before ledgers kept it.
   */
  readonly triggeredBy?: string | undefined
}

/** A task's health, from its runs in the ledger. */
export interface TaskHealth {
  readonly name: string
  /** The latest run, whatever its outcome. */
  readonly lastRun: RunRecord | undefined
  /** The latest run that ended `ok`. */
  readonly lastSuccess: RunRecord | undefined
  /** The latest run that ended `failed`, `lock-lost` or `abandoned`. */
  readonly lastFailure: RunRecord | undefined
  /** Runs ended `failed`, `lock-lost` or `abandoned` since the last `ok` (skipped and running ones do not count). */
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
  /** The task's next fire time, when its scheduler gave one; every ledger keeps it and reads it back. */
  readonly nextFireAt?: Date | undefined
  /** Who triggered the run (`shedlock trigger`), for a manual run; every ledger keeps it (up to 255 characters) and reads it back. */
  readonly triggeredBy?: string | undefined
}

/** The end of a run. */
export interface RunEnd {
  readonly finishedAt: Date
  readonly outcome: Exclude<RunOutcome, 'running' | 'abandoned'>
  readonly durationMs: number
  readonly error?: RunError | undefined
  /** The task's next fire time as its scheduler gives it at the run's end (a long run's `finish()` writes it over its start's). */
  readonly nextFireAt?: Date | undefined
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
 * `postgresRunLedger`, `mysqlRunLedger`, `sqliteRunLedger`, `spannerRunLedger`, `redisRunLedger`,
 * `firestoreRunLedger`, `datastoreRunLedger`.
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
  runs = withAbandoned(runs)
  for (const run of runs) {
    if (run.outcome === 'ok') {
      lastSuccess ??= run
      counting = false
    } else if (run.outcome === 'failed' || run.outcome === 'lock-lost' || run.outcome === 'abandoned') {
      lastFailure ??= run
      if (counting) consecutiveFailures++
    }
    if (lastSuccess && lastFailure && !counting) break
  }
  return { name, lastRun: runs[0], lastSuccess, lastFailure, consecutiveFailures }
}

/**
 * The health of each of `names`, in that order, from the runs `read` gives (newest first), one
 * task at a time (a ledger's `tasks()` reads at most `keep` runs a task, so a fleet of tasks never
 * comes back in one read); a task `read` has no runs of is left out.
 */
export async function healthOfTasks(
  names: readonly string[],
  read: (name: string) => Promise<readonly RunRecord[]>,
): Promise<TaskHealth[]> {
  const health: TaskHealth[] = []
  for (const name of names) {
    const runs = await read(name)
    if (runs.length > 0) health.push(healthOf(name, runs))
  }
  return health
}

/**
 * A task's runs, newest first, with every `running` run that a later run of the task followed
 * read as `abandoned`: runs of one task never overlap, so its node died before writing its end.
 * Every ledger's `history()`, `health()` and `tasks()` read runs through it.
 */
export function withAbandoned<R extends readonly RunRecord[]>(runs: R): R {
  let changed: RunRecord[] | undefined
  for (let i = 1; i < runs.length; i++) {
    const run = runs[i]!
    if (run.outcome !== 'running' || !startedLater(runs, i)) continue
    changed ??= [...runs]
    changed[i] = abandoned(run)
  }
  return (changed ?? runs) as unknown as R
}

/**
 * `runs` (newest first) with the latest read as `abandoned` when it is `running` but `lock`, the
 * task's lock as an inspector reads it now, is not held by its node: its node died, or its lock
 * lapsed, before it wrote the run's end. Where the store keeps no holder, a held lock counts.
 */
export function withLockState(runs: readonly RunRecord[], lock: LockRecord | undefined): RunRecord[] {
  const latest = runs[0]
  const out = [...withAbandoned(runs)]
  if (latest?.outcome !== 'running') return out
  if (!stillHeldBy(lock, latest)) out[0] = abandoned(latest)
  return out
}

/**
 * `health` as {@link withLockState} reads it: where its latest run is `running` but `lock` (the
 * task's lock, read now) is not held by that run's node, it is read again from the task's recent
 * runs with that run abandoned. Any other health is returned as it is, with no read.
 */
export async function healthWithLockState(
  ledger: RunLedger,
  health: TaskHealth,
  lock: LockRecord | undefined,
): Promise<TaskHealth> {
  const latest = health.lastRun
  if (latest?.outcome !== 'running') return health
  if (stillHeldBy(lock, latest)) return health
  return healthOf(health.name, withLockState(await ledger.history(health.name, { limit: 200 }), lock))
}

// True while `lock` is held by `run`'s node (by anyone, where the store keeps no holder).
function stillHeldBy(lock: LockRecord | undefined, run: RunRecord): boolean {
  return lock?.held === true && (lock.lockedBy === undefined || lock.lockedBy === run.node)
}

function startedLater(runs: readonly RunRecord[], index: number): boolean {
  const started = runs[index]!.startedAt.getTime()
  for (let j = 0; j < index; j++)
    if (runs[j]!.startedAt.getTime() > started && runs[j]!.outcome !== 'skipped') return true
  return false
}

function abandoned(run: RunRecord): RunRecord {
  return {
    ...run,
    outcome: 'abandoned',
    error: { type: 'Abandoned', message: 'its node stopped before it recorded the end of the run; its lock lapsed' },
  }
}

/** What the ledger keeps of an error: its class and the first line of its message with its secrets redacted (`redact()`: URL passwords, `password=...`), at most 500 characters. */
export function runErrorOf(error: unknown): RunError {
  const type = error instanceof Error ? error.name || error.constructor.name : typeof error
  const message = redact((error instanceof Error ? error.message : String(error)).split('\n')[0]!).slice(0, 500)
  return { type: type.slice(0, 100), message }
}
