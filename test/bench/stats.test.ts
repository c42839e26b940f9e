import { describe, expect, it } from 'vitest'
import { median, opsPerSecond, percentile, ratio, summarize } from '../../bench/stats.ts'

describe('bench statistics', () => {
  it('takes percentiles by nearest rank, always a measured value', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1)
    expect(percentile(sorted, 50)).toBe(50)
    expect(percentile(sorted, 99)).toBe(99)
    expect(percentile(sorted, 100)).toBe(100)
    expect(percentile(sorted, 0)).toBe(1)
    expect(percentile([7], 99)).toBe(7)
    // 10 samples: the p99 is the largest, the p50 the fifth.
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99)).toBe(10)
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50)).toBe(5)
  })

  it('refuses an empty series and a percentile outside 0–100', () => {
    expect(() => percentile([], 50)).toThrow(RangeError)
    expect(() => percentile([1], 101)).toThrow(RangeError)
    expect(() => percentile([1], Number.NaN)).toThrow(RangeError)
    expect(() => summarize([])).toThrow(RangeError)
  })

  it('summarises unsorted samples numerically (not as strings) without changing them', () => {
    const samples = [30, 4, 100, 2, 10]
    const summary = summarize(samples)
    expect(samples).toEqual([30, 4, 100, 2, 10])
    expect(summary).toEqual({ count: 5, mean: 29.2, min: 2, p50: 10, p90: 100, p99: 100, max: 100 })
  })

  it('gives NaN for a ratio it cannot compute', () => {
    expect(ratio(3, 2)).toBe(1.5)
    expect(ratio(1, 0)).toBeNaN()
    expect(ratio(Number.NaN, 1)).toBeNaN()
    expect(opsPerSecond(500, 250_000_000n)).toBe(2000)
    expect(opsPerSecond(5, 0n)).toBeNaN()
  })

  it('takes the median of an odd and an even count without changing the input, and NaN when it cannot', () => {
    const values = [1.3, 0.9, 1.1]
    expect(median(values)).toBe(1.1)
    expect(values).toEqual([1.3, 0.9, 1.1])
    expect(median([4, 1, 3, 2])).toBe(2.5)
    expect(median([10, 9])).toBe(9.5)
    expect(median([])).toBeNaN()
    expect(median([1, Number.NaN, 2])).toBeNaN()
  })
})
