import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { type CompareOptions, type Contender, compare, newTally, resultOf, runBlock, runTallied } from '../harness.ts'
import type { ScaleRow } from '../result.ts'
import type { StoreSetup } from '../setups/setup.ts'
import { ratio } from '../stats.ts'

/** Names already in the small space. */
export const SMALL_NAMES = 10
// Filling and draining time the shared-keyspace mode may spend on extra passes.
const SHARED_PASS_BUDGET_MS = 15_000

function contender(label: string, provider: LockProvider, name: string): Contender {
  return {
    label,
    async operation() {
      const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: 60_000 }))
      if (!lock) throw new Error(`uncontended lock "${name}" was not acquired`)
      await lock.unlock()
    },
  }
}

/**
 * Scale: acquire+release (one caller) in a space holding `largeNames` other locks against one
 * holding 10. Where the store has separate namespaces (tables, buckets, databases) both spaces
 * are filled once and measured in alternate blocks; where it has one keyspace (etcd, ZooKeeper,
 * memcached) the large space is filled before its blocks and drained after them, in as many
 * passes as the fill speed allows, so that the small case really runs against a store without
 * the large one's names.
 */
export async function measureScale(
  setup: StoreSetup,
  runId: string,
  largeNames: number,
  options: Omit<CompareOptions, 'concurrency'>,
): Promise<ScaleRow> {
  const names = (space: string, count: number): string[] =>
    Array.from({ length: count }, (_, i) => `${runId}-${space}-${i}`)
  const small = await setup.scaleSpace('small')
  const large = await setup.scaleSpace('large')
  await small.fill(names('s', SMALL_NAMES))
  const smallSide = contender('10 names', small.provider, `${runId}-sc-small`)
  const largeSide = contender(`${largeNames} names`, large.provider, `${runId}-sc-large`)
  const largeSeed = names('l', largeNames)

  if (setup.scaleMode === 'separate') {
    await large.fill(largeSeed)
    const { results } = await compare([smallSide, largeSide], { ...options, concurrency: 1 })
    const [s, l] = results as [(typeof results)[0], (typeof results)[0]]
    return row(setup, s, l, largeNames)
  }

  // One keyspace: the small case must run while the large names are absent. Each pass runs small
  // blocks, fills the large space, runs large blocks and drains it. The first pass runs one block
  // of each and times the fill and drain; the other blocks are spread over as many passes as
  // SHARED_PASS_BUDGET_MS of filling allows (at least one more), so that drift between the two
  // cases cancels out as far as the store's fill speed permits.
  const smallTally = newTally()
  const largeTally = newTally()
  await runBlock(smallSide.operation, options.warmupOps, 1)
  const probe = Math.max(8, Math.ceil(options.warmupOps / 2))
  const t0 = process.hrtime.bigint()
  await runBlock(smallSide.operation, probe, 1)
  const msPerOp = Number(process.hrtime.bigint() - t0) / 1e6 / probe
  const opsPerBlock = Math.min(options.maxOps ?? 20_000, Math.max(16, Math.round(options.blockMs / msPerOp)))
  const pass = async (blocks: number): Promise<number> => {
    for (let b = 0; b < blocks; b++) await runTallied(smallSide, smallTally, opsPerBlock, 1)
    const fillStart = Date.now()
    await large.fill(largeSeed)
    let fillMs = Date.now() - fillStart
    await runBlock(largeSide.operation, options.warmupOps, 1)
    for (let b = 0; b < blocks; b++) await runTallied(largeSide, largeTally, opsPerBlock, 1)
    const drainStart = Date.now()
    await large.drain()
    fillMs += Date.now() - drainStart
    return fillMs
  }
  const fillMs = await pass(1)
  const remaining = options.blocks - 1
  const passes = Math.min(remaining, Math.max(1, Math.floor(SHARED_PASS_BUDGET_MS / Math.max(1, fillMs))))
  for (let p = 0; p < passes; p++) {
    // Spread the remaining blocks as evenly as whole numbers allow.
    const blocks = Math.floor(remaining / passes) + (p < remaining % passes ? 1 : 0)
    await pass(blocks)
  }
  return row(setup, resultOf(smallSide.label, smallTally, 1), resultOf(largeSide.label, largeTally, 1), largeNames)
}

function row(setup: StoreSetup, small: ScaleRow['small'], large: ScaleRow['large'], largeNames: number): ScaleRow {
  return {
    store: setup.name,
    mode: setup.scaleMode,
    smallNames: SMALL_NAMES,
    largeNames,
    small,
    large,
    p50Ratio: ratio(large.latency.p50, small.latency.p50),
    p99Ratio: ratio(large.latency.p99, small.latency.p99),
  }
}
