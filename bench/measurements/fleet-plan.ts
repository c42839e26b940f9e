// What the fleet measurement's parent (fleet.ts) and its replica processes (fleet-replica.ts)
// tell each other: the plan as one JSON argument, then lines on stdin and stdout.

/** Every contender of the fleet measurement: ours first, then the peers, by store. */
export const FLEET_CONTENDERS = {
  postgres: ['shedlock', 'graphile-worker', 'pg-boss'],
  redis: ['shedlock', 'bullmq', 'node-cron+redis', 'node-cron+env'],
} as const
export type FleetStore = keyof typeof FLEET_CONTENDERS
export type FleetContenderId = (typeof FLEET_CONTENDERS)[FleetStore][number]

/** What one replica process runs, as its one JSON argument. */
export interface ReplicaPlan {
  readonly contender: FleetContenderId
  readonly store: FleetStore
  /** The store's URL: for PostgreSQL, the run's own database. */
  readonly url: string
  /** Names of this contender's run: key prefix, schema, environment. */
  readonly space: string
  readonly jobs: number
  readonly replica: number
  readonly replicas: number
  /** The schedule's period in milliseconds: 1000 or 2000 (a cron with seconds), or 60,000 (a cron per minute). */
  readonly periodMs: number
  /** Connections per replica (PostgreSQL pools), and jobs a queue worker runs at once. */
  readonly connections: number
  readonly concurrency: number
}

/** Sent by the parent on stdin once every replica is ready: the window of ticks to run. */
export interface ReplicaWindow {
  /** Nominal fire time of the first tick, ms since the epoch. */
  readonly firstFire: number
  /** Ticks scheduled, warm-up ticks included. */
  readonly ticks: number
  /** The first measured tick: the ones before it warm the replicas up (code compiled, connections and scripts ready). */
  readonly measureFrom: number
}

/** The replica's last stdout line, after `stop` on stdin. */
export interface ReplicaReport {
  /** Client CPU (user + system, µs) from just before the first measured tick to just before the tick after the last. */
  readonly windowCpuUs: number
  /** Store calls sent (pg `query`, ioredis commands), counted at each tick boundary: ticks + 1 values. */
  readonly opsAtBoundaries: readonly number[]
  readonly errors: readonly string[]
}

/** The first tick boundary is this long before the fire time, so that its work falls after it. */
export const BOUNDARY_LEAD_MS = 20

/** A run line on stdout: `R <job> <slot ms> <start ms>`. */
export function runLine(job: number, slot: number, startedAt: number): string {
  return `R ${job} ${slot} ${startedAt.toFixed(3)}\n`
}
