import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** One row of the table: a topology, its option, one fault (issue 29's measures). */
export interface Row {
  topology: string
  option: string
  fault: string
  /** lock() calls (or executeWithLock() calls in a slot row) by every node. */
  attempts: number
  /** Locks handed out (slot rows: task runs). */
  grants: number
  /** Acquisitions that failed with a LockProviderError (a store that is down, unreplicated, read-only). */
  errors: number
  /** The store's view: grants handed out before another node's grant reached its lockAtMostUntil. */
  doubleGrantsStore: number
  /** The tasks' view: grants while another node's task was still running (it ends when its signal aborts). */
  doubleGrantsTasks: number
  /** Slot rows: slots that ran on more than one node; null elsewhere. */
  duplicateSlotRuns: number | null
  /** Slot rows: slots some node fired that ran nowhere; null elsewhere. */
  slotsNeverRun: number | null
  /** From the moment the lock was free to take (the fault, or the end of a grant that survived it) until a node got it, in ms. */
  noLockMs: number | null
  /** Holder faults: how long the cut-off or frozen holder's task ran after the next holder's grant (negative: it ended before), in ms. */
  overlapMs: number | null
  /** 1 when no node could take the lock even after lockAtMostFor had passed since the fault and the store recovered. */
  stuckAfterRecovery: number
}

/** A blank row of `topology`, `option` and `fault`, every count 0. */
export function newRow(topology: string, option: string, fault: string): Row {
  return {
    topology,
    option,
    fault,
    attempts: 0,
    grants: 0,
    errors: 0,
    doubleGrantsStore: 0,
    doubleGrantsTasks: 0,
    duplicateSlotRuns: null,
    slotsNeverRun: null,
    noLockMs: null,
    overlapMs: null,
    stuckAfterRecovery: 0,
  }
}

const RESULTS = new URL('../results/', import.meta.url).pathname
// Each test file writes its rows here; the global teardown merges them into latest.*.
const PARTS = join(RESULTS, '.parts')
// The order of the table: the files' topologies, then the holder faults.
const ORDER = ['redis-sentinel', 'redis-cluster', 'postgres', 'mariadb', 'etcd', 'zookeeper', 'nats']

/** Saves one test file's rows and skipped topologies (with the reason), for the teardown to merge. */
export function saveRows(file: string, rows: readonly Row[], skipped: readonly string[]): void {
  mkdirSync(PARTS, { recursive: true })
  writeFileSync(join(PARTS, `${file}.json`), `${JSON.stringify({ rows, skipped }, null, 2)}\n`)
}

/** Removes the parts of an earlier run (one killed before its teardown). */
export function clearParts(): void {
  rmSync(PARTS, { recursive: true, force: true })
}

/**
 * Merges the test files' rows into test/ha/results/latest.json and latest.md, and returns the
 * Markdown table (undefined when no file saved rows: a run filtered to nothing keeps the last
 * results). `lockAtMostForMs` and `seconds` go into the header.
 */
export function mergeResults(lockAtMostForMs: number, seconds: number, full: boolean): string | undefined {
  if (!existsSync(PARTS)) return undefined
  const parts = readdirSync(PARTS)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -5))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
  const rows: Row[] = []
  const skipped: string[] = []
  for (const part of parts) {
    const saved = JSON.parse(readFileSync(join(PARTS, `${part}.json`), 'utf8')) as { rows: Row[]; skipped: string[] }
    rows.push(...saved.rows)
    skipped.push(...saved.skipped)
  }
  clearParts()
  if (rows.length === 0 && skipped.length === 0) return undefined
  const table = markdown(rows)
  const at = new Date().toISOString()
  const matrix = full ? 'the full matrix (SHEDLOCK_HA_FULL=1)' : 'the default rows'
  writeFileSync(
    join(RESULTS, 'latest.json'),
    `${JSON.stringify({ at, node: process.version, seconds, full, lockAtMostForMs, rows, skipped }, null, 2)}\n`,
  )
  const notes = skipped.length === 0 ? '' : `\n\nSkipped:\n\n${skipped.map((s) => `- ${s}`).join('\n')}`
  writeFileSync(
    join(RESULTS, 'latest.md'),
    `Run of ${at} (${process.version}, ${seconds} s, ${matrix}); lockAtMostFor ${lockAtMostForMs} ms.\n\n${table}${notes}\n`,
  )
  return `${table}${notes}`
}

function rank(file: string): number {
  const i = ORDER.indexOf(file)
  return i < 0 ? ORDER.length : i
}

const dash = (n: number | null): string => (n === null ? '–' : String(n))
const bold = (n: number | null): string => (n === null ? '–' : n === 0 ? '0' : `**${n}**`)

/** The rows as a Markdown table; a non-zero double grant, duplicate or missed slot is bold. */
export function markdown(rows: readonly Row[]): string {
  const lines = [
    '| topology | option | fault | attempts | grants | errors | double grants (store) | double grants (tasks) | duplicate slot runs | slots never run | no lock for (ms) | overlap (ms) | stuck after recovery |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const r of rows) {
    lines.push(
      `| ${r.topology} | ${r.option} | ${r.fault} | ${r.attempts} | ${r.grants} | ${r.errors} | ${bold(r.doubleGrantsStore)} | ${bold(r.doubleGrantsTasks)} | ${bold(r.duplicateSlotRuns)} | ${bold(r.slotsNeverRun)} | ${dash(r.noLockMs)} | ${dash(r.overlapMs)} | ${r.stuckAfterRecovery} |`,
    )
  }
  return lines.join('\n')
}
