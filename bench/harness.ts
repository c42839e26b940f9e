import { type LatencySummary, opsPerSecond, summarize } from './stats.ts'

/**
 * One timed operation (an acquire and its release). `worker` is the caller's index, from 0 to
 * `concurrency - 1`: each caller works on its own lock name, so callers never contend.
 */
export type Operation = (worker: number) => Promise<void>

/** One side of a comparison: ours, the baseline, or a peer library. */
export interface Contender {
  readonly label: string
  readonly operation: Operation
}

/** How {@link interleave} runs the contenders. */
export interface InterleaveOptions {
  /** Measured blocks per contender. The order of the contenders rotates from block to block. */
  readonly blocks: number
  /** Operations per block, the same for every contender. */
  readonly opsPerBlock: number
  /** Callers running at once, each on its own name. */
  readonly concurrency: number
  /** Untimed operations per contender before the first block (JIT, connection pools, caches). */
  readonly warmupOps: number
  /** Called between blocks (say, to let a store settle); not timed. */
  readonly betweenBlocks?: () => Promise<void>
}

/** What one contender measured over all its blocks. */
export interface ContenderResult {
  readonly label: string
  /** Latency of each operation, in microseconds. */
  readonly latency: LatencySummary
  /** Operations per second over the blocks' summed wall time. */
  readonly opsPerSecond: number
  readonly ops: number
  readonly concurrency: number
  /**
   * Client CPU time (user + system, this process) per operation over the measured blocks, in
   * microseconds: the library's own cost, which a loaded machine delays but does not inflate
   * the way it scatters latencies. Includes the client driver's work, the same on both sides.
   */
  readonly cpuPerOpUs: number
}

/** A monotonic nanosecond clock; `process.hrtime.bigint` outside tests. */
export type NanoClock = () => bigint

/**
 * Runs `ops` operations with `concurrency` callers and returns the block's wall time (ns).
 * Callers take the next operation from a shared count until `ops` have started, so every block
 * runs exactly `ops` operations whatever the concurrency. With `latencies`, each operation's own
 * duration (ns) is appended.
 */
export async function runBlock(
  operation: Operation,
  ops: number,
  concurrency: number,
  latencies?: number[],
  clock: NanoClock = process.hrtime.bigint,
): Promise<bigint> {
  let started = 0
  const caller = async (worker: number): Promise<void> => {
    while (started < ops) {
      started++
      const t0 = clock()
      await operation(worker)
      if (latencies) latencies.push(Number(clock() - t0))
    }
  }
  const begin = clock()
  await Promise.all(Array.from({ length: Math.min(concurrency, ops) }, (_, worker) => caller(worker)))
  return clock() - begin
}

/**
 * What one contender measured so far: each operation's latency (ns), the blocks' summed wall
 * time, and the process CPU time (µs, user + system) spent during its blocks.
 */
export interface Tally {
  readonly latencies: number[]
  elapsed: bigint
  cpuUs: number
}

/** An empty {@link Tally}. */
export function newTally(): Tally {
  return { latencies: [], elapsed: 0n, cpuUs: 0 }
}

/** Process CPU time used so far (user + system), in microseconds. */
export type CpuClock = () => number

const processCpu: CpuClock = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}

/**
 * Runs one measured block of `contender` into `tally`. Blocks run one at a time, so the CPU
 * time over a block is that contender's (and the client driver's, and whatever else this
 * process does meanwhile: nothing, in the suite).
 */
export async function runTallied(
  contender: Contender,
  tally: Tally,
  ops: number,
  concurrency: number,
  clock: NanoClock = process.hrtime.bigint,
  cpu: CpuClock = processCpu,
): Promise<void> {
  const cpuBefore = cpu()
  tally.elapsed += await runBlock(contender.operation, ops, concurrency, tally.latencies, clock)
  tally.cpuUs += cpu() - cpuBefore
}

/** The result of a finished {@link Tally}. @throws RangeError when nothing was measured. */
export function resultOf(label: string, tally: Tally, concurrency: number): ContenderResult {
  return {
    label,
    latency: summarize(tally.latencies.map((ns) => ns / 1000)),
    opsPerSecond: opsPerSecond(tally.latencies.length, tally.elapsed),
    ops: tally.latencies.length,
    concurrency,
    cpuPerOpUs: tally.latencies.length > 0 ? tally.cpuUs / tally.latencies.length : Number.NaN,
  }
}

/**
 * The order of the contenders in block `block`: rotated by one per block (AB, BA, AB... for two),
 * so that a slow drift of the machine or the store (another process, a checkpoint, a cache
 * filling) falls on every contender alike instead of on whichever always runs second.
 */
export function blockOrder<T>(items: readonly T[], block: number): T[] {
  const shift = block % items.length
  return [...items.slice(shift), ...items.slice(0, shift)]
}

/**
 * Measures contenders in alternating blocks: a warm-up of each, then `blocks` rounds in which
 * every contender runs one block of the same size with the same concurrency, in rotating order.
 * Latencies are of single operations; ops/s is over the summed wall time of each contender's
 * blocks.
 */
export async function interleave(
  contenders: readonly Contender[],
  options: InterleaveOptions,
  clock: NanoClock = process.hrtime.bigint,
  cpu: CpuClock = processCpu,
): Promise<ContenderResult[]> {
  if (contenders.length === 0) return []
  const { blocks, opsPerBlock, concurrency, warmupOps } = options
  for (const c of contenders) if (warmupOps > 0) await runBlock(c.operation, warmupOps, concurrency, undefined, clock)
  const tallies = new Map<Contender, Tally>(contenders.map((c) => [c, newTally()]))
  for (let block = 0; block < blocks; block++) {
    for (const c of blockOrder(contenders, block)) {
      await runTallied(c, tallies.get(c)!, opsPerBlock, concurrency, clock, cpu)
      await options.betweenBlocks?.()
    }
  }
  return contenders.map((c) => resultOf(c.label, tallies.get(c)!, concurrency))
}
/**
 * Untimed operations until the code under test reaches a steady state: blocks of `ops`, repeated
 * until `ms` of wall time have passed (at least one block when `ops` > 0).
 */
export async function warmUp(
  operation: Operation,
  ops: number,
  ms: number,
  concurrency: number,
  clock: NanoClock = process.hrtime.bigint,
): Promise<void> {
  if (ops <= 0) return
  const until = clock() + BigInt(Math.round(ms * 1e6))
  do await runBlock(operation, ops, concurrency, undefined, clock)
  while (clock() < until)
}

/** How {@link calibrate} sizes blocks. */
export interface CalibrateOptions {
  /** Wall time one block should take, in milliseconds. */
  readonly blockMs: number
  readonly concurrency: number
  /** Operations timed per contender to estimate the rate; they double as warm-up. */
  readonly probeOps: number
  /** Bounds of the result. */
  readonly minOps: number
  readonly maxOps: number
}

/**
 * Operations per block such that the slowest contender's block takes about `blockMs`. Every
 * contender then runs that same number, so ours and the baseline are compared on equal work.
 */
export async function calibrate(
  contenders: readonly Contender[],
  options: CalibrateOptions,
  clock: NanoClock = process.hrtime.bigint,
): Promise<number> {
  let slowest = 0
  for (const c of contenders) {
    const took = await runBlock(c.operation, options.probeOps, options.concurrency, undefined, clock)
    slowest = Math.max(slowest, Number(took) / 1e6 / options.probeOps)
  }
  return opsForBlock(slowest, options)
}

/** The block size for a measured `msPerOp` (wall time per operation at the given concurrency). */
export function opsForBlock(
  msPerOp: number,
  options: Pick<CalibrateOptions, 'blockMs' | 'minOps' | 'maxOps' | 'concurrency'>,
): number {
  const raw = msPerOp > 0 ? Math.round(options.blockMs / msPerOp) : options.maxOps
  // A multiple of the concurrency, so that every caller runs the same share.
  const rounded = Math.max(options.concurrency, Math.round(raw / options.concurrency) * options.concurrency)
  return Math.min(options.maxOps, Math.max(options.minOps, rounded))
}

/** How {@link compare} runs: the suite's settings for one comparison. */
export interface CompareOptions {
  readonly blocks: number
  readonly blockMs: number
  readonly warmupOps: number
  /**
   * Least wall time of each contender's warm-up, in milliseconds: it repeats `warmupOps` until
   * this has passed. A few hundred operations leave the client's code half-compiled, and the
   * CPU per operation kept falling for several thousand more (it fell by half on Redis). @default 0
   */
  readonly warmupMs?: number
  readonly concurrency: number
  /** Largest block, whatever the calibration says (keeps the samples in memory bounded). @default 20000 */
  readonly maxOps?: number
}

/**
 * The whole method for one comparison: warm every contender up, size the blocks so that the
 * slowest takes about `blockMs`, then run `blocks` interleaved blocks of that size for each.
 * Returns the results and the block size used.
 */
export async function compare(
  contenders: readonly Contender[],
  options: CompareOptions,
  clock: NanoClock = process.hrtime.bigint,
): Promise<{ results: ContenderResult[]; opsPerBlock: number }> {
  const { concurrency } = options
  for (const c of contenders) await warmUp(c.operation, options.warmupOps, options.warmupMs ?? 0, concurrency, clock)
  const probeOps = Math.max(concurrency * 4, Math.ceil(options.warmupOps / 2), 8)
  const opsPerBlock = await calibrate(
    contenders,
    {
      blockMs: options.blockMs,
      concurrency,
      probeOps,
      minOps: Math.max(16, concurrency * 4),
      maxOps: options.maxOps ?? 20_000,
    },
    clock,
  )
  const results = await interleave(
    contenders,
    { blocks: options.blocks, opsPerBlock, concurrency, warmupOps: 0 },
    clock,
  )
  return { results, opsPerBlock }
}
