import { describe, expect, it } from 'vitest'
import { p50Chart } from '../../bench/chart.ts'
import type { OverheadRow } from '../../bench/result.ts'
import { flatContender } from './contender.ts'

const row = (store: string, concurrency: number, ours: number, baseline: number): OverheadRow => ({
  store,
  concurrency,
  opsPerBlock: 10,
  ours: flatContender('shedlock', ours),
  baseline: flatContender('baseline', baseline),
  p50Ratio: ours / baseline,
  p99Ratio: ours / baseline,
  opsRatio: baseline / ours,
  cpuRatio: 1,
})

describe('p50Chart', () => {
  it('draws one pair of bars per store and caller count, with the absolute p50 and the ratio', () => {
    const svg = p50Chart(
      [row('redis', 1, 120, 100), row('redis', 16, 300, 200), row('a<b', 1, 50, 50)],
      'title & more',
    )!
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/)
    expect(svg.match(/<rect x="130"/g)).toHaveLength(6)
    expect(svg).toContain('redis, 1 caller')
    expect(svg).toContain('redis, 16 callers')
    expect(svg).toContain('120 µs (1.20×)')
    expect(svg).toContain('300 µs (1.50×)')
    // Text is escaped; nothing is fetched.
    expect(svg).toContain('title &amp; more')
    expect(svg).toContain('a&lt;b, 1 caller')
    expect(svg).not.toMatch(/href|<script|@import/)
  })

  it('draws nothing without figures', () => {
    expect(p50Chart([], 't')).toBeUndefined()
    expect(p50Chart([row('x', 1, Number.NaN, 100)], 't')).toBeUndefined()
  })
})
