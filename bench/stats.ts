/** Latency statistics of one series of samples, in microseconds. */
export interface LatencySummary {
  readonly count: number
  readonly mean: number
  readonly min: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
}

/**
 * The `p`-th percentile (0–100) of ascending `sorted` samples, by the nearest-rank method: the
 * smallest sample that at least `p` % of the samples do not exceed. No interpolation, so the
 * result is always a measured value (a p99 of 100 samples is the largest but one).
 *
 * @throws RangeError for an empty series or `p` outside 0–100.
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError('percentile of an empty series')
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0 and 100, got ${p}`)
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1]!
}

/** Summarises samples (any order; the array is not modified). @throws RangeError for an empty series. */
export function summarize(samples: readonly number[]): LatencySummary {
  if (samples.length === 0) throw new RangeError('summary of an empty series')
  const sorted = Float64Array.from(samples).sort()
  const values = Array.from(sorted)
  let sum = 0
  for (const v of values) sum += v
  return {
    count: values.length,
    mean: sum / values.length,
    min: values[0]!,
    p50: percentile(values, 50),
    p90: percentile(values, 90),
    p99: percentile(values, 99),
    max: values[values.length - 1]!,
  }
}

/** `ours / baseline`, or `NaN` when the baseline is 0 or either value is not finite. */
export function ratio(ours: number, baseline: number): number {
  if (!Number.isFinite(ours) || !Number.isFinite(baseline) || baseline === 0) return Number.NaN
  return ours / baseline
}

/** Operations per second for `ops` operations that took `elapsedNs` of wall time. */
export function opsPerSecond(ops: number, elapsedNs: bigint): number {
  return elapsedNs > 0n ? (ops * 1e9) / Number(elapsedNs) : Number.NaN
}

/** The median of `values` (the mean of the two middle ones for an even count); `NaN` when there are none or one is not finite. */
export function median(values: readonly number[]): number {
  if (values.length === 0 || values.some((v) => !Number.isFinite(v))) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
