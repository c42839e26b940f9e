import { parseArgs } from 'node:util'

/** Every measurement of the suite, in the order they run. */
export const MEASUREMENTS = [
  'overhead',
  'round-trips',
  'herd',
  'scale',
  'peers',
  'memory',
  'executor',
  'cpu',
  'fleet',
] as const
export type Measurement = (typeof MEASUREMENTS)[number]

/** Every store the suite knows; the default run takes each whose server answers. */
export const STORES = [
  'postgres',
  'mysql',
  'spanner',
  'sqlite',
  'redis',
  'nats',
  'etcd',
  'zookeeper',
  'memcached',
  'dynamodb',
  'firestore',
  'datastore',
  'mongodb',
  's3',
  'azure-blob',
] as const
export type Store = (typeof STORES)[number]

/** The suite's settings, from the command line. */
export interface BenchOptions {
  readonly stores: readonly Store[]
  /** True when `--providers` named the stores: then an unreachable one is an error, not a skip. */
  readonly storesGiven: boolean
  readonly measurements: readonly Measurement[]
  readonly quick: boolean
  /** Measured blocks per contender. */
  readonly blocks: number
  /** Target wall time of one block, in milliseconds; sets the operations per block. */
  readonly blockMs: number
  /** Untimed operations per contender before measuring (also used to size the blocks). */
  readonly warmup: number
  /** Least wall time of each contender's warm-up, in milliseconds (the warm-up repeats until it has passed). */
  readonly warmupMs: number
  /** Caller counts of the overhead measurement. */
  readonly concurrency: readonly number[]
  /**
   * Overhead and peers: separate processes per store, one after the other; each ratio reported
   * is the median over them. 1 measures in the suite's own process.
   */
  readonly processes: number
  /** Herd: contenders (one connection each) and rounds. */
  readonly contenders: number
  readonly rounds: number
  /** Scale: names in the store for the large case (the small case has 10). */
  readonly scaleNames: number
  /** Memory: executor cycles. */
  readonly cycles: number
  /** Fleet: the sizes measured (R replicas × J jobs), the ticks, the period of the per-second contenders (ms), the contenders. */
  readonly fleet: {
    readonly sizes: readonly { readonly replicas: number; readonly jobs: number }[]
    readonly ticks: number
    readonly minuteTicks: number
    readonly warmupTicks: number
    readonly periodMs: number
    readonly contenders?: readonly string[]
  }
  /** Where the JSON result goes. */
  readonly out: string
  readonly help: boolean
}

export const USAGE = `Usage: npm run bench -- [options]

Runs the benchmark suite against the stores reachable on this machine (see the README's
"Performance" section), prints Markdown tables and writes JSON to bench/results/.

  --providers a,b       stores to run (${STORES.join(', ')}); default: every reachable one
  --only m,n            measurements to run (${MEASUREMENTS.join(', ')}); default: all but
                        fleet (minutes of waiting for per-minute crons: --only fleet)
  --quick               a ~30 s run: fewer blocks, shorter blocks, fewer rounds and names
  --blocks N            measured blocks per contender, interleaved (default 10, quick 4)
  --block-ms MS         target duration of one block (default 250, quick 50)
  --warmup N            untimed operations per contender before measuring (default 200, quick 30)
  --warmup-ms MS        repeat the warm-up until this long has passed (default 2000, quick 100)
  --concurrency 1,16    concurrent callers of the overhead measurement (default 1,16)
  --processes N         overhead and peers: a fresh process per store N times, each ratio the
                        median over them (default 3, quick 1; 1 = in the suite's own process)
  --contenders N        herd: contenders on separate connections (default 32)
  --rounds N            herd: rounds (default 100, quick 20)
  --scale-names N       scale: names in the store for the large case (default 10000, quick 1000)
  --cycles N            memory: executeWithLock cycles (default 100000, quick 20000)
                        cpu: operations per round are cycles / 2, in 6 rounds per side
  --fleet-replicas 4    fleet: replica processes, a list for several sizes (default 4)
  --fleet-jobs 200      fleet: jobs per replica, a list for several sizes (default 200)
  --fleet-growth        fleet: every size of replicas 2,4,8 × jobs 50,200,1000
  --fleet-ticks N       fleet: ticks of the contenders that fire every period (default 10)
  --fleet-minute-ticks N  fleet: ticks of those whose finest period is a minute (default 2)
  --fleet-warmup-ticks N  fleet: ticks before the measured ones, not counted (default 10: every
                        replica's code compiled for the runs it wins; the per-minute contenders
                        have none)
  --fleet-period MS     fleet: 1000 or 2000 (default 2000)
  --fleet-contenders a,b  fleet: only these (shedlock, bullmq, node-cron+redis, node-cron+env,
                        graphile-worker, pg-boss); default all
  --out DIR             directory of the JSON result (default bench/results)
  -h, --help            this text
`

/** A bad command line; main prints the message and the usage and exits with 2. */
export class BenchUsageError extends Error {
  override name = 'BenchUsageError'
}

/**
 * Parses the command line (`process.argv.slice(2)`).
 * @throws BenchUsageError naming the bad argument.
 */
export function parseBenchArgs(args: readonly string[]): BenchOptions {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: {
        providers: { type: 'string' },
        only: { type: 'string' },
        quick: { type: 'boolean' },
        blocks: { type: 'string' },
        'block-ms': { type: 'string' },
        warmup: { type: 'string' },
        'warmup-ms': { type: 'string' },
        concurrency: { type: 'string' },
        processes: { type: 'string' },
        contenders: { type: 'string' },
        rounds: { type: 'string' },
        'scale-names': { type: 'string' },
        cycles: { type: 'string' },
        out: { type: 'string' },
        'fleet-replicas': { type: 'string' },
        'fleet-jobs': { type: 'string' },
        'fleet-growth': { type: 'boolean' },
        'fleet-ticks': { type: 'string' },
        'fleet-minute-ticks': { type: 'string' },
        'fleet-warmup-ticks': { type: 'string' },
        'fleet-period': { type: 'string' },
        'fleet-contenders': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values
  } catch (error) {
    throw new BenchUsageError(error instanceof Error ? error.message.split('\n')[0]! : String(error))
  }
  const quick = values.quick === true
  const stores = listOption(values, 'providers', STORES)
  return {
    stores: stores ?? STORES,
    storesGiven: stores !== undefined,
    measurements: listOption(values, 'only', MEASUREMENTS) ?? MEASUREMENTS.filter((m) => m !== 'fleet'),
    quick,
    blocks: integer(values, 'blocks', quick ? 4 : 10, 1, 1000),
    blockMs: integer(values, 'block-ms', quick ? 50 : 250, 1, 60_000),
    warmup: integer(values, 'warmup', quick ? 30 : 200, 0, 1_000_000),
    warmupMs: integer(values, 'warmup-ms', quick ? 100 : 2000, 0, 600_000),
    concurrency: integerList(values, 'concurrency', [1, 16], 1, 256),
    processes: integer(values, 'processes', quick ? 1 : 3, 1, 99),
    contenders: integer(values, 'contenders', 32, 2, 256),
    rounds: integer(values, 'rounds', quick ? 20 : 100, 1, 100_000),
    scaleNames: integer(values, 'scale-names', quick ? 1000 : 10_000, 11, 1_000_000),
    cycles: integer(values, 'cycles', quick ? 20_000 : 100_000, 1, 100_000_000),
    fleet: fleetOptions(values),
    out: typeof values.out === 'string' ? values.out : 'bench/results',
    help: values.help === true,
  }
}

function integer(values: Record<string, unknown>, name: string, fallback: number, min: number, max: number): number {
  const raw = values[name]
  if (raw === undefined) return fallback
  const value = typeof raw === 'string' && /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new BenchUsageError(`--${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`)
  }
  return value
}

function integerList(
  values: Record<string, unknown>,
  name: string,
  fallback: number[],
  min: number,
  max: number,
): number[] {
  const raw = values[name]
  if (raw === undefined) return fallback
  const parts = String(raw)
    .split(',')
    .map((p) => p.trim())
  return [...new Set(parts.map((part) => integer({ [name]: part }, name, 0, min, max)))]
}

function listOption<T extends string>(
  values: Record<string, unknown>,
  name: string,
  known: readonly T[],
): T[] | undefined {
  const raw = values[name]
  if (raw === undefined) return undefined
  const parts = String(raw)
    .split(',')
    .map((p) => p.trim().toLowerCase())
    .filter((p) => p !== '')
  if (parts.length === 0) throw new BenchUsageError(`--${name} needs at least one of ${known.join(', ')}`)
  const unknown = parts.filter((p) => !(known as readonly string[]).includes(p))
  if (unknown.length > 0)
    throw new BenchUsageError(
      `--${name}: unknown ${unknown.map((u) => JSON.stringify(u)).join(', ')}; choose from ${known.join(', ')}`,
    )
  // The suite's own order, whatever order was typed.
  return known.filter((k) => parts.includes(k))
}

const FLEET_CONTENDER_NAMES = ['shedlock', 'bullmq', 'node-cron+redis', 'node-cron+env', 'graphile-worker', 'pg-boss']

function fleetOptions(values: Record<string, unknown>): BenchOptions['fleet'] {
  const growth = values['fleet-growth'] === true
  const replicas = growth ? [2, 4, 8] : integerList(values, 'fleet-replicas', [4], 1, 16)
  const jobs = growth ? [50, 200, 1000] : integerList(values, 'fleet-jobs', [200], 1, 5000)
  const periodMs = integer(values, 'fleet-period', 2000, 1000, 2000)
  if (periodMs !== 1000 && periodMs !== 2000)
    throw new BenchUsageError(`--fleet-period must be 1000 or 2000, got ${periodMs}`)
  const raw = values['fleet-contenders']
  let contenders: string[] | undefined
  if (raw !== undefined) {
    contenders = String(raw)
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '')
    const unknown = contenders.filter((c) => !FLEET_CONTENDER_NAMES.includes(c))
    if (contenders.length === 0 || unknown.length > 0)
      throw new BenchUsageError(`--fleet-contenders: choose from ${FLEET_CONTENDER_NAMES.join(', ')}`)
  }
  return {
    sizes: replicas.flatMap((r) => jobs.map((j) => ({ replicas: r, jobs: j }))),
    ticks: integer(values, 'fleet-ticks', 10, 1, 600),
    minuteTicks: integer(values, 'fleet-minute-ticks', 2, 1, 60),
    warmupTicks: integer(values, 'fleet-warmup-ticks', 10, 0, 60),
    periodMs,
    ...(contenders ? { contenders } : {}),
  }
}
