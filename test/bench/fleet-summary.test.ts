import { describe, expect, it } from 'vitest'
import { type Measured, type Run, summarize } from '../../bench/measurements/fleet-summary.ts'

const PERIOD = 1000
const FIRST = 1_000_000 // the first measured fire, ms since the epoch

// Two jobs on two replicas: `warmup` ticks before FIRST, 2 measured ticks from it. Each run starts
// `lateMs(tick)` after its fire (tick < 0 for the warm-up ones).
function measured(warmup: number, lateMs: (tick: number) => number): Measured {
  const runs: Run[] = []
  for (let tick = -warmup; tick < 2; tick++) {
    const slot = FIRST + tick * PERIOD
    for (let job = 0; job < 2; job++) runs.push({ replica: job, job, slot, startedAt: slot + lateMs(tick) })
  }
  const sample = { ops: 0, cpuMs: 0 }
  return {
    store: 'redis',
    periodMs: PERIOD,
    ticks: 2,
    warmup,
    firstFire: FIRST,
    jobs: 2,
    replicas: 2,
    runs,
    samples: [sample, sample, sample],
    afterStop: sample,
    reports: [{ windowCpuUs: 0, opsAtBoundaries: Array(warmup + 3).fill(0), errors: [] }],
    inWindow: (run) => run.slot >= FIRST && run.slot <= FIRST + PERIOD,
    connections: 1,
    extraErrors: [],
  }
}

const described = { version: 'shedlock 1.0.0', settings: () => 'defaults' }

describe('fleet summary', () => {
  it("reports the warm-up ticks' fire-to-start apart from the measured ticks'", () => {
    // Warm-up runs 100 ms late, measured ones 10 ms: neither figure may take the other's runs.
    const summary = summarize(
      'shedlock',
      described,
      measured(3, (tick) => (tick < 0 ? 100 : 10)),
    )
    expect(summary.fireToStart).toEqual({ p50: 10, p99: 10, max: 10 })
    expect(summary.warmupFireToStart).toEqual({ p50: 100, p99: 100, max: 100 })
    expect(summary.runs).toBe(4)
    expect(summary.outside).toBe(0)
  })

  it('has no warm-up figures without warm-up ticks', () => {
    const summary = summarize(
      'shedlock',
      described,
      measured(0, () => 10),
    )
    expect(summary).not.toHaveProperty('warmupFireToStart')
  })
})
