import type { RunLedger, TaskHealth } from '../core/run-ledger.ts'
import type { Staleness } from './staleness.ts'

/** How long a task may go without a run before `status` and the dashboard leave it out, when not given. */
export const DEFAULT_IGNORE_OLDER_THAN = '7d'

/** One task of the verdict: its health, its maximum age (milliseconds, from the staleness) and its state. */
export interface StatusRow {
  readonly task: TaskHealth
  readonly maxAge: number | undefined
  readonly state: 'ok' | 'failing' | 'stale'
}

/** The verdict on a store's tasks: the tasks shown, and which of the tasks checked are stale or failing. */
export interface StatusVerdict {
  /** Sorted by name. */
  readonly rows: StatusRow[]
  /** Tasks left out: not run for `ignoreOlderThan`. */
  readonly ignored: string[]
  readonly staleNames: string[]
  readonly failingNames: string[]
}

/**
 * The verdict on `tasks` (the ledger's `tasks()`) at `now` (epoch ms), as `shedlock status` prints
 * it and the dashboard's /healthz serves it: unhealthy (status exits 1, /healthz answers 503) when
 * `staleNames` or `failingNames` is not empty. `ignoreOlderThan` is in milliseconds, 0 leaving no
 * task out; a task `stale` names is never left out, and is read from `ledger` when it never ran.
 */
export async function statusVerdict(
  ledger: RunLedger,
  tasks: readonly TaskHealth[],
  stale: Staleness,
  ignoreOlderThan: number,
  now: number,
): Promise<StatusVerdict> {
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
  const rows = kept.map((task) => ({
    task,
    maxAge: stale.byName.get(task.name) ?? stale.all,
    state: stateOf(task, stale.byName.get(task.name) ?? stale.all, now),
  }))
  // Only NAME=AGE entries: a probe of those tasks, which another task's failure must not fail.
  const checked =
    stale.byName.size > 0 && stale.all === undefined ? rows.filter((row) => stale.byName.has(row.task.name)) : rows
  const staleNames = checked.filter((row) => row.state === 'stale').map((row) => row.task.name)
  const failingNames = checked.filter((row) => row.state === 'failing').map((row) => row.task.name)
  return { rows, ignored, staleNames, failingNames }
}

/**
 * `stale` when a maximum age (milliseconds) is set and the last success is older than it (or there
 * is none); else `failing` when the latest runs failed; else `ok` (a task whose only run is still
 * running). `now` is epoch ms.
 */
export function stateOf(task: TaskHealth, maxAge: number | undefined, now: number): 'ok' | 'failing' | 'stale' {
  if (maxAge !== undefined && (!task.lastSuccess || now - task.lastSuccess.startedAt.getTime() > maxAge)) return 'stale'
  return task.consecutiveFailures > 0 ? 'failing' : 'ok'
}

/** True when the task's last run started longer ago than `bound` (never with `bound` 0). */
function isIgnored(task: TaskHealth, bound: number, now: number): boolean {
  return bound > 0 && task.lastRun !== undefined && now - task.lastRun.startedAt.getTime() > bound
}
