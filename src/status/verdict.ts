import type { RunLedger, TaskHealth } from '../core/run-ledger.ts'
import type { Staleness } from './staleness.ts'

/** How long a task may go without a run before `status` and the dashboard leave it out, when not given. */
export const DEFAULT_IGNORE_OLDER_THAN = '7d'

/**
 * How long past its next fire time (as its latest run recorded it) a task may go without a new
 * run before it reads as overdue, when not given: a scheduler's timer, the lock's round trip and
 * the clocks of the nodes are late by seconds, not by a minute.
 */
export const DEFAULT_OVERDUE_GRACE = '1m'

/** A task's state: `stale` (no success within its maximum age), `overdue` (its schedule stopped), `failing` (its latest runs failed) or `ok`. */
export type TaskState = 'ok' | 'failing' | 'stale' | 'overdue'

/** One task of the verdict: its health, its maximum age (milliseconds, from the staleness) and its state. */
export interface StatusRow {
  readonly task: TaskHealth
  readonly maxAge: number | undefined
  readonly state: TaskState
}

/** The verdict on a store's tasks: the tasks shown, and which of the tasks checked are stale, overdue or failing. */
export interface StatusVerdict {
  /** Sorted by name. */
  readonly rows: StatusRow[]
  /** Tasks left out: not run for `ignoreOlderThan`. */
  readonly ignored: string[]
  readonly staleNames: string[]
  readonly overdueNames: string[]
  readonly failingNames: string[]
}

/** What {@link statusVerdict} checks the tasks against. */
export interface VerdictChecks {
  readonly stale: Staleness
  /** Milliseconds; 0 leaves no task out. */
  readonly ignoreOlderThan: number
  /** Milliseconds past a task's next fire time before it is overdue (see {@link DEFAULT_OVERDUE_GRACE}). */
  readonly overdueGrace: number
  /** Epoch milliseconds. */
  readonly now: number
  /** True for a paused task, which is never overdue: a pause skips its fire times on purpose. */
  readonly paused?: (name: string) => boolean
}

/**
 * The verdict on `tasks` (the ledger's `tasks()`), as `shedlock status` prints it and the
 * dashboard's /healthz serves it: unhealthy (status exits 1, /healthz answers 503) when
 * `staleNames`, `overdueNames` or `failingNames` is not empty. A task `stale` names is never left
 * out, and is read from `ledger` when it never ran.
 */
export async function statusVerdict(
  ledger: RunLedger,
  tasks: readonly TaskHealth[],
  checks: VerdictChecks,
): Promise<StatusVerdict> {
  const { stale, ignoreOlderThan, now } = checks
  const ignored: string[] = []
  const kept = tasks.filter((task) => {
    const keep = stale.byName.has(task.name) || !isIgnored(task, ignoreOlderThan, now)
    if (!keep) ignored.push(task.name)
    return keep
  })
  // A task --stale names must be there, even when it never ran: no run is no success.
  for (const name of stale.byName.keys())
    if (!kept.some((task) => task.name === name)) kept.push(await ledger.health(name))
  kept.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const rows = kept.map((task) => {
    const maxAge = stale.byName.get(task.name) ?? stale.all
    const grace = checks.paused?.(task.name) === true ? undefined : checks.overdueGrace
    return { task, maxAge, state: stateOf(task, maxAge, now, grace) }
  })
  // Only NAME=AGE entries: a probe of those tasks, which another task's failure must not fail.
  const checked =
    stale.byName.size > 0 && stale.all === undefined ? rows.filter((row) => stale.byName.has(row.task.name)) : rows
  const named = (state: TaskState) => checked.filter((row) => row.state === state).map((row) => row.task.name)
  return { rows, ignored, staleNames: named('stale'), overdueNames: named('overdue'), failingNames: named('failing') }
}

/**
 * `stale` when a maximum age (milliseconds) is set and the last success is older than it (or there
 * is none); else `overdue` when an overdue grace (milliseconds) is given and the task's next fire
 * time passed by more than it with no run since (see {@link overdueSince}); else `failing` when
 * the latest runs failed; else `ok` (a task whose only run is still running). `now` is epoch ms.
 */
export function stateOf(task: TaskHealth, maxAge: number | undefined, now: number, overdueGrace?: number): TaskState {
  if (maxAge !== undefined && (!task.lastSuccess || now - task.lastSuccess.startedAt.getTime() > maxAge)) return 'stale'
  if (overdueGrace !== undefined && overdueSince(task, overdueGrace, now)) return 'overdue'
  return task.consecutiveFailures > 0 ? 'failing' : 'ok'
}

/**
 * The fire time a task missed: its latest run's `nextFireAt`, when that passed by more than
 * `grace` (milliseconds) at `now` (epoch ms) with no run written since. `undefined` while the
 * latest run is still running (a long run delays the next fire, it does not miss it), or when the
 * latest run says nothing of the schedule.
 */
export function overdueSince(task: TaskHealth, grace: number, now: number): Date | undefined {
  const run = task.lastRun
  if (!run?.nextFireAt || run.outcome === 'running') return undefined
  return now - run.nextFireAt.getTime() > grace ? run.nextFireAt : undefined
}

/**
 * True when the task's last run started longer ago than `bound` (never with `bound` 0), and its
 * next fire time, where it recorded one, passed longer ago too: a weekly task is not left out.
 */
function isIgnored(task: TaskHealth, bound: number, now: number): boolean {
  const run = task.lastRun
  if (bound <= 0 || run === undefined) return false
  return now - Math.max(run.startedAt.getTime(), run.nextFireAt?.getTime() ?? 0) > bound
}
