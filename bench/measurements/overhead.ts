import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type CompareOptions, type Contender, compare } from '../harness.ts'
import type { Store } from '../options.ts'
import type { OverheadRatios, OverheadRow } from '../result.ts'
import type { StoreSetup } from '../setups/setup.ts'
import { inProcesses, sameRowOfEach } from './processes.ts'
import { median, ratio } from '../stats.ts'

/**
 * Overhead against the limit: acquire+release through our provider (a fresh lock configuration
 * included, as the executor builds one per run) against the same statements sent straight
 * through the same client, each caller on a name of its own, in interleaved blocks.
 */
export async function measureOverhead(
  setup: StoreSetup,
  runId: string,
  options: Omit<CompareOptions, 'concurrency'>,
  concurrencies: readonly number[],
): Promise<OverheadRow[]> {
  const rows: OverheadRow[] = []
  for (const concurrency of concurrencies) {
    const ourNames = Array.from({ length: concurrency }, (_, w) => `${runId}-ov${concurrency}-o${w}`)
    const rawNames = Array.from({ length: concurrency }, (_, w) => `${runId}-ov${concurrency}-b${w}`)
    const ours: Contender = {
      label: 'shedlock',
      async operation(worker) {
        const lock = await setup.provider.lock(lockConfiguration({ name: ourNames[worker]!, lockAtMostFor: 60_000 }))
        if (!lock) throw new Error(`${setup.name}: uncontended lock "${ourNames[worker]}" was not acquired`)
        await lock.unlock()
      },
    }
    const baseline: Contender = {
      label: 'baseline',
      async operation(worker) {
        const lock = await setup.raw.acquire(rawNames[worker]!)
        if (!lock) throw new Error(`${setup.name}: uncontended baseline lock "${rawNames[worker]}" was not acquired`)
        await lock.release()
      },
    }
    const { results, opsPerBlock } = await compare([ours, baseline], { ...options, concurrency })
    const [o, b] = results as [(typeof results)[0], (typeof results)[0]]
    rows.push({
      store: setup.name,
      concurrency,
      opsPerBlock,
      ours: o,
      baseline: b,
      p50Ratio: ratio(o.latency.p50, b.latency.p50),
      p99Ratio: ratio(o.latency.p99, b.latency.p99),
      opsRatio: ratio(o.opsPerSecond, b.opsPerSecond),
      cpuRatio: ratio(o.cpuPerOpUs, b.cpuPerOpUs),
      addedCpuUs: o.cpuPerOpUs - b.cpuPerOpUs,
    })
  }
  return rows
}

/**
 * {@link measureOverhead} in `processes` fresh processes (see {@link inProcesses}), combined by
 * {@link combineOverhead}.
 */
export async function measureOverheadInProcesses(
  store: Store,
  runId: string,
  options: Omit<CompareOptions, 'concurrency'>,
  concurrencies: readonly number[],
  processes: number,
): Promise<OverheadRow[]> {
  return combineOverhead(
    await inProcesses<OverheadRow>({ measurement: 'overhead', store, runId, options, concurrencies }, processes),
  )
}

/**
 * One row per store and caller count from the rows of several processes: each ratio (and the
 * CPU added) is the median over the processes; the absolute figures (`ours`, `baseline`,
 * `opsPerBlock`) are those of the process whose p50 ratio is the median, the lower middle one
 * for an even count, so that they are one process's consistent measurement. Every process's
 * ratios are kept in `processes`.
 */
export function combineOverhead(runs: readonly (readonly OverheadRow[])[]): OverheadRow[] {
  const first = runs[0] ?? []
  return first.map((row) => {
    const rows = sameRowOfEach(runs, row, 'row')
    const ratios: OverheadRatios[] = rows.map((r) => ({
      p50Ratio: r.p50Ratio,
      p99Ratio: r.p99Ratio,
      opsRatio: r.opsRatio,
      cpuRatio: r.cpuRatio,
      addedCpuUs: r.addedCpuUs ?? r.ours.cpuPerOpUs - r.baseline.cpuPerOpUs,
    }))
    const byP50 = rows.map((r, i) => ({ r, i })).sort((a, b) => a.r.p50Ratio - b.r.p50Ratio)
    const representative = byP50[(byP50.length - 1) >> 1]!.r
    return {
      store: row.store,
      concurrency: row.concurrency,
      opsPerBlock: representative.opsPerBlock,
      ours: representative.ours,
      baseline: representative.baseline,
      p50Ratio: median(ratios.map((r) => r.p50Ratio)),
      p99Ratio: median(ratios.map((r) => r.p99Ratio)),
      opsRatio: median(ratios.map((r) => r.opsRatio)),
      cpuRatio: median(ratios.map((r) => r.cpuRatio)),
      addedCpuUs: median(ratios.map((r) => r.addedCpuUs)),
      processes: ratios,
    }
  })
}
