import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type CompareOptions, type Contender, compare } from '../harness.ts'
import type { OverheadRow } from '../result.ts'
import type { StoreSetup } from '../setups/setup.ts'
import { ratio } from '../stats.ts'

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
    })
  }
  return rows
}
