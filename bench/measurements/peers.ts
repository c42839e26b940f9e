import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type CompareOptions, type Contender, compare } from '../harness.ts'
import type { PeerRow } from '../result.ts'
import type { StoreSetup } from '../setups/setup.ts'
import { ratio } from '../stats.ts'

/**
 * Peers: our provider against other lock libraries on the same server and, where the library
 * takes one, the same client, in interleaved blocks of equal size. Uncontended acquire+release,
 * each caller on its own name; a library that cannot run `concurrency` callers (advisory-lock
 * opens a connection per lock) is left out of that row.
 */
export async function measurePeers(
  setup: StoreSetup,
  runId: string,
  options: Omit<CompareOptions, 'concurrency'>,
  concurrencies: readonly number[],
): Promise<PeerRow[]> {
  if (!setup.peers) return []
  const peers = await setup.peers()
  const rows: PeerRow[] = []
  try {
    for (const concurrency of concurrencies) {
      const included = peers.filter((p) => p.maxConcurrency >= concurrency)
      if (included.length === 0) continue
      const names = Array.from({ length: concurrency }, (_, w) => `${runId}-peer${concurrency}-${w}`)
      const ours: Contender = {
        label: 'shedlock',
        async operation(worker) {
          const lock = await setup.provider.lock(lockConfiguration({ name: names[worker]!, lockAtMostFor: 60_000 }))
          if (!lock) throw new Error(`uncontended lock "${names[worker]}" was not acquired`)
          await lock.unlock()
        },
      }
      const { results, opsPerBlock } = await compare([ours, ...included.map((p) => ({ label: p.label, operation: p.operation }))], { ...options, concurrency })
      const [o, ...others] = results as [(typeof results)[0], ...typeof results]
      rows.push({
        store: setup.name,
        concurrency,
        opsPerBlock,
        ours: o,
        peers: others.map((result, i) => ({
          result,
          description: included[i]!.description,
          p50Ratio: ratio(o.latency.p50, result.latency.p50),
          p99Ratio: ratio(o.latency.p99, result.latency.p99),
          opsRatio: ratio(o.opsPerSecond, result.opsPerSecond),
        })),
      })
    }
  } finally {
    for (const p of peers) await p.close()
  }
  return rows
}
