import { type ChildProcess, fork } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { sqliteLockProvider, sqliteSchema } from '../providers/sqlite/index.ts'
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
import {
  loadSqliteDriver,
  type SqliteConnection,
  type SqliteDriver,
  type SqliteDriverName,
} from '../providers/sqlite/driver.ts'

/** The lock every demo node asks for. */
const TASK = { name: 'demo-task', lockAtMostFor: '10s', lockAtLeastFor: '500ms' } as const
const WORKER = '__demo-worker'
const READY_TIMEOUT_MS = 30_000
/** How long after the last tick the workers get to report and exit before they are stopped. */
const FINISH_GRACE_MS = 10_000
/** How long a stopped worker gets before SIGKILL. */
const STOP_GRACE_MS = 3_000

type Outcome = 'ran' | 'skipped' | 'error'

/** What a worker reports for one tick. `startedAt`/`endedAt` (epoch ms) are set when the task ran. */
interface TickReport {
  type: 'tick'
  node: string
  tick: number
  outcome: Outcome
  startedAt?: number
  endedAt?: number
  error?: string
}
type WorkerMessage = { type: 'ready'; node: string } | TickReport | { type: 'fatal'; node: string; error: string }
type ParentMessage = { type: 'start'; firstTick: number; lastTick: number } | { type: 'stop' }

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
  --db PATH      SQLite file to use, created if missing
                 (default: a new file in a new temporary folder)
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

/** The hidden command each demo node runs, forked by `shedlock demo`. */
export const demoWorkerCommand: Command = {
  name: WORKER,
  summary: 'one node of `shedlock demo` (internal)',
  help: `Usage: shedlock ${WORKER} --db PATH --node NAME --driver DRIVER [--no-lock]\n\nInternal: started by "shedlock demo", which it talks to over IPC.\n`,
  hidden: true,
  run: runWorker,
}

// ---------------------------------------------------------------- parent

interface Worker {
  readonly node: string
  readonly child: ChildProcess
  ready: boolean
  exited: boolean
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
  const dbPath =
    typeof values.db === 'string' ? resolve(values.db) : join(mkdtempSync(join(tmpdir(), 'shedlock-demo-')), 'demo.db')
  prepareDatabase(driver, dbPath)

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
  let span: { firstTick: number; lastTick: number } | undefined
  let interrupted: NodeJS.Signals | undefined
  let stopping = false

  // Everything below waits on one signal, raised by every worker event and by Ctrl-C.
  let wake: () => void = () => {}
  const changed = (): void => wake()
  const until = async (done: () => boolean, deadline: number): Promise<void> => {
    while (!done() && !interrupted && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        wake = resolve
        setTimeout(resolve, Math.max(1, Math.min(250, deadline - Date.now()))).unref()
      })
      printTicks(false)
    }
  }

  const onSignal = (signal: NodeJS.Signals): void => {
    if (!interrupted) out('\nInterrupted: stopping the nodes...')
    interrupted ??= signal
    changed()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)

  const workers: Worker[] = names.map((node) => {
    const workerArgs = [
      WORKER,
      '--db',
      dbPath,
      '--node',
      node,
      '--driver',
      driver.name,
      ...(useLock ? [] : ['--no-lock']),
    ]
    const child = fork(mainScript(), workerArgs, {
      // Not the parent's execArgv (an --inspect there would clash); node:sqlite warns that it is experimental on Node 22.
      execArgv: driver.name === 'node:sqlite' ? ['--disable-warning=ExperimentalWarning'] : [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    const worker: Worker = { node, child, ready: false, exited: false }
    child.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') worker.ready = true
      else if (message.type === 'tick') reports.push(message)
      else if (message.type === 'fatal') failures.push(`${node}: ${message.error}`)
      changed()
    })
    child.on('error', (error) => {
      failures.push(`${node}: ${error.message}`)
      if (child.pid === undefined) worker.exited = true
      changed()
    })
    child.on('exit', (code, signal) => {
      worker.exited = true
      if (!stopping && code !== 0) failures.push(`${node} exited with ${signal ?? `code ${code}`}`)
      changed()
    })
    return worker
  })
  out(`started ${workers.map((w) => `${w.node} (pid ${w.child.pid ?? '?'})`).join(', ')}`)
  out()

  // Tick lines, printed in order as soon as every node reported (or the tick is long overdue).
  let nextTick = 0
  const printTicks = (final: boolean): void => {
    if (!span) return
    if (nextTick === 0) nextTick = span.firstTick
    for (; nextTick <= span.lastTick; nextTick++) {
      const forTick = reports.filter((r) => r.tick === nextTick)
      const overdue = Date.now() > (nextTick + 1) * 1000 + 6_000
      if (forTick.length < workers.length && !final && !overdue) return
      if (forTick.length === 0 && final && nextTick * 1000 > Date.now()) return
      out(tickLine(nextTick, forTick, names))
      for (const r of forTick) if (r.outcome === 'error') out(`          ${r.node}: ${r.error ?? 'failed'}`)
    }
  }

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
  printTicks(true)

  const summary = summarize(reports, span, failures.length)
  out()
  out('Summary')
  const row = (label: string, value: string | number, note = ''): void =>
    out(`${label.padStart(14)}: ${value}${note ? `   ${note}` : ''}`)
  row('ticks', summary.ticks)
  row('executions', summary.executions)
  row(
    'duplicates',
    summary.duplicates,
    summary.duplicates > 0
      ? `(${summary.ranTwice} extra runs of a tick, ${summary.overlaps} runs overlapping another in time)`
      : '',
  )
  row('skips', summary.skips)
  row('missed ticks', summary.missed, summary.missed > 0 ? '(no node ran them)' : '')
  row('errors', summary.errors)
  row('db', dbPath)
  for (const failure of failures) out(`  ${failure}`)
  out()

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

/** Asks every live worker to stop, and kills the ones still there after STOP_GRACE_MS: no orphans. Resolves to the killed ones. */
async function stopWorkers(workers: Worker[]): Promise<Worker[]> {
  const live = (): Worker[] => workers.filter((w) => !w.exited)
  for (const w of live()) send(w.child, { type: 'stop' })
  const deadline = Date.now() + STOP_GRACE_MS
  while (live().length > 0 && Date.now() < deadline) await sleep(20)
  const killed = live()
  for (const w of killed) w.child.kill('SIGKILL')
  while (live().length > 0) await sleep(20)
  return killed
}

function send(child: ChildProcess, message: ParentMessage): void {
  if (!child.connected) return
  try {
    child.send(message, (error) => void error) // a worker that just exited cannot be told: nothing to do
  } catch {
    // same
  }
}

/** dist/cli/main.js (or src/cli/main.ts when run from source): the entry point the workers run. */
function mainScript(): string {
  const self = fileURLToPath(import.meta.url)
  return self.replace(/demo\.(ts|js)$/, 'main.$1')
}

/** `06:12:01  node-2 ran   node-1 skipped   node-3 skipped`, in local time. */
function tickLine(tick: number, reports: TickReport[], names: string[]): string {
  const order: Record<Outcome, number> = { ran: 0, error: 1, skipped: 2 }
  const sorted = [...reports].sort(
    (a, b) => order[a.outcome] - order[b.outcome] || names.indexOf(a.node) - names.indexOf(b.node),
  )
  const parts = sorted.map((r) => `${r.node} ${r.outcome}`)
  for (const node of names) if (!reports.some((r) => r.node === node)) parts.push(`${node} no report`)
  const ran = reports.filter((r) => r.outcome === 'ran').length
  const flag = ran > 1 ? `   <- DUPLICATE: ran ${ran} times` : ran === 0 ? '   <- missed: no node ran it' : ''
  return `${clockTime(tick)}  ${parts.join('   ')}${flag}`
}

function clockTime(tick: number): string {
  const d = new Date(tick * 1000)
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':')
}

/** The demo's verdict, from the workers' reports. */
interface Summary {
  ticks: number
  executions: number
  /** Executions that were a tick's second (or later) run, or that overlapped an earlier one in time; each counted once. */
  duplicates: number
  ranTwice: number
  overlaps: number
  skips: number
  missed: number
  errors: number
}

function summarize(
  all: TickReport[],
  span: { firstTick: number; lastTick: number } | undefined,
  otherErrors: number,
): Summary {
  const reports = span ? all.filter((r) => r.tick >= span.firstTick && r.tick <= span.lastTick) : []
  const runs = reports.filter((r) => r.outcome === 'ran').sort((a, b) => (a.startedAt ?? 0) - (b.startedAt ?? 0))
  const seenTicks = new Set<number>()
  let duplicates = 0
  let ranTwice = 0
  let overlaps = 0
  let latestEnd = Number.NEGATIVE_INFINITY
  for (const run of runs) {
    const again = seenTicks.has(run.tick)
    const overlapping = (run.startedAt ?? 0) < latestEnd
    if (again) ranTwice++
    if (overlapping) overlaps++
    if (again || overlapping) duplicates++
    seenTicks.add(run.tick)
    latestEnd = Math.max(latestEnd, run.endedAt ?? 0)
  }
  const ticks = span ? Math.max(0, span.lastTick - span.firstTick + 1) : 0
  let missed = 0
  if (span) for (let tick = span.firstTick; tick <= span.lastTick; tick++) if (!seenTicks.has(tick)) missed++
  return {
    ticks,
    executions: runs.length,
    duplicates,
    ranTwice,
    overlaps,
    skips: reports.filter((r) => r.outcome === 'skipped').length,
    missed,
    errors: reports.filter((r) => r.outcome === 'error').length + otherErrors,
  }
}

// ---------------------------------------------------------------- worker

async function runWorker(args: string[]): Promise<number> {
  const values = parseOptions(args, {
    db: { type: 'string' },
    node: { type: 'string' },
    driver: { type: 'string' },
    'no-lock': { type: 'boolean' },
  })
  const { db, node, driver: driverName } = values
  if (
    !process.send ||
    typeof db !== 'string' ||
    typeof node !== 'string' ||
    !['node:sqlite', 'better-sqlite3', 'libsql'].includes(String(driverName))
  ) {
    throw new UsageError(`${WORKER} is internal: "shedlock demo" starts it`)
  }
  const useLock = values['no-lock'] !== true
  // Ctrl-C reaches the whole process group; the parent decides, and tells us to stop.
  process.on('SIGINT', () => {})

  const sends = new Set<Promise<void>>()
  const report = (message: WorkerMessage): void => {
    if (!process.connected) return
    const sent = new Promise<void>((resolve) => process.send!(message, undefined, {}, () => resolve()))
    sends.add(sent)
    void sent.then(() => sends.delete(sent))
  }

  let connection: SqliteConnection
  try {
    connection = (await loadSqliteDriver(driverName as SqliteDriverName)).open(db)
  } catch (error) {
    report({ type: 'fatal', node, error: error instanceof Error ? error.message : String(error) })
    await Promise.all(sends)
    process.disconnect()
    return EXIT_FAILURE
  }
  const executor = createLockingTaskExecutor(sqliteLockProvider({ database: connection, lockedBy: node }))

  // The task: takes 100-300 ms and says which tick (second) it ran for, and when.
  const task = async (tick: number): Promise<{ tick: number; startedAt: number; endedAt: number }> => {
    const startedAt = Date.now()
    await sleep(100 + Math.floor(Math.random() * 201))
    return { tick, startedAt, endedAt: Date.now() }
  }
  const runTick = async (tick: number): Promise<void> => {
    try {
      if (!useLock) {
        report({ type: 'tick', node, outcome: 'ran', ...(await task(tick)) })
        return
      }
      const result = await executor.executeWithLock(() => task(tick), TASK)
      report(
        result.executed
          ? { type: 'tick', node, outcome: 'ran', ...result.result }
          : { type: 'tick', node, tick, outcome: 'skipped' },
      )
    } catch (error) {
      report({
        type: 'tick',
        node,
        tick,
        outcome: 'error',
        error: error instanceof Error ? error.message : String(error),
      })
    }
  }

  const running = new Set<Promise<void>>()
  let timer: NodeJS.Timeout | undefined
  let finish: () => void = () => {}
  const finished = new Promise<void>((resolve) => {
    finish = resolve
  })
  const stop = (): void => {
    clearTimeout(timer)
    finish()
  }
  // A scheduler firing on every wall-clock second, from firstTick to lastTick.
  const schedule = (tick: number, lastTick: number): void => {
    if (tick > lastTick) {
      finish()
      return
    }
    timer = setTimeout(
      () => {
        const run = runTick(tick)
        running.add(run)
        void run.then(() => running.delete(run))
        schedule(tick + 1, lastTick)
      },
      Math.max(0, tick * 1000 - Date.now()),
    )
  }
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'start') schedule(message.firstTick, message.lastTick)
    else stop()
  })
  // The parent is gone (or done with us): stop rather than become an orphan.
  process.on('disconnect', stop)
  report({ type: 'ready', node })

  await finished
  await Promise.all(running)
  await Promise.all(sends)
  connection.close()
  if (process.connected) process.disconnect()
  return EXIT_OK
}
