import type { ContenderResult } from '../../bench/harness.ts'

/** A contender's result whose every latency figure is `p50` µs, for the bench's unit tests. */
export function flatContender(label: string, p50: number, cpuPerOpUs = 10): ContenderResult {
  return {
    label,
    latency: { count: 100, mean: p50, min: p50, p50, p90: p50, p99: p50, max: p50 },
    opsPerSecond: 1e6 / p50,
    ops: 100,
    concurrency: 1,
    cpuPerOpUs,
  }
}
