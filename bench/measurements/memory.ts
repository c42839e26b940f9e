import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { MemoryRow } from '../result.ts'

const run = promisify(execFile)

/** The variants measured: the executor with every listener hook, and the same over keepAliveLockProvider. */
export const MEMORY_VARIANTS = ['executor', 'keep-alive'] as const

/**
 * Memory: `cycles` executeWithLock cycles on the in-memory provider, in a child process started
 * with `--expose-gc` so that the heap is read after forced collections and nothing of the suite
 * itself is on it. Reports the heap growth and the timers and listeners left behind.
 */
export async function measureMemory(cycles: number): Promise<MemoryRow[]> {
  const child = fileURLToPath(new URL('./memory-child.js', import.meta.url))
  const rows: MemoryRow[] = []
  for (const variant of MEMORY_VARIANTS) {
    const { stdout } = await run(process.execPath, ['--expose-gc', child, String(cycles), variant], {
      maxBuffer: 1 << 20,
    })
    rows.push(memoryRow(JSON.parse(stdout.trim().split('\n').pop()!) as ChildReport))
  }
  return rows
}

/** What memory-child prints. */
export interface ChildReport {
  variant: string
  cycles: number
  seconds: number
  heapBefore: number
  heapMiddle: number
  heapAfter: number
  resourcesBefore: Record<string, number>
  resourcesAfter: Record<string, number>
  processListenersLeft: number
}

/** Derives growth and leftovers from a child's report. */
export function memoryRow(report: ChildReport): MemoryRow {
  const growthBytes = report.heapAfter - report.heapBefore
  return {
    ...report,
    growthBytes,
    growthPerCycle: growthBytes / report.cycles,
    timersLeft: (report.resourcesAfter.Timeout ?? 0) - (report.resourcesBefore.Timeout ?? 0),
  }
}
