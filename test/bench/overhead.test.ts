import { describe, expect, it } from 'vitest'
import { combineOverhead } from '../../bench/measurements/overhead.ts'
import type { OverheadRow } from '../../bench/result.ts'
import { flatContender } from './contender.ts'

// One process's row: ours at `oursP50` µs and `oursCpu` µs of CPU against a baseline of 100 and 50.
const row = (
  store: string,
  concurrency: number,
  oursP50: number,
  oursCpu: number,
  opsPerBlock: number,
): OverheadRow => ({
  store,
  concurrency,
  opsPerBlock,
  ours: flatContender('shedlock', oursP50, oursCpu),
  baseline: flatContender('baseline', 100, 50),
  p50Ratio: oursP50 / 100,
  p99Ratio: oursP50 / 100,
  opsRatio: 100 / oursP50,
  cpuRatio: oursCpu / 50,
  addedCpuUs: oursCpu - 50,
})

describe('overhead over several processes', () => {
  it('reports the median of each ratio, the absolute figures of the median process, and every process', () => {
    const combined = combineOverhead([
      [row('redis', 1, 120, 52, 10), row('redis', 16, 104, 60, 40)],
      [row('redis', 1, 101, 56, 11), row('redis', 16, 100, 51, 41)],
      [row('redis', 1, 106, 54, 12), row('redis', 16, 130, 53, 42)],
    ])
    expect(combined).toHaveLength(2)
    const [one, sixteen] = combined as [OverheadRow, OverheadRow]
    // p50 ratios 1.20, 1.01, 1.06: the median is the third process's; CPU 52, 56, 54: median 54.
    expect(one.p50Ratio).toBeCloseTo(1.06, 10)
    expect(one.cpuRatio).toBeCloseTo(54 / 50, 10)
    expect(one.addedCpuUs).toBeCloseTo(4, 10)
    expect(one.opsPerBlock).toBe(12)
    expect(one.ours.latency.p50).toBe(106)
    expect(one.processes?.map((p) => p.p50Ratio)).toEqual([1.2, 1.01, 1.06])
    // A ratio's median may come from another process than the p50's: each is its own median.
    expect(sixteen.p50Ratio).toBeCloseTo(1.04, 10)
    expect(sixteen.cpuRatio).toBeCloseTo(53 / 50, 10)
    expect(sixteen.opsPerBlock).toBe(40)
  })

  it('takes the lower middle process for the absolute figures of an even count', () => {
    const [combined] = combineOverhead([[row('pg', 1, 110, 50, 1)], [row('pg', 1, 100, 50, 2)]]) as [OverheadRow]
    expect(combined.p50Ratio).toBeCloseTo(1.05, 10)
    expect(combined.opsPerBlock).toBe(2)
  })

  it('refuses processes that measured different rows', () => {
    expect(() =>
      combineOverhead([[row('pg', 1, 110, 50, 1), row('pg', 16, 110, 50, 1)], [row('pg', 1, 100, 50, 2)]]),
    ).toThrow('pg: a process measured no row for 16 callers')
  })
})
