import type { FleetContender, FleetLatency, FleetTick } from '../result.ts'
import { percentile, ratio } from '../stats.ts'
import type { FleetContenderId, FleetStore, ReplicaPlan, ReplicaReport } from './fleet-plan.ts'
import type { ServerSample } from './fleet-store.ts'

// The fleet measurement's figures, from what the replicas and the server reported.

/** How a contender is described in the results. */
export interface Described {
  readonly version: string
  readonly settings: (plan: Pick<ReplicaPlan, 'store' | 'connections' | 'concurrency' | 'periodMs'>) => string
  /** Its finest period is a minute: it runs a cron per minute, minuteTicks ticks. */
  readonly perMinute?: string
}

/** A run as its replica reported it. */
export interface Run {
  readonly replica: number
  readonly job: number
  readonly slot: number
  readonly startedAt: number
}

function latency(samples: number[]): FleetLatency {
  if (samples.length === 0) return { p50: Number.NaN, p99: Number.NaN, max: Number.NaN }
  const sorted = [...samples].sort((a, b) => a - b)
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1]! }
}

/** What one contender's measurement collected. */
export interface Measured {
  readonly store: FleetStore
  readonly periodMs: number
  readonly ticks: number
  readonly warmup: number
  readonly firstFire: number
  readonly jobs: number
  readonly replicas: number
  readonly runs: readonly Run[]
  readonly samples: readonly (ServerSample | undefined)[]
  readonly afterStop: ServerSample
  readonly reports: readonly ReplicaReport[]
  readonly inWindow: (run: Run) => boolean
  readonly connections: number
  readonly extraErrors: readonly string[]
}

export function summarize(id: FleetContenderId, described: Described, m: Measured): FleetContender {
  const perTick: FleetTick[] = []
  let duplicates = 0
  let missing = 0
  const all: number[] = []
  for (let k = 0; k < m.ticks; k++) {
    const fire = m.firstFire + k * m.periodMs
    const tickRuns = m.runs.filter((r) => r.slot === fire)
    const counts = new Map<number, number>()
    for (const r of tickRuns) counts.set(r.job, (counts.get(r.job) ?? 0) + 1)
    let tickDuplicates = 0
    for (const n of counts.values()) tickDuplicates += n - 1
    const tickMissing = m.jobs - counts.size
    duplicates += tickDuplicates
    missing += tickMissing
    const delays = tickRuns.map((r) => r.startedAt - fire)
    all.push(...delays)
    const storeOps = m.reports.reduce(
      (sum, report) =>
        sum +
        (report.opsAtBoundaries[m.warmup + k + 1] ?? Number.NaN) -
        (report.opsAtBoundaries[m.warmup + k] ?? Number.NaN),
      0,
    )
    perTick.push({
      fire: new Date(fire).toISOString(),
      runs: tickRuns.length,
      duplicates: tickDuplicates,
      missing: tickMissing,
      fireToStart: latency(delays),
      lastStartMs: delays.length > 0 ? Math.max(...delays) : Number.NaN,
      storeOps,
      serverCpuMs: (m.samples[k + 1]?.cpuMs ?? Number.NaN) - (m.samples[k]?.cpuMs ?? Number.NaN),
    })
  }
  const inWindow = m.runs.filter(m.inWindow)
  const warmupRun = (r: Run): boolean => r.slot >= m.firstFire - m.warmup * m.periodMs && r.slot < m.firstFire
  const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length
  const storeOpsPerTick = mean(perTick.map((t) => t.storeOps))
  const missingSample: ServerSample = { ops: Number.NaN, cpuMs: Number.NaN }
  const first = m.samples[0] ?? missingSample
  const last = m.samples[m.ticks] ?? missingSample
  // PostgreSQL's statistics reach pg_stat_database late (a backend flushes them when idle, or
  // exits): its transactions are counted until the replicas had stopped.
  const serverOps = (m.store === 'postgres' ? m.afterStop.ops : last.ops) - first.ops
  const lastStarts = perTick.map((t) => t.lastStartMs).filter(Number.isFinite)
  const runsPerReplica = Array.from(
    { length: m.replicas },
    (_, r) => inWindow.filter((run) => run.replica === r).length,
  )
  return {
    label: id,
    version: described.version,
    settings: described.settings({
      store: m.store,
      connections: m.connections,
      concurrency: m.connections,
      periodMs: m.periodMs,
    }),
    periodMs: m.periodMs,
    ticks: m.ticks,
    warmupTicks: m.warmup,
    ...(described.perMinute ? { limits: `${described.perMinute}; ${m.ticks} ticks` } : {}),
    duplicates,
    missing,
    outside: m.runs.filter((r) => !m.inWindow(r) && !warmupRun(r)).length,
    runs: inWindow.length,
    runsPerReplica,
    fireToStart: latency(all),
    ...(m.warmup > 0 ? { warmupFireToStart: latency(m.runs.filter(warmupRun).map((r) => r.startedAt - r.slot)) } : {}),
    lastStartMs:
      lastStarts.length > 0
        ? { p50: latency(lastStarts).p50, max: Math.max(...lastStarts) }
        : { p50: Number.NaN, max: Number.NaN },
    storeOpsPerTick,
    storeOpsPerSecond: (storeOpsPerTick * 1000) / m.periodMs,
    serverOpsPerTick: serverOps / m.ticks,
    serverCpuMsPerTick: (last.cpuMs - first.cpuMs) / m.ticks,
    clientCpuPerRunUs: m.reports.reduce((sum, r) => sum + r.windowCpuUs, 0) / (m.jobs * m.ticks),
    perTick,
    errors: [...m.extraErrors, ...m.reports.flatMap((r) => r.errors)].slice(0, 20),
  }
}

/** ours / peer for each peer of a row. */
export function withRatios(contenders: FleetContender[]): FleetContender[] {
  const ours = contenders.find((c) => c.label === 'shedlock')
  if (!ours) return contenders
  return contenders.map((c) =>
    c === ours
      ? c
      : {
          ...c,
          oursOverPeer: {
            p99: ratio(ours.fireToStart.p99, c.fireToStart.p99),
            storeOpsPerTick: ratio(ours.storeOpsPerTick, c.storeOpsPerTick),
            // A peer that sends the store nothing (node-cron's NODE_CRON_RUN) puts no load of its own on it.
            serverCpuMsPerTick:
              c.storeOpsPerTick > 0 ? ratio(ours.serverCpuMsPerTick, c.serverCpuMsPerTick) : Number.NaN,
            clientCpuPerRunUs: ratio(ours.clientCpuPerRunUs, c.clientCpuPerRunUs),
          },
        },
  )
}
