import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { CompareOptions } from '../harness.ts'
import type { Store } from '../options.ts'

const run = promisify(execFile)

/** What store-child.ts takes, as one JSON argument. */
export interface StoreChildRequest {
  readonly measurement: 'overhead' | 'peers'
  readonly store: Store
  readonly runId: string
  readonly options: Omit<CompareOptions, 'concurrency'>
  readonly concurrencies: readonly number[]
}

/**
 * One measurement of one store in `processes` fresh processes, one after the other (process i
 * with run id `<runId>p<i>`), each with its own connections, warm-up and tables: the rows of each
 * process, in the order they ran. One run's ratios moved by up to ±0.2 from process to process on
 * a 2-core machine while the blocks within each process agreed: what differs between processes
 * (code placement, the JIT's choices, the state of the store) is a bias of the whole process,
 * which more blocks in it cannot average out, so the caller combines the rows by their medians.
 */
export async function inProcesses<Row>(request: StoreChildRequest, processes: number): Promise<Row[][]> {
  const child = fileURLToPath(new URL('./store-child.js', import.meta.url))
  const runs: Row[][] = []
  for (let i = 0; i < processes; i++) {
    const own: StoreChildRequest = { ...request, runId: `${request.runId}p${i}` }
    let stdout: string
    try {
      ;({ stdout } = await run(process.execPath, [child, JSON.stringify(own)], { maxBuffer: 64 << 20 }))
    } catch (error) {
      // The child's error is the first line of its stderr that starts with one (`Error: ...`,
      // `TypeError: ...`), not the source line Node prints above it; execFile's own message
      // starts with the command line.
      const lines = String((error as { stderr?: unknown }).stderr ?? '').split('\n')
      const named = lines.map((line) => line.trim()).find((line) => /^\w*Error: /.test(line))
      const why = named ?? (error instanceof Error ? error.message : String(error))
      throw new Error(`${request.store}: ${request.measurement} process ${i + 1} of ${processes} failed: ${why}`)
    }
    runs.push(JSON.parse(stdout.trim().split('\n').pop()!) as Row[])
  }
  return runs
}

/**
 * The row for `row`'s store and caller count in each process's rows, in process order, for
 * combining them. @throws Error naming the store when a process measured no such row.
 */
export function sameRowOfEach<Row extends { readonly store: string; readonly concurrency: number }>(
  runs: readonly (readonly Row[])[],
  row: Row,
  what: string,
): Row[] {
  return runs.map((rows) => {
    const same = rows.find((r) => r.store === row.store && r.concurrency === row.concurrency)
    if (same === undefined)
      throw new Error(`${row.store}: a process measured no ${what} for ${row.concurrency} callers`)
    return same
  })
}
