import { existsSync, readFileSync } from 'node:fs'
import { noDoubleRunInAnyAttempt } from '../../helpers/double-runs.ts'
import { startNode } from '../../helpers/processes.ts'

/** One line of a proof app's ledger: a run of the job. Times are epoch milliseconds. */
export interface LedgerRecord {
  node: string
  /** The second of the fire (epoch seconds), as the scheduler reports it. */
  tick: number
  start: number
  end: number
  /** `assertLocked()` passed inside the job. */
  locked: boolean
  /** Which job, when an app runs several. */
  job?: string
}

/** A finished proof process. */
export interface ProofRun {
  node: string
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  /** When it printed "ready" (scheduling started) and "stopping". */
  ready: number
  stopping: number
}

/**
 * The lines of a proof process's stderr that are errors. cron (also the engine of
 * @nestjs/schedule) prints "[Cron] Missed execution deadline by …ms" when a loaded machine fires a
 * timer late (it then runs the tick at once, or skips it past its threshold): a note about
 * scheduling, not an error.
 */
export function stderrErrors(run: Pick<ProofRun, 'stderr'>): string[] {
  return run.stderr
    .split('\n')
    .filter((line) => line !== '' && !/^\[Cron\] Missed execution deadline by \d+ms/.test(line))
}

/** What a ledger shows over the window where every process was scheduling. */
export interface ProofReport {
  /** Ticks (epoch seconds) every process was up for, first to last. */
  window: number[]
  executions: number
  /** Runs per node, over the whole ledger. */
  byNode: Record<string, number>
  /** Ticks that ran more than once (whole ledger). */
  duplicates: number[]
  /** Ticks of the window that never ran. */
  missing: number[]
  /** Pairs of runs whose [start, end] intersect (whole ledger). */
  overlaps: Array<[LedgerRecord, LedgerRecord]>
  /** Runs where assertLocked() failed. */
  unlocked: number
}

/**
 * Starts `node <script>` with `env`, and resolves once it exits (killing it after `timeoutMs`).
 * The script prints `ready <ms>` when it starts scheduling and `stopping <ms>` when it stops.
 */
export async function runProofProcess(
  script: string,
  node: string,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<ProofRun> {
  if (!existsSync(script)) throw new Error(`${script} is missing`)
  // Node 22 warns on stderr that node:sqlite is experimental (24 and 26 do not): not an error of the app.
  const { code, signal, stdout, stderr } = await startNode(['--disable-warning=ExperimentalWarning', script], {
    env,
    killAfterMs: timeoutMs,
  }).done
  const time = (word: string) => Number(new RegExp(`^${word} (\\d+)$`, 'm').exec(stdout)?.[1] ?? Number.NaN)
  return { node, code, signal, stdout, stderr, ready: time('ready'), stopping: time('stopping') }
}

/** Reads a JSON-lines ledger; missing file means no runs. */
export function readLedger(path: string): LedgerRecord[] {
  if (!existsSync(path)) return []
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as LedgerRecord)
}

/**
 * Checks a ledger against the processes that wrote it. The window holds the ticks that fired at
 * least `marginMs` after the last process was ready and finished (`runMs`) before the first one
 * began to stop: each of them must have run exactly once.
 */
export function analyse(
  records: LedgerRecord[],
  runs: ProofRun[],
  options: { marginMs?: number; runMs?: number } = {},
): ProofReport {
  const margin = options.marginMs ?? 200
  const runMs = options.runMs ?? 700
  const from = Math.max(...runs.map((r) => r.ready)) + margin
  const to = Math.min(...runs.map((r) => r.stopping)) - runMs
  const window: number[] = []
  for (let tick = Math.ceil(from / 1000); tick * 1000 <= to; tick++) window.push(tick)

  const perTick = new Map<number, number>()
  const byNode: Record<string, number> = {}
  for (const r of records) {
    perTick.set(r.tick, (perTick.get(r.tick) ?? 0) + 1)
    byNode[r.node] = (byNode[r.node] ?? 0) + 1
  }
  const sorted = [...records].sort((a, b) => a.start - b.start)
  const overlaps: Array<[LedgerRecord, LedgerRecord]> = []
  let latest: LedgerRecord | undefined // the run that ends last among those started so far
  for (const r of sorted) {
    if (latest && r.start < latest.end) overlaps.push([latest, r])
    if (!latest || r.end > latest.end) latest = r
  }
  return {
    window,
    executions: records.length,
    byNode,
    duplicates: [...perTick].filter(([, n]) => n > 1).map(([tick]) => tick),
    missing: window.filter((tick) => !perTick.has(tick)),
    overlaps,
    unlocked: records.filter((r) => !r.locked).length,
  }
}

/**
 * Counts the double runs (ticks run twice, overlapping runs) of `reports` for
 * noDoubleRunInAnyAttempt(). Call it before any other check, so that an attempt failing elsewhere
 * still counts them and its retry cannot pass; a ledger that cannot be read is left to those checks.
 */
export function countDoubleRuns(reports: () => ProofReport[]): void {
  let count = 0
  try {
    for (const report of reports()) count += report.duplicates.length + report.overlaps.length
  } catch {
    return
  }
  noDoubleRunInAnyAttempt('ticks that ran twice or overlapped', count)
}

/** One line for the test log and the report. */
export function summary(name: string, report: ProofReport): string {
  const nodes = Object.entries(report.byNode)
    .sort()
    .map(([node, n]) => `${node}=${n}`)
    .join(' ')
  return `${name}: ${report.window.length} ticks in the window, ${report.executions} executions in all (${nodes}), ${report.duplicates.length} duplicates, ${report.missing.length} missing, ${report.overlaps.length} overlaps`
}
