import { describe, expect, it } from 'vitest'
import { fleetChart, fleetSection, growthFit } from '../../bench/fleet-report.ts'
import type { FleetContender, FleetRow } from '../../bench/result.ts'

const contender = (label: string, opsPerTick: number, p99: number, ratios = false): FleetContender => ({
  label,
  version: `${label} 1.0.0`,
  settings: 'defaults',
  periodMs: 1000,
  ticks: 10,
  warmupTicks: 3,
  duplicates: 0,
  missing: 0,
  outside: 0,
  runs: 100,
  runsPerReplica: [50, 50],
  fireToStart: { p50: p99 / 2, p99, max: p99 },
  lastStartMs: { p50: p99, max: p99 },
  storeOpsPerTick: opsPerTick,
  storeOpsPerSecond: opsPerTick,
  serverOpsPerTick: opsPerTick,
  serverCpuMsPerTick: 1,
  clientCpuPerRunUs: 100,
  ...(ratios ? { oursOverPeer: { p99: 0.5, storeOpsPerTick: 0.25, serverCpuMsPerTick: 1, clientCpuPerRunUs: 1 } } : {}),
  perTick: [],
  errors: [],
})

const row = (replicas: number, jobs: number): FleetRow => ({
  store: 'redis',
  server: 'Redis 7',
  replicas,
  jobs,
  // store calls per tick = J × (4 + 1 × R): a winner's calls plus one per replica
  contenders: [contender('shedlock', jobs * (4 + replicas), 10), contender('bullmq', jobs * 9, 20, true)],
})

describe('fleet report', () => {
  it('fits J × (a + b × R) exactly when the figures follow it', () => {
    const fit = growthFit(
      [2, 4, 8].flatMap((replicas) => [50, 200].map((jobs) => ({ replicas, jobs, y: jobs * (4 + replicas) }))),
    )
    expect(fit.a).toBeCloseTo(4, 9)
    expect(fit.b).toBeCloseTo(1, 9)
  })

  it('prints a line per contender with its ratios, and the growth fit once sizes differ', () => {
    const one = fleetSection([row(2, 50)])
    expect(one).toContain('| redis | 2 × 50 | shedlock |')
    expect(one).toMatch(
      /\| redis \| 2 × 50 \| bullmq \| 1 s × 10 \| 100\/500 \| 0 \| 0 \| 10\.0 \| 20\.0 .* \| 0\.50 \| 0\.25 \| 1\.00 \|/,
    )
    expect(one).not.toContain('Growth')
    const grid = fleetSection([row(2, 50), row(4, 50), row(8, 200)])
    expect(grid).toContain('Growth')
    // shedlock: 4 calls per job and 1 per job and replica; at 50 × 5,000: 5,000 × 54
    expect(grid).toMatch(/\| redis \| shedlock \| 2×50, 4×50, 8×200 \| 4\.00 \| 1\.00 \| 270,000 \|/)
    // A size where runs went missing (a fleet falling behind) is left out of the fit.
    const behind = row(8, 1000)
    const fell = { ...behind, contenders: behind.contenders.map((c) => ({ ...c, missing: 10, storeOpsPerTick: 1 })) }
    expect(fleetSection([row(2, 50), row(4, 50), row(8, 200), fell])).toMatch(
      /\| redis \| shedlock \| 2×50, 4×50, 8×200 \| 4\.00 \| 1\.00 \| 270,000 \|/,
    )
  })

  it("gives a contender's warm-up ticks their own figures, apart from the measured ones", () => {
    const warmed = row(2, 50)
    const [ours, peer] = warmed.contenders
    const section = fleetSection([
      { ...warmed, contenders: [{ ...ours!, warmupFireToStart: { p50: 41.5, p99: 123, max: 130 } }, peer!] },
    ])
    expect(section).toContain(
      'shedlock (shedlock 1.0.0): defaults. Runs per replica 50 / 50. Its 3 warm-up ticks (not counted): fire→start p50 41.5, p99 123 ms.',
    )
    // Without warm-up figures (the per-minute contenders), no such note.
    expect(section).toMatch(/bullmq \(bullmq 1\.0\.0\): defaults\. Runs per replica 50 \/ 50\.$/m)
  })

  it('draws the growth chart from three sizes on, escaped and self-contained', () => {
    expect(fleetChart([row(2, 50), row(4, 50)], 't')).toBeUndefined()
    const svg = fleetChart([row(2, 50), row(4, 50), row(8, 200)], 'sizes & figures')!
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/)
    expect(svg.match(/<polyline/g)).toHaveLength(4)
    expect(svg).toContain('sizes &amp; figures')
    expect(svg).toContain('8×200')
    expect(svg).not.toMatch(/href|<script|@import/)
  })
})
