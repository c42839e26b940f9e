import { parseArgs } from 'node:util'
import { formatDuration, parseDuration } from '../core/duration.ts'
import type { TaskHealth } from '../core/run-ledger.ts'
import { type Command, EXIT_FAILURE, EXIT_OK, UsageError } from './command.ts'
import { durationText, healthJson, ledgerOf } from './history.ts'
import { formatTable, humanDuration, isoUtc } from './lock-table.ts'
import { withStore } from './open-store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock status [--url URL] [--table NAME] [--runs-table T]
                       [--stale [NAME=]AGE]... [--json]

Shows every task of the run history, one line each: its last run and how it
ended, its last success and last failure, and how many runs failed in a row.

--stale makes it a health check, for a Kubernetes CronJob monitor or a probe:
a task that has not succeeded within its AGE (a task with only failures, or
with no runs at all, included) is STALE, and status exits 1.
  --stale report=26h   the task "report" must have succeeded within 26 hours
  --stale 2h           every task shown must have succeeded within 2 hours
Give --stale several times; a NAME=AGE beats a bare AGE for its task.

Options:
${URL_HELP}
  --runs-table T the run history's table (default: shedlock_runs)
  --stale S      [NAME=]AGE, as above; AGE like 90s, 30m, 26h, 7d or PT26H
  --json         print JSON: { now, tasks: [{ name, state, lastRun,
                 lastSuccess, lastFailure, consecutiveFailures, maxAge }] }
  -h, --help     show this help

Exit codes: 0 no task is stale, 1 a task is stale or the store failed,
            2 usage error
`

/** What `--stale` asks of the tasks. */
interface Staleness {
  readonly byName: ReadonlyMap<string, number>
  readonly all: number | undefined
}

/** `shedlock status`. */
export const statusCommand: Command = {
  name: 'status',
  summary: 'show each task: last run, last success, failures in a row',
  help: HELP,
  async run(args) {
    let values: { url?: string; table?: string; 'runs-table'?: string; stale?: string[]; json?: boolean }
    try {
      ;({ values } = parseArgs({
        args,
        // --table as every command that takes --url: one set of store options for all of them.
        options: {
          url: { type: 'string' },
          table: { type: 'string' },
          'runs-table': { type: 'string' },
          stale: { type: 'string', multiple: true },
          json: { type: 'boolean' },
        },
        strict: true,
        allowPositionals: false,
      }))
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message.split('\n')[0]!.replace(/\.$/, '') : String(error))
    }
    const stale = staleness(values.stale ?? [])
    const url = storeUrlOption({ url: values.url })
    return withStore(url, { table: values.table, runsTable: values['runs-table'] }, async (store) => {
      const ledger = ledgerOf(store)
      const tasks = await ledger.tasks()
      // A task --stale names must be there, even when it never ran: no run is no success.
      for (const name of stale.byName.keys()) if (!tasks.some((task) => task.name === name)) tasks.push(await ledger.health(name))
      tasks.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      const now = Date.now()
      const rows = tasks.map((task) => ({
        task,
        maxAge: stale.byName.get(task.name) ?? stale.all,
        state: stateOf(task, stale.byName.get(task.name) ?? stale.all, now),
      }))
      const staleCount = rows.filter((row) => row.state === 'stale').length
      if (values.json === true) {
        const out = {
          now: isoUtc(now),
          tasks: rows.map(({ task, state, maxAge }) => ({ ...healthJson(task), state, maxAge: maxAge === undefined ? null : formatDuration(maxAge) })),
        }
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
        return staleCount > 0 ? EXIT_FAILURE : EXIT_OK
      }
      const failing = rows.filter((row) => row.state === 'failing').length
      process.stdout.write(
        `${store.kind} ${store.where}: ${tasks.length} task${tasks.length === 1 ? '' : 's'}, ${staleCount} stale, ${failing} failing; now ${isoUtc(now)}\n`,
      )
      if (rows.length > 0) {
        const table = rows.map(({ task, state, maxAge }) => [
          task.name,
          maxAge === undefined ? state : `${state} (max ${formatDuration(maxAge)})`,
          task.lastRun ? `${ago(task.lastRun.startedAt, now)} ${task.lastRun.outcome}` : 'never',
          task.lastSuccess
            ? `${ago(task.lastSuccess.startedAt, now)}${task.lastSuccess.durationMs === undefined ? '' : ` (${durationText(task.lastSuccess.durationMs)})`}`
            : 'never',
          task.lastFailure
            ? `${ago(task.lastFailure.startedAt, now)} ${task.lastFailure.error ? `${task.lastFailure.error.type}: ${task.lastFailure.error.message}` : task.lastFailure.outcome}`
            : '-',
          String(task.consecutiveFailures),
        ])
        process.stdout.write(`\n${formatTable(['TASK', 'STATE', 'LAST RUN', 'LAST SUCCESS', 'LAST FAILURE', 'FAILED IN A ROW'], table)}\n`)
      }
      return staleCount > 0 ? EXIT_FAILURE : EXIT_OK
    })
  },
}

/**
 * `stale` when a maximum age is set and the last success is older than it (or there is none);
 * else `failing` when the latest runs failed; else `ok` (a task whose only run is still running).
 */
export function stateOf(task: TaskHealth, maxAge: number | undefined, now: number): 'ok' | 'failing' | 'stale' {
  if (maxAge !== undefined && (!task.lastSuccess || now - task.lastSuccess.startedAt.getTime() > maxAge)) return 'stale'
  return task.consecutiveFailures > 0 ? 'failing' : 'ok'
}

function staleness(given: readonly string[]): Staleness {
  const byName = new Map<string, number>()
  let all: number | undefined
  for (const entry of given) {
    const equals = entry.lastIndexOf('=')
    const name = equals < 0 ? undefined : entry.slice(0, equals)
    const age = equals < 0 ? entry : entry.slice(equals + 1)
    let ms: number
    try {
      ms = parseDuration(age)
    } catch (error) {
      throw new UsageError(
        `--stale ${JSON.stringify(entry)}: ${error instanceof Error ? error.message : String(error)}; use NAME=AGE or AGE, e.g. --stale report=26h`,
      )
    }
    if (name === undefined) all = ms
    else if (name === '') throw new UsageError(`--stale ${JSON.stringify(entry)} names no task; use NAME=AGE, e.g. --stale report=26h`)
    else byName.set(name, ms)
  }
  return { byName, all }
}

function ago(time: Date, now: number): string {
  return `${humanDuration(Math.max(0, now - time.getTime()))} ago`
}
