import type { ContenderResult } from './harness.ts'
import type { LatencySummary } from './stats.ts'

/** Overhead against the limit: ours and the baseline at one concurrency. */
export interface OverheadRow {
  readonly store: string
  readonly concurrency: number
  readonly opsPerBlock: number
  readonly ours: ContenderResult
  readonly baseline: ContenderResult
  /** ours / baseline. */
  readonly p50Ratio: number
  readonly p99Ratio: number
  /** ours / baseline: below 1 means fewer operations per second than the baseline. */
  readonly opsRatio: number
  /** Client CPU per operation, ours / baseline (see `ContenderResult.cpuPerOpUs`). */
  readonly cpuRatio: number
  /**
   * With `--processes` above 1: each process's ratios, in the order they ran. The row's own
   * ratios are then the medians of these, and its `ours` and `baseline` are those of the process
   * whose p50 ratio is the median (the lower middle one, for an even count).
   */
  readonly processes?: readonly OverheadRatios[]
  /** Client CPU added per operation (µs): ours − baseline, the median over the processes when there are several. */
  readonly addedCpuUs?: number
}

/** The ratios one process measured for one store and caller count. */
export interface OverheadRatios {
  readonly p50Ratio: number
  readonly p99Ratio: number
  readonly opsRatio: number
  readonly cpuRatio: number
  /** ours − baseline client CPU per operation, µs. */
  readonly addedCpuUs: number
}

/** Mean store calls of one kind of operation, and which methods a typical one called. */
export interface CallCount {
  readonly mean: number
  readonly max: number
  readonly methods: Readonly<Record<string, number>>
}

/** Round trips of ours and of the baseline. */
export interface RoundTripRow {
  readonly store: string
  readonly samples: number
  readonly ours: { readonly acquire: CallCount; readonly release: CallCount; readonly losingAcquire: CallCount }
  readonly baseline: { readonly acquire: CallCount; readonly release: CallCount; readonly losingAcquire: CallCount }
  /**
   * A slot run through the executor with the store's run ledger, on stores that have one: every
   * store call of the node that runs the slot (claim, lock, release, and the run's one ledger
   * write), and of a node that finds the slot done; `housekeeping`, the ledger's deletes of old
   * runs, which run apart from the runs (a timer), counted after the last of `runs` runs. Absent
   * elsewhere.
   */
  readonly slotRun?: {
    readonly winner: CallCount
    readonly loser: CallCount
    readonly housekeeping?: { readonly calls: number; readonly runs: number; readonly methods: Record<string, number> }
  }
  /**
   * One poll for triggers (`triggers: { poll }`) of an executor that ran `tasks` tasks, none
   * triggered: its store calls (one inspector read per task), and the process CPU per poll in µs
   * (the library and the driver), a mean over `polls` polls.
   */
  readonly triggerPoll?: {
    readonly tasks: number
    readonly polls: number
    readonly calls: CallCount
    readonly cpuUs: number
  }
}

/** The herd: contenders on separate connections racing for one name, round after round. */
export interface HerdRow {
  readonly store: string
  readonly contenders: number
  readonly rounds: number
  /** Rounds with exactly one winner. */
  readonly exactlyOneWinner: number
  /** Rounds with no winner, with more than one, and lock() calls that rejected. */
  readonly noWinner: number
  readonly severalWinners: number
  readonly failures: number
  readonly firstFailure?: string
  /** Per round, from the release of the gate until the last loser's lock() resolved, in microseconds. */
  readonly allLosersKnow: LatencySummary
  /** Per round, until the winner's lock() resolved, in microseconds. */
  readonly winnerKnows: LatencySummary
  /** Store calls of one losing lock(). */
  readonly loserCalls: { readonly mean: number; readonly max: number }
}

/** Scale: ours with many names in the store against few. */
export interface ScaleRow {
  readonly store: string
  readonly mode: 'separate' | 'shared'
  readonly smallNames: number
  readonly largeNames: number
  readonly small: ContenderResult
  readonly large: ContenderResult
  /** large / small. */
  readonly p50Ratio: number
  readonly p99Ratio: number
}

/** Peers: ours and other libraries on the same server and client. */
export interface PeerRow {
  readonly store: string
  readonly concurrency: number
  readonly opsPerBlock: number
  readonly ours: ContenderResult
  readonly peers: readonly PeerEntry[]
}

/** One peer library in a {@link PeerRow}. */
export interface PeerEntry {
  readonly result: ContenderResult
  readonly description: string
  /** ours / peer. */
  readonly p50Ratio: number
  readonly p99Ratio: number
  /** ours / peer: above 1 means more operations per second than the peer. */
  readonly opsRatio: number
  /**
   * With `--processes` above 1: each process's ratios against this peer, in the order they ran.
   * The entry's own ratios are then the medians of these, and its `result` is that of the
   * process whose p50 ratio against this peer is the median (the lower middle one, for an even
   * count).
   */
  readonly processes?: readonly PeerRatios[]
}

/** The ratios one process measured against one peer. */
export interface PeerRatios {
  readonly p50Ratio: number
  readonly p99Ratio: number
  readonly opsRatio: number
}

/** Memory: executor cycles in a child process with `--expose-gc`. */
export interface MemoryRow {
  readonly variant: string
  readonly cycles: number
  readonly seconds: number
  /** heapUsed after forced GC: before the cycles, halfway, after. */
  readonly heapBefore: number
  readonly heapMiddle: number
  readonly heapAfter: number
  readonly growthBytes: number
  readonly growthPerCycle: number
  /** process.getActiveResourcesInfo() counts by type, before and after. */
  readonly resourcesBefore: Readonly<Record<string, number>>
  readonly resourcesAfter: Readonly<Record<string, number>>
  readonly timersLeft: number
  /** Listeners on `process`, after minus before. */
  readonly processListenersLeft: number
}

/** Executor overhead: executeWithLock against a bare lock()+task+unlock() on the in-memory provider. */
export interface ExecutorRow {
  readonly opsPerBlock: number
  readonly bare: ContenderResult
  readonly executor: ContenderResult
  readonly p50Ratio: number
  readonly p99Ratio: number
  /** Mean cost added per execution, in microseconds. */
  readonly addedMeanUs: number
  /** Client CPU added per execution (executor minus bare), in microseconds. */
  readonly addedCpuUs: number
}

/** The library's own CPU per operation without I/O (see measureLibraryCpu). */
export interface LibraryCpuRow {
  readonly what: string
  readonly baseline: string
  readonly ops: number
  readonly rounds: number
  /** Median CPU per operation over the rounds, in microseconds. */
  readonly oursCpuPerOpUs: number
  readonly baselineCpuPerOpUs: number
  readonly addedCpuUs: number
}

/** Everything one run measured, as written to bench/results/<time>.json. */
export interface BenchResult {
  readonly startedAt: string
  finishedAt: string
  seconds: number
  readonly machine: Readonly<Record<string, string | number>>
  readonly settings: Readonly<Record<string, unknown>>
  readonly stores: Record<
    string,
    {
      readonly versions?: Readonly<Record<string, string>>
      readonly notes?: readonly string[]
      readonly skipped?: string
    }
  >
  readonly overhead: OverheadRow[]
  readonly roundTrips: RoundTripRow[]
  readonly herd: HerdRow[]
  readonly scale: ScaleRow[]
  readonly peers: PeerRow[]
  readonly memory: MemoryRow[]
  executor?: ExecutorRow
  /** Absent from results written before this measurement existed. */
  libraryCpu?: LibraryCpuRow[]
  /** The fleet measurement (`--only fleet`); absent from results written before it existed. */
  fleet?: FleetRow[]
  readonly errors: { readonly store: string; readonly measurement: string; readonly message: string }[]
}

/** Fire-to-start latency of a set of runs, in milliseconds. */
export interface FleetLatency {
  readonly p50: number
  readonly p99: number
  readonly max: number
}

/** One tick of one contender in the fleet measurement. */
export interface FleetTick {
  /** Nominal fire time, ISO. */
  readonly fire: string
  readonly runs: number
  readonly duplicates: number
  readonly missing: number
  /** Of the tick's runs; NaN figures when it had none. */
  readonly fireToStart: FleetLatency
  /** From the fire time until the tick's last job started, ms. */
  readonly lastStartMs: number
  /** Store calls the replicas sent during the tick (pg queries, Redis commands). */
  readonly storeOps: number
  /** CPU time of the server processes during the tick, ms. */
  readonly serverCpuMs: number
}

/** One contender (ours, or a peer) at one store and size. */
export interface FleetContender {
  readonly label: string
  /** `<package> <version>`. */
  readonly version: string
  /** How it was configured, in words. */
  readonly settings: string
  /** The schedule's period, ms (the peers whose cron has no seconds run per minute). */
  readonly periodMs: number
  /** Measured ticks. */
  readonly ticks: number
  /** Ticks run before the measured ones (code compiled, connections and scripts ready), not counted. */
  readonly warmupTicks: number
  /** Where it cannot do the workload as asked, and what ran instead; absent when it can. */
  readonly limits?: string
  /** Runs of an expected (job, tick) beyond its first, and expected (job, tick) pairs that never ran. */
  readonly duplicates: number
  readonly missing: number
  /** Runs for fire times outside the window and the warm-up (a scheduler's fire before the first tick): not counted above. */
  readonly outside: number
  readonly runs: number
  /** Runs per replica, in replica order: who did the work. */
  readonly runsPerReplica: readonly number[]
  /** Over every run in the window, ms from the nominal fire time to the task's start. */
  readonly fireToStart: FleetLatency
  /** The same over the warm-up ticks' runs, the processes' first ticks; absent without warm-up ticks. */
  readonly warmupFireToStart?: FleetLatency
  /** From a tick's fire time until its last job started, ms: the median and the worst tick. */
  readonly lastStartMs: { readonly p50: number; readonly max: number }
  /** Store calls sent by all replicas per tick (pg queries, Redis commands incl. EVALSHA as one), the mean over the ticks. */
  readonly storeOpsPerTick: number
  /** The same per second of the window (ticks × period). */
  readonly storeOpsPerSecond: number
  /**
   * Work the server counted, per tick: PostgreSQL, transactions of the contender's own database
   * from the window's start until the replicas had stopped (the statistics are flushed late);
   * Redis, commands executed by the whole server in the window, those inside scripts included.
   */
  readonly serverOpsPerTick: number
  /** CPU of the server per tick, ms: the database's backends (PostgreSQL), the redis-server process (Redis). */
  readonly serverCpuMsPerTick: number
  /** Client CPU of all replicas in the window (idle polling included) per expected run, µs. */
  readonly clientCpuPerRunUs: number
  /** ours / this peer, for the peers: below 1 means ours is lower. */
  readonly oursOverPeer?: {
    readonly p99: number
    readonly storeOpsPerTick: number
    readonly serverCpuMsPerTick: number
    readonly clientCpuPerRunUs: number
  }
  readonly perTick: readonly FleetTick[]
  readonly errors: readonly string[]
}

/** The fleet measurement at one store and size. */
export interface FleetRow {
  readonly store: string
  readonly server: string
  readonly replicas: number
  readonly jobs: number
  readonly contenders: readonly FleetContender[]
}
