import { pauseOf } from '../core/pause.ts'
import { type RunLedger, type RunRecord, withLockState } from '../core/run-ledger.ts'
import { storesWithRunHistory } from '../providers/registry.ts'
import { runJson } from '../status/health-json.ts'
import type { StoreAdmin } from '../support/store-admin.ts'
import { CliError, type Command, EXIT_OK, integerOption, parseArguments, UsageError } from './command.ts'
import { inert } from './inert.ts'
import { describeHolder, formatTable, humanDuration, isoUtc } from './lock-table.ts'
import { withStore } from './open-store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const RUNS_HELP = `  --runs-table T  the run history's table (default: shedlock_runs)`

const HELP = `Usage: shedlock history NAME [--url URL] [--table NAME] [--runs-table T]
                        [--limit N] [--json]
       shedlock history [options] -- NAME   (a NAME that starts with -)

Shows the runs of task NAME from the run history, newest first: when each
started (UTC), the slot it ran for, the node, how it ended (ok, failed,
lock-lost, skipped, or running: a run still going after the executor's
recordRunningAfter, 1 s by default; "triggered by WHO" for a run asked for
by shedlock trigger), how long it took and, for a failure, the error's
class and first line. The history is what executors given a run
ledger record (postgresRunLedger, mysqlRunLedger, sqliteRunLedger,
redisRunLedger); "shedlock init" creates its table.

Options:
${URL_HELP}
${RUNS_HELP}
  --limit N      at most N runs (default: 20)
  --json         print JSON: { task, runs: [{ id, name, slot, node,
                 startedAt, finishedAt, outcome, durationMs, error,
                 fencingToken, triggeredBy }] } (the token as decimal
                 text, or null; triggeredBy null for a scheduled run)
  -h, --help     show this help

Exit codes: 0 shown (also when there are no runs), 1 the store failed or
            keeps no history, 2 usage error
`

/** `shedlock history`. */
export const historyCommand: Command = {
  name: 'history',
  summary: 'show the recorded runs of one task: when, where, how they ended',
  help: HELP,
  async run(args) {
    // --table as every command that takes --url: one set of store options for all of them.
    const { values, positionals } = parseArguments(args, {
      url: { type: 'string' },
      table: { type: 'string' },
      'runs-table': { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
    })
    const [name, ...extra] = positionals
    if (name === undefined)
      throw new UsageError('name the task: shedlock history NAME [--url URL] (after --, a name may start with -)')
    if (extra.length > 0)
      throw new UsageError(`one task at a time: got ${positionals.map((p) => JSON.stringify(p)).join(', ')}`)
    const limit = integerOption(values, 'limit', 20, 1, 10_000)
    const url = storeUrlOption(values)
    return withStore(
      url,
      { table: stringOption(values.table), runsTable: stringOption(values['runs-table']) },
      async (store) => {
        // A run still `running` whose lock its node no longer holds is read as abandoned.
        const lock = await store.inspector.get(name).catch(() => undefined)
        const runs = withLockState(await readHistory(store, (ledger) => ledger.history(name, { limit })), lock)
        if (values.json === true) {
          process.stdout.write(`${JSON.stringify({ task: name, runs: runs.map(runJson) }, null, 2)}\n`)
          return EXIT_OK
        }
        process.stdout.write(
          `${store.kind} ${store.where}: ${runs.length === 0 ? 'no runs' : `${runs.length} run${runs.length === 1 ? '' : 's'}`} of "${inert(name)}", newest first\n`,
        )
        if (pauseOf(lock)) process.stdout.write(`now ${describeHolder(lock!)}: shedlock resume ends it\n`)
        if (runs.length > 0) {
          const now = Date.now()
          const rows = runs.map((run) => [
            isoUtc(run.startedAt),
            run.slot === undefined ? '-' : isoUtc(run.slot),
            run.node,
            run.outcome === 'running'
              ? `running (${humanDuration(now - run.startedAt.getTime())})${run.triggeredBy === undefined ? '' : `, triggered by ${inert(run.triggeredBy)}`}`
              : outcomeText(run),
            run.durationMs === undefined ? '-' : durationText(run.durationMs),
            run.error === undefined
              ? ''
              : run.outcome === 'skipped'
                ? run.error.message
                : `${run.error.type}: ${run.error.message}`,
          ])
          process.stdout.write(
            `\n${formatTable(['STARTED (UTC)', 'SLOT (UTC)', 'NODE', 'OUTCOME', 'DURATION', 'ERROR OR CAUSE'], rows)}\n`,
          )
        }
        return EXIT_OK
      },
    )
  },
}

/**
 * Reads the run history with `read`; a store whose runs table is missing fails with a CliError
 * about the history (not about a lock) that names the `shedlock init --runs-table` line.
 */
export async function readHistory<T>(store: StoreAdmin, read: (ledger: RunLedger) => Promise<T>): Promise<T> {
  const ledger = ledgerOf(store)
  try {
    return await read(ledger)
  } catch (error) {
    // Asked only after a failure: a read that works costs no statement more.
    const table = store.runsTable
    if (table && !(await table.exists().catch(() => true))) {
      throw new CliError(
        `no run history in ${store.where}: its table ${table.name} does not exist; create it with: ${table.initCommand}`,
        { cause: error },
      )
    }
    throw error
  }
}

/** The run ledger of an open store, or a CliError saying the store keeps none. */
export function ledgerOf(store: StoreAdmin): RunLedger {
  if (!store.runLedger)
    throw new CliError(
      `${store.kind} keeps no run history in shedlock: the stores with one are ${storesWithRunHistory()}`,
    )
  return store.runLedger
}

// Why a slot was skipped, as the executor records it in a skipped run's error.
const SKIP_CAUSES: Readonly<Record<string, string>> = { Paused: 'paused', LockHeld: 'lock held', Folded: 'folded' }

/** The outcome, with a skipped run's cause or a manual run's operator: `skipped (paused)`, `ok (triggered by alice)`. */
function outcomeText(run: RunRecord): string {
  const cause = run.outcome === 'skipped' && run.error ? SKIP_CAUSES[run.error.type] : undefined
  if (cause) return `skipped (${cause})`
  return run.triggeredBy === undefined ? run.outcome : `${run.outcome} (triggered by ${inert(run.triggeredBy)})`
}

/** `1.2s`, `350ms`, `2m 5s`. */
export function durationText(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)}ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)}s` : humanDuration(ms)
}

function stringOption(value: string | boolean | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined
}
