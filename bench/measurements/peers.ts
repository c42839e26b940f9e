import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type CompareOptions, type Contender, compare } from '../harness.ts'
import type { Store } from '../options.ts'
import type { PeerEntry, PeerRatios, PeerRow } from '../result.ts'
import type { StoreSetup } from '../setups/setup.ts'
import { median, ratio } from '../stats.ts'
import { inProcesses, sameRowOfEach } from './processes.ts'

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
      const { results, opsPerBlock } = await compare(
        [ours, ...included.map((p) => ({ label: p.label, operation: p.operation }))],
        { ...options, concurrency },
      )
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

/**
 * {@link measurePeers} in `processes` fresh processes (see {@link inProcesses}), combined by
 * {@link combinePeers}.
 */
export async function measurePeersInProcesses(
  store: Store,
  runId: string,
  options: Omit<CompareOptions, 'concurrency'>,
  concurrencies: readonly number[],
  processes: number,
): Promise<PeerRow[]> {
  return combinePeers(
    await inProcesses<PeerRow>({ measurement: 'peers', store, runId, options, concurrencies }, processes),
  )
}

/**
 * One row per store and caller count from the rows of several processes: each ratio against a
 * peer is the median over the processes, and the peer's result is that of the process whose p50
 * ratio against it is the median (the lower middle one, for an even count); the row's `ours` and
 * `opsPerBlock` are those of the process chosen for the first peer. Every process's ratios are
 * kept in each peer's `processes`.
 */
export function combinePeers(runs: readonly (readonly PeerRow[])[]): PeerRow[] {
  const first = runs[0] ?? []
  return first.map((row) => {
    const rows = sameRowOfEach(runs, row, 'peers')
    let representative = row
    const peers = row.peers.map((peer, index): PeerEntry => {
      const entries = rows.map((r) => {
        const entry = r.peers[index]
        if (entry?.result.label !== peer.result.label)
          throw new Error(`${row.store}: the processes measured different peers for ${row.concurrency} callers`)
        return { row: r, entry }
      })
      const ratios: PeerRatios[] = entries.map(({ entry }) => ({
        p50Ratio: entry.p50Ratio,
        p99Ratio: entry.p99Ratio,
        opsRatio: entry.opsRatio,
      }))
      const chosen = [...entries].sort((a, b) => a.entry.p50Ratio - b.entry.p50Ratio)[(entries.length - 1) >> 1]!
      if (index === 0) representative = chosen.row
      return {
        result: chosen.entry.result,
        description: peer.description,
        p50Ratio: median(ratios.map((r) => r.p50Ratio)),
        p99Ratio: median(ratios.map((r) => r.p99Ratio)),
        opsRatio: median(ratios.map((r) => r.opsRatio)),
        processes: ratios,
      }
    })
    return {
      store: row.store,
      concurrency: row.concurrency,
      opsPerBlock: representative.opsPerBlock,
      ours: representative.ours,
      peers,
    }
  })
}
