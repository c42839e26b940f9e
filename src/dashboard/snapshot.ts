import { LockProviderError } from '../core/errors.ts'
import type { LockInspector, LockRecord } from '../core/lock-inspector.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { redact } from '../core/redact.ts'
import { pauseOf } from '../core/pause.ts'
import { isTriggerRecordName } from '../core/trigger.ts'
import {
  healthWithLockState,
  type RunLedger,
  type RunRecord,
  type TaskHealth,
  withLockState,
} from '../core/run-ledger.ts'
import { catchUpMarkerName, parseOwedRecordName, parseSlotRecordName } from '../core/slots.ts'
import { type StatusRow, statusVerdict, type VerdictChecks } from '../status/verdict.ts'

export type { DashboardWindow } from './window.ts'

/**
 * One store the dashboard shows: its inspector (locks) and, where the store keeps one, its run
 * ledger (tasks, runs, health). Build it from the store's subpath, e.g.
 * `{ label: 'orders db', inspector: postgresLockInspector({ client }), runLedger: postgresRunLedger({ client }) }`.
 */
export interface DashboardStore {
  /** What the page names the store by. Never put a password here: it is shown as it is (URL passwords are masked anyway). */
  readonly label: string
  readonly inspector: LockInspector
  /** The store's run history; without it, the page shows locks only. */
  readonly runLedger?: RunLedger | undefined
  /**
   * What the page says of the store without `runLedger`, after "This store keeps no run history:"
   * (the CLI names the stores that keep one); secrets in it are masked, as in `label`. @default a
   * pointer to the `runLedger` option
   */
  readonly noHistoryNote?: string | undefined
  /**
   * The store's lock provider holding locks as `lockedBy`, for pauses (`allowPause`): a pause is
   * the task's lock held as `paused by WHO — REASON`, e.g.
   * `(lockedBy) => postgresLockProvider({ client, lockedBy })`. Without it, the store's tasks
   * cannot be paused or resumed from the page.
   */
  readonly provider?: ((lockedBy: string) => LockProvider) | undefined
}

/** A task as the page shows it: the verdict of `shedlock status`, its lock, and its runs within the window. */
export interface TaskView extends StatusRow {
  /** The task's lock record, when the store has one. */
  readonly lock: LockRecord | undefined
  /**
   * The task's runs since the read's `from` (started, ended or still running after it), newest
   * first (at most {@link RUNS_PER_TASK}): the timeline draws those within its window.
   */
  readonly runs: readonly RunRecord[]
}

/** What one store holds at one read. */
export interface StoreSnapshot {
  readonly label: string
  /** Whose clock `now` is read on, as the inspector says. */
  readonly clock: string
  /** The store's now at the read (this host's when the locks could not be listed). */
  readonly now: Date
  /** Task locks, sorted by name: every record but slot records and catch-up markers. */
  readonly locks: readonly LockRecord[]
  /** Slot records (`<name>@<slot>`), owed records, triggers (`<name>@trigger`) and catch-up markers, apart from the task locks. */
  readonly slotRecords: readonly LockRecord[]
  /** `undefined` when the store keeps no run ledger. */
  readonly tasks: readonly TaskView[] | undefined
  /** The store's {@link DashboardStore.noHistoryNote}. */
  readonly noHistoryNote?: string | undefined
  /** The tasks `shedlock status` would fail for (stale, overdue or failing, among those it checks). */
  readonly staleNames: readonly string[]
  readonly overdueNames: readonly string[]
  readonly failingNames: readonly string[]
  /** Tasks left out: not run for the `ignoreOlderThan` age. */
  readonly ignored: readonly string[]
  /**
   * Why the locks or the run history could not be read: `locks: ` or `runs: `, then the store's
   * message with its whole advice (it may span lines), secrets masked.
   */
  readonly errors: readonly string[]
}

/** What a read checks the tasks against, as `shedlock status` does: `--stale`, `--ignore-older-than` and `--grace` (milliseconds). */
export type ReadChecks = Omit<VerdictChecks, 'now' | 'paused'>

/** At most this many runs per task are read for the timeline. */
export const RUNS_PER_TASK = 1000

/**
 * Reads one store: its locks, the health of its tasks (the verdict of `shedlock status` with
 * `stale`), and each task's runs since `from` (epoch milliseconds). A failing read becomes an entry of `errors`, never
 * an exception: one broken store does not hide the others.
 */
export async function readStore(store: DashboardStore, checks: ReadChecks, from: number): Promise<StoreSnapshot> {
  const errors: string[] = []
  let now = new Date()
  let records: readonly LockRecord[] = []
  try {
    const listed = await store.inspector.list()
    now = listed.now
    records = listed.locks
  } catch (error) {
    errors.push(`locks: ${errorText(error)}`)
  }
  const isSlot = (record: LockRecord): boolean =>
    parseSlotRecordName(record.name) !== undefined ||
    parseOwedRecordName(record.name) !== undefined ||
    isTriggerRecordName(record.name) ||
    isCatchUpMarker(record)
  const locks = records.filter((record) => !isSlot(record))
  const slotRecords = records.filter(isSlot)
  let tasks: TaskView[] | undefined
  let verdict = {
    staleNames: [] as string[],
    overdueNames: [] as string[],
    failingNames: [] as string[],
    ignored: [] as string[],
  }
  if (store.runLedger) {
    const ledger = store.runLedger
    try {
      // A run still `running` whose lock its node no longer holds is read as abandoned.
      const lockOf = (name: string) => locks.find((lock) => lock.name === name)
      const healths = await Promise.all(
        (await ledger.tasks()).map((task) => healthWithLockState(ledger, task, lockOf(task.name))),
      )
      const { rows, ...rest } = await statusVerdict(ledger, healths, {
        ...checks,
        now: now.getTime(),
        paused: (name) => pauseOf(lockOf(name)) !== undefined,
      })
      verdict = rest
      tasks = await Promise.all(
        rows.map(async (row) => {
          const lock = lockOf(row.task.name)
          const runs = withLockState(await ledger.history(row.task.name, { limit: RUNS_PER_TASK }), lock).filter(
            (run) => (run.outcome === 'running' ? Number.POSITIVE_INFINITY : endOf(run)) >= from,
          )
          return { ...row, task: maskHealth(row.task), lock, runs: runs.map(maskRun) }
        }),
      )
    } catch (error) {
      errors.push(`runs: ${ledgerErrorText(error)}`)
    }
  }
  return {
    label: redact(store.label),
    clock: store.inspector.clock,
    now,
    locks,
    slotRecords,
    tasks,
    noHistoryNote: store.noHistoryNote === undefined ? undefined : redact(store.noHistoryNote),
    ...verdict,
    errors,
  }
}

function endOf(run: RunRecord): number {
  return run.finishedAt?.getTime() ?? run.startedAt.getTime()
}

/** True when `record` is the catch-up marker of some task (`<name>@catch-up`). */
export function isCatchUpMarker(record: LockRecord): boolean {
  const at = record.name.lastIndexOf('@')
  return at > 0 && catchUpMarkerName(record.name.slice(0, at)) === record.name
}

// Ledger rows come from any writer (another version, Java's ShedLock, a hand-made INSERT), some
// of which may not have masked what they stored: the page and /healthz mask them again.
export function maskRun(run: RunRecord): RunRecord {
  const error = run.error && { type: redact(run.error.type), message: redact(run.error.message) }
  return { ...run, node: redact(run.node), error }
}

function maskHealth(task: TaskHealth): TaskHealth {
  const mask = (run: RunRecord | undefined): RunRecord | undefined => run && maskRun(run)
  return {
    ...task,
    lastRun: mask(task.lastRun),
    lastSuccess: mask(task.lastSuccess),
    lastFailure: mask(task.lastFailure),
  }
}

// Enough for a CREATE TABLE with its indexes, the longest advice a store gives.
const MAX_ERROR_CHARS = 4000

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error)
  return redact(text).slice(0, MAX_ERROR_CHARS)
}

/**
 * A run ledger's error, after `runs: `. Providers that report a failed `tasks()` as a failed
 * listing of "the locks" (which it is not) are corrected; the advice after it (which table, how
 * to create it) is kept whole.
 */
function ledgerErrorText(error: unknown): string {
  const text = errorText(error)
  const provider = error instanceof LockProviderError ? error.provider : undefined
  const wrong = `${provider}: could not list the locks: `
  if (provider === undefined || !text.startsWith(wrong)) return text
  return `${provider}: could not read the run history: ${text.slice(wrong.length)}`
}
