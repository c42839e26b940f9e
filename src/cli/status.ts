import { parseArgs } from 'node:util'
import { formatDuration, parseDuration } from '../core/duration.ts'
import { healthWithLockState } from '../core/run-ledger.ts'
import { statusRowJson } from '../status/health-json.ts'
import { staleness } from '../status/staleness.ts'
import type { TaskPause } from '../core/pause.ts'
import type { TaskHealth } from '../core/run-ledger.ts'
import {
  DEFAULT_IGNORE_OLDER_THAN,
  DEFAULT_OVERDUE_GRACE,
  type StatusVerdict,
  statusVerdict,
  type TaskState,
} from '../status/verdict.ts'
import { type Command, durationOption, EXIT_FAILURE, EXIT_OK, UsageError } from './command.ts'
import { durationText, ledgerOf, readHistory } from './history.ts'
import { formatTable, humanDuration, isoUtc } from './lock-table.ts'
import { withStore } from './open-store.ts'
import { withPause } from './pause.ts'
import { pausesOf } from '../status/pause-control.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock status [--url URL] [--table NAME] [--runs-table T]
                       [--stale [NAME=]AGE]... [--grace D]
                       [--ignore-older-than AGE] [--json]

Shows every task of the run history, one line each: its last run and how it
ended, its last success and last failure, and how many runs failed in a row.
A task whose latest finished run failed is FAILING (N in a row), and status
exits 1.

--stale makes it a health check, for a Kubernetes CronJob monitor or a probe:
a task that has not succeeded within its AGE (a task with only failures, or
with no runs at all, included) is STALE, and status exits 1.
  --stale report=26h   the task "report" must have succeeded within 26 hours
  --stale 2h           every task shown must have succeeded within 2 hours
Give --stale several times; a NAME=AGE beats a bare AGE for its task. With
only NAME=AGE entries, only those tasks decide the exit code (a failing task
of another job does not fail the probe of this one).

A task whose latest run recorded its next fire time (withLock, @SchedulerLock,
the node-cron coordinator and shedlock run --every record it; executeWithLock's
nextFireAt) is OVERDUE once that time passed by more than --grace (1m by
default) with no run since, even with no replica up: its schedule stopped.
status exits 1.

A task paused by "shedlock pause" shows as paused, by whom, why and until
when; it still turns STALE once its last success is older than its AGE: a
forgotten pause is what --stale is there to catch.

A task whose last run started longer ago than --ignore-older-than (7d by
default) is left out: one renamed or removed runs no more, and its old runs
would fail every check until the run history forgets them. A task --stale
names is never left out: name a task that may stop running unnoticed.

Options:
${URL_HELP}
  --runs-table T the run history's table (default: shedlock_runs)
  --stale S      [NAME=]AGE, as above; AGE like 90s, 30m, 26h, 7d or PT26H
  --grace D      how late past its next fire time a task is OVERDUE
                 (default: 1m)
  --ignore-older-than AGE
                 leave out tasks not run for AGE (default: 7d; 0: none)
  --json         print JSON: { store, now, errors: [lines], stale: [names],
                 overdue: [names], failing: [names], ignored: [names],
                 tasks: [{ name, state, lastRun, lastSuccess, lastFailure,
                 consecutiveFailures, maxAge, paused }] }, state being ok,
                 failing, overdue or stale: as each
                 store of the dashboard's /healthz; when the run history
                 cannot be read, errors says why, and status exits 1
  -h, --help     show this help

Exit codes: 0 no task checked is stale, overdue or failing, 1 a task checked
            is, or the store failed, 2 usage error
`

/** `shedlock status`. */
export const statusCommand: Command = {
  name: 'status',
  summary: 'show each task: last run, last success, failures in a row',
  help: HELP,
  async run(args) {
    let values: {
      url?: string
      table?: string
      'runs-table'?: string
      stale?: string[]
      'ignore-older-than'?: string
      grace?: string
      json?: boolean
    }
    try {
      ;({ values } = parseArgs({
        args,
        // --table as every command that takes --url: one set of store options for all of them.
        options: {
          url: { type: 'string' },
          table: { type: 'string' },
          'runs-table': { type: 'string' },
          stale: { type: 'string', multiple: true },
          'ignore-older-than': { type: 'string' },
          grace: { type: 'string' },
          json: { type: 'boolean' },
        },
        strict: true,
        allowPositionals: false,
      }))
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message.split('\n')[0]!.replace(/\.$/, '') : String(error))
    }
    const stale = staleness(values.stale ?? [])
    const ignoreOlderThan = ignoreBound(values['ignore-older-than'] ?? DEFAULT_IGNORE_OLDER_THAN)
    const overdueGrace = durationOption('--grace', values.grace ?? DEFAULT_OVERDUE_GRACE, {
      hint: 'a duration like 1m or 90s',
    })
    const url = storeUrlOption({ url: values.url })
    return withStore(url, { table: values.table, runsTable: values['runs-table'] }, async (store) => {
      const now = Date.now()
      // As the dashboard's /healthz names a store it opened from a URL.
      const label = `${store.kind} ${store.where}`
      let verdict: StatusVerdict
      let pauses: Map<string, TaskPause>
      try {
        // A run still `running` whose lock its node no longer holds is read as abandoned.
        const tasks = await readHistory(store, (l) => l.tasks())
        const all = await Promise.all(
          tasks.map(async (task) =>
            task.lastRun?.outcome === 'running'
              ? healthWithLockState(ledgerOf(store), task, await store.inspector.get(task.name).catch(() => undefined))
              : task,
          ),
        )
        // Before the verdict: a paused task is never overdue.
        pauses = await pausesOf(
          store.inspector,
          all.map((task) => task.name),
        )
        const paused = pauses
        verdict = await statusVerdict(ledgerOf(store), all, {
          stale,
          ignoreOlderThan,
          overdueGrace,
          now,
          paused: (name) => paused.has(name),
        })
      } catch (error) {
        // A probe reading --json gets a document even then, as /healthz's entry of the store.
        if (values.json === true) {
          const out = { store: label, now: isoUtc(now), errors: [`runs: ${oneLine(error)}`], ...NO_VERDICT }
          process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
        }
        throw error
      }
      const { rows, ignored, staleNames, overdueNames, failingNames } = verdict
      const tasks = rows.map((row) => row.task)
      const code = staleNames.length + overdueNames.length + failingNames.length > 0 ? EXIT_FAILURE : EXIT_OK
      if (values.json === true) {
        const out = {
          store: label,
          now: isoUtc(now),
          errors: [],
          stale: staleNames,
          overdue: overdueNames,
          failing: failingNames,
          ignored,
          tasks: rows.map((row) => statusRowJson(row, pauses.get(row.task.name))),
        }
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
        return code
      }
      const staleCount = rows.filter((row) => row.state === 'stale').length
      const overdue = rows.filter((row) => row.state === 'overdue').length
      const failing = rows.filter((row) => row.state === 'failing').length
      const left =
        ignored.length === 0 ? '' : `, ${ignored.length} not run for ${formatDuration(ignoreOlderThan)} left out`
      const paused = pauses.size === 0 ? '' : `, ${pauses.size} paused`
      process.stdout.write(
        `${store.kind} ${store.where}: ${tasks.length} task${tasks.length === 1 ? '' : 's'}, ${staleCount} stale, ${overdue === 0 ? '' : `${overdue} overdue, `}${failing} failing${paused}${left}; now ${isoUtc(now)}\n`,
      )
      if (rows.length > 0) {
        const table = rows.map(({ task, state, maxAge }) => [
          task.name,
          withPause(
            `${stateText(task, state, now)}${maxAge === undefined ? '' : ` (max ${formatDuration(maxAge)})`}`,
            pauses.get(task.name),
          ),
          task.lastRun ? `${ago(task.lastRun.startedAt, now)} ${task.lastRun.outcome}` : 'never',
          task.lastSuccess
            ? `${ago(task.lastSuccess.startedAt, now)}${task.lastSuccess.durationMs === undefined ? '' : ` (${durationText(task.lastSuccess.durationMs)})`}`
            : 'never',
          task.lastFailure
            ? `${ago(task.lastFailure.startedAt, now)} ${task.lastFailure.error ? `${task.lastFailure.error.type}: ${task.lastFailure.error.message}` : task.lastFailure.outcome}`
            : '-',
          String(task.consecutiveFailures),
        ])
        process.stdout.write(
          `\n${formatTable(['TASK', 'STATE', 'LAST RUN', 'LAST SUCCESS', 'LAST FAILURE', 'FAILED IN A ROW'], table)}\n`,
        )
      }
      return code
    })
  },
}

const NO_VERDICT = { stale: [], overdue: [], failing: [], ignored: [], tasks: [] } as const

/** A task's STATE column: failing with its count, overdue with the fire time it missed. */
function stateText(task: TaskHealth, state: TaskState, now: number): string {
  if (state === 'failing') return `failing (${task.consecutiveFailures} in a row)`
  const missed = task.lastRun?.nextFireAt
  if (state === 'overdue' && missed) return `overdue (due ${ago(missed, now)})`
  return state
}

/** The whole message of an error on one line: a "Create it with:" hint and its statement included. */
function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, ' ')
}

/** `--ignore-older-than`: milliseconds, `0` leaving no task out. */
function ignoreBound(given: string): number {
  try {
    return parseDuration(given)
  } catch (error) {
    throw new UsageError(
      `--ignore-older-than ${JSON.stringify(given)}: ${error instanceof Error ? error.message : String(error)}; use an AGE like 7d, or 0 to leave no task out`,
    )
  }
}

function ago(time: Date, now: number): string {
  return `${humanDuration(Math.max(0, now - time.getTime()))} ago`
}
