import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { loadSqliteDriver, type SqliteConnection, type SqliteDriver } from '../providers/sqlite/driver.ts'
import { sqliteSchema } from '../providers/sqlite/index.ts'
import {
  CliError,
  type Command,
  EXIT_FAILURE,
  EXIT_INTERRUPTED,
  EXIT_OK,
  integerOption,
  parseOptions,
  UsageError,
} from './command.ts'
import { send, startWorker, stopWorkers, type Worker } from './demo-nodes.ts'
import { TASK, type TickReport } from './demo-protocol.ts'
import { printSummary, type Summary, summarize, type TickSpan, tickPrinter } from './demo-report.ts'

// `shedlock demo`, the parent: starts the nodes (demo-nodes.ts; each runs demo-worker.ts), gives
// them the ticks to run, prints what they report (demo-report.ts) and says whether any tick ran
// twice.

const READY_TIMEOUT_MS = 30_000
/** How long after the last tick the workers get to report and exit before they are stopped. */
const FINISH_GRACE_MS = 10_000

const DEMO_HELP = `Usage: shedlock demo [--db PATH] [--seconds N] [--nodes N]

Shows shedlock at work: starts N worker processes ("nodes") that share one
SQLite file. Each schedules the same task every second, on the second, through
  createLockingTaskExecutor(sqliteLockProvider({ database }))
    .executeWithLock(task, { name: '${TASK.name}',
      lockAtMostFor: '${TASK.lockAtMostFor}', lockAtLeastFor: '${TASK.lockAtLeastFor}' })
The task takes 100-300 ms. One line per second shows which node ran it and
which skipped it; the summary checks that no tick ran twice and that no two
runs overlapped in time.

Options:
  --db PATH      SQLite file to use, created if missing, kept at the end
                 (default: a new file in a temporary folder, removed when
                 the demo exits)
  --seconds N    how long to run, in seconds (default: 15)
  --nodes N      how many worker processes (default: 3)
  -h, --help     show this help

Needs a SQLite driver: node:sqlite (Node >= 22.13), better-sqlite3 or
libsql (npm i libsql: prebuilt, nothing to compile).

Exit codes: 0 every tick ran at most once and nothing failed,
            1 a tick ran twice, runs overlapped, or something failed,
            2 usage error, 130 interrupted (Ctrl-C)
`

/** `shedlock demo`: the parent, which starts the nodes and checks what they report. */
export const demoCommand: Command = {
  name: 'demo',
  summary: 'N processes share one SQLite lock table; each tick runs once',
  help: DEMO_HELP,
  run: runDemo,
}

async function runDemo(args: string[]): Promise<number> {
  const values = parseOptions(args, {
    db: { type: 'string' },
    seconds: { type: 'string' },
    nodes: { type: 'string' },
    // Undocumented: runs the task without shedlock, to show that the checks catch duplicates.
    'no-lock': { type: 'boolean' },
  })
  const seconds = integerOption(values, 'seconds', 15, 1, 86_400)
  const nodeCount = integerOption(values, 'nodes', 3, 1, 32)
  const useLock = values['no-lock'] !== true
  if (values.db !== undefined && (typeof values.db !== 'string' || values.db.trim() === ''))
    throw new UsageError('--db needs a file path')

  const driver = await loadSqliteDriver()
  const folder = typeof values.db === 'string' ? undefined : mkdtempSync(join(tmpdir(), 'shedlock-demo-'))
  const dbPath = folder === undefined ? resolve(values.db as string) : join(folder, 'demo.db')
  try {
    prepareDatabase(driver, dbPath)
    return await runNodes({ driver, dbPath, temporary: folder !== undefined, seconds, nodeCount, useLock })
  } finally {
    // The demo's own folder goes with it (after its end, Ctrl-C, SIGTERM or a failure); a --db file stays.
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
  }
}

/** What the demo runs with, once its arguments are checked and its database is ready. */
interface DemoRun {
  readonly driver: SqliteDriver
  readonly dbPath: string
  /** Whether dbPath is in the demo's own folder, removed when it ends. */
  readonly temporary: boolean
  readonly seconds: number
  readonly nodeCount: number
  readonly useLock: boolean
}

/** Starts the nodes, has them run the ticks, prints what they report; resolves to the exit code. */
async function runNodes({ driver, dbPath, temporary, seconds, nodeCount, useLock }: DemoRun): Promise<number> {
  const out = (line = ''): void => void process.stdout.write(`${line}\n`)
  out(
    `shedlock demo: ${nodeCount} node${nodeCount === 1 ? '' : 's'} (processes) share the SQLite file ${dbPath} (${driver.name}).`,
  )
  if (useLock) {
    out(
      `Each runs task "${TASK.name}" every second for ${seconds} s, under a lock (lockAtMostFor ${TASK.lockAtMostFor}, lockAtLeastFor ${TASK.lockAtLeastFor}):`,
    )
    out('one node runs each tick, the others skip it.')
  } else {
    out(`Each runs task "${TASK.name}" every second for ${seconds} s WITHOUT a lock (--no-lock): expect duplicates.`)
  }

  const names = Array.from({ length: nodeCount }, (_, i) => `node-${i + 1}`)
  const reports: TickReport[] = []
  const failures: string[] = []
  let span: TickSpan | undefined
  let interrupted: NodeJS.Signals | undefined
  let stopping = false
  const printTicks = tickPrinter(out, reports, names)

  // Everything below waits on one signal, raised by every worker event and by Ctrl-C.
  let wake: () => void = () => {}
  const changed = (): void => wake()
  const until = async (done: () => boolean, deadline: number): Promise<void> => {
    while (!done() && !interrupted && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        wake = resolve
        setTimeout(resolve, Math.max(1, Math.min(250, deadline - Date.now()))).unref()
      })
      printTicks(span, false)
    }
  }

  const onSignal = (signal: NodeJS.Signals): void => {
    if (!interrupted) out('\nInterrupted: stopping the nodes...')
    interrupted ??= signal
    changed()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)

  const workers: Worker[] = names.map((node) =>
    startWorker(
      node,
      { dbPath, driver: driver.name, useLock },
      {
        report: (report) => reports.push(report),
        fail: (failure) => failures.push(failure),
        stopping: () => stopping,
        changed,
      },
    ),
  )
  out(`started ${workers.map((w) => `${w.node} (pid ${w.child.pid ?? '?'})`).join(', ')}`)
  out()

  const allExited = (): boolean => workers.every((w) => w.exited)
  try {
    await until(
      () => workers.every((w) => w.ready) || failures.length > 0 || allExited(),
      Date.now() + READY_TIMEOUT_MS,
    )
    if (!workers.every((w) => w.ready) && !interrupted) {
      if (failures.length === 0) failures.push(`the nodes did not start within ${READY_TIMEOUT_MS / 1000} s`)
    } else if (!interrupted) {
      // Start on a second boundary far enough ahead for every node to hear of it.
      const firstTick = Math.ceil((Date.now() + 200) / 1000)
      span = { firstTick, lastTick: firstTick + seconds - 1 }
      for (const w of workers) send(w.child, { type: 'start', ...span })
      await until(allExited, (span.lastTick + 1) * 1000 + FINISH_GRACE_MS)
    }
  } finally {
    stopping = true
    const killed = await stopWorkers(workers)
    if (!interrupted) for (const w of killed) failures.push(`${w.node} did not finish in time and was killed`)
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }

  if (span && interrupted) {
    // Count only the ticks that came.
    const last = Math.max(span.firstTick - 1, ...reports.map((r) => r.tick))
    span = { firstTick: span.firstTick, lastTick: Math.min(span.lastTick, last) }
  }
  printTicks(span, true)

  const summary = summarize(reports, span, failures.length)
  printSummary(out, summary, temporary ? `${dbPath} (temporary: removed as the demo exits)` : dbPath, failures)
  return verdict(out, summary, interrupted, useLock, nodeCount)
}

/** Prints the last line, and returns the exit code. */
function verdict(
  out: (line?: string) => void,
  summary: Summary,
  interrupted: NodeJS.Signals | undefined,
  useLock: boolean,
  nodeCount: number,
): number {
  if (interrupted) {
    out('Interrupted.')
    return interrupted === 'SIGTERM' ? 143 /* 128 + SIGTERM, as shells report it */ : EXIT_INTERRUPTED
  }
  if (summary.duplicates > 0 || summary.errors > 0) {
    const why = [
      summary.duplicates > 0 ? `${summary.duplicates} duplicate${summary.duplicates === 1 ? '' : 's'}` : '',
      summary.errors > 0 ? `${summary.errors} error${summary.errors === 1 ? '' : 's'}` : '',
    ]
    out(
      `FAILED: ${why.filter(Boolean).join(' and ')}${useLock ? '' : ' (expected with --no-lock: the task ran without shedlock)'}.`,
    )
    return EXIT_FAILURE
  }
  out(`OK: no tick ran twice and no two runs overlapped, across ${nodeCount} process${nodeCount === 1 ? '' : 'es'}.`)
  return EXIT_OK
}

/** Creates the lock table (and turns on WAL) before the nodes start. */
function prepareDatabase(driver: SqliteDriver, path: string): void {
  let connection: SqliteConnection | undefined
  try {
    connection = driver.open(path)
    connection.exec('PRAGMA journal_mode = WAL')
    connection.exec(sqliteSchema())
  } catch (error) {
    throw new CliError(
      `cannot use ${path} as a SQLite database: ${error instanceof Error ? error.message : String(error)}`,
    )
  } finally {
    connection?.close()
  }
}
