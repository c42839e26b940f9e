import { readFileSync } from 'node:fs'

/** One execution of a task, from a worker's ledger. Times are CLOCK_MONOTONIC nanoseconds, shared by every process of the machine. */
export interface Execution {
  node: string
  name: string
  start: bigint
  /** `undefined` when the ledger has a start without an end: the execution counts as never ending. */
  end: bigint | undefined
}

/** Two executions of one name that ran at the same time. */
export interface Overlap {
  name: string
  first: Execution
  second: Execution
}

/** What the checker found in the ledgers of one soak run. */
export interface LedgerReport {
  executions: number
  overlaps: Overlap[]
  /** Executions with a start and no end. */
  unfinished: number
  /** Executions per node. */
  perNode: Record<string, number>
  /** Executions per lock name. */
  perName: Record<string, number>
  /** Lines that are neither a start nor an end of a started execution. */
  malformed: number
}

/**
 * Reads the ledger of each node: lines `<id> S <ns> <name>` at a task's start and `<id> E <ns>`
 * at its end, `id` counting the node's executions.
 */
export function readLedgers(files: Record<string, string>): { executions: Execution[]; malformed: number } {
  const executions: Execution[] = []
  let malformed = 0
  for (const [node, file] of Object.entries(files)) {
    const open = new Map<string, Execution>()
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line === '') continue
      const [id, kind, ns, name] = line.split(' ')
      if (kind === 'S' && id && ns && name) {
        const execution: Execution = { node, name, start: BigInt(ns), end: undefined }
        open.set(id, execution)
        executions.push(execution)
      } else if (kind === 'E' && id && ns && open.has(id)) {
        open.get(id)!.end = BigInt(ns)
        open.delete(id)
      } else {
        malformed++
      }
    }
  }
  return { executions, malformed }
}

/**
 * Proves or refutes mutual exclusion: for each name, executions sorted by start must each begin
 * after every earlier one ended. An execution without an end overlaps everything after it.
 */
export function checkLedger(executions: Execution[], malformed = 0): LedgerReport {
  const byName = new Map<string, Execution[]>()
  const perNode: Record<string, number> = {}
  for (const e of executions) {
    let list = byName.get(e.name)
    if (!list) {
      list = []
      byName.set(e.name, list)
    }
    list.push(e)
    perNode[e.node] = (perNode[e.node] ?? 0) + 1
  }
  const overlaps: Overlap[] = []
  const perName: Record<string, number> = {}
  for (const [name, list] of byName) {
    perName[name] = list.length
    list.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0))
    // The execution that reaches furthest so far: a later start before its end is an overlap.
    let reach: Execution | undefined
    for (const e of list) {
      if (reach && (reach.end === undefined || e.start < reach.end)) overlaps.push({ name, first: reach, second: e })
      if (!reach || endsLater(e, reach)) reach = e
    }
  }
  return {
    executions: executions.length,
    overlaps,
    unfinished: executions.filter((e) => e.end === undefined).length,
    perNode,
    perName,
    malformed,
  }
}

function endsLater(a: Execution, b: Execution): boolean {
  if (b.end === undefined) return false
  return a.end === undefined || a.end > b.end
}

/**
 * The growth of a worker's heap, in bytes per second: the least-squares slope of the samples
 * (each taken after a full collection) from `steadyFrom` (ms since the epoch) on, by default of
 * the second half of the run; before, the JIT, connection pools and caches warm up.
 */
export function heapSlope(samples: { at: number; heapUsed: number }[], steadyFrom?: number): number {
  const steady =
    steadyFrom === undefined ? samples.slice(Math.floor(samples.length / 2)) : samples.filter((p) => p.at >= steadyFrom)
  if (steady.length < 3) return 0
  const n = steady.length
  const mx = steady.reduce((s, p) => s + p.at, 0) / n
  const my = steady.reduce((s, p) => s + p.heapUsed, 0) / n
  let num = 0
  let den = 0
  for (const p of steady) {
    num += (p.at - mx) * (p.heapUsed - my)
    den += (p.at - mx) ** 2
  }
  return den === 0 ? 0 : (num / den) * 1000
}
