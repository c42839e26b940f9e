import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { FleetContender, FleetRow } from '../result.ts'
import { packageVersion } from '../setups/setup.ts'
import {
  BOUNDARY_LEAD_MS,
  FLEET_CONTENDERS,
  type FleetContenderId,
  type FleetStore,
  type ReplicaPlan,
  type ReplicaReport,
  type ReplicaWindow,
} from './fleet-plan.ts'
import {
  type FleetServer,
  type FleetSpace,
  postgresFleetServer,
  redisFleetServer,
  type ServerSample,
} from './fleet-store.ts'
import { type Described, type Run, summarize, withRatios } from './fleet-summary.ts'

/** The fleet measurement's settings (see USAGE in options.ts). */
export interface FleetOptions {
  readonly stores: readonly FleetStore[]
  /** Sizes measured, each R replicas × J jobs. */
  readonly sizes: readonly { readonly replicas: number; readonly jobs: number }[]
  /** Ticks of the contenders that fire every `periodMs`. */
  readonly ticks: number
  /** Ticks of the contenders whose finest period is a minute. */
  readonly minuteTicks: number
  /** 1000 or 2000. */
  readonly periodMs: number
  /** Ticks before the measured ones, for the contenders that fire every `periodMs`. */
  readonly warmupTicks: number
  /** Contenders to run; all when absent. */
  readonly contenders?: readonly string[]
}

const DESCRIPTIONS: Record<FleetContenderId, Described> = {
  shedlock: {
    version: `shedlock ${packageVersion('shedlock')} + croner ${packageVersion('croner')}`,
    settings: (p) =>
      `a croner Cron per job, withLock(executor, { slot: true, lockAtMostFor: '30s' }) with the store's run ledger (${p.store === 'postgres' ? `postgresRunLedger), a pg Pool of ${p.connections} per replica` : 'redisRunLedger), one ioredis client per replica'}`,
  },
  'graphile-worker': {
    version: `graphile-worker ${packageVersion('graphile-worker')}`,
    settings: (p) =>
      `the same crontab in every replica ('* * * * * job-N', one line per job, no backfill), run() with concurrency ${p.concurrency}, maxPoolSize ${p.connections}, LISTEN/NOTIFY on (default)`,
    perMinute:
      "Graphile Worker's crontab has no seconds field: its finest period is a minute, so it runs the same jobs every minute",
  },
  'pg-boss': {
    version: `pg-boss ${packageVersion('pg-boss')}`,
    settings: (p) =>
      `a queue and schedule(name, '* * * * *') per job, work() per queue in every replica (default pollingIntervalSeconds 2, batchSize 1), cronMonitorIntervalSeconds 30 and cronWorkerIntervalSeconds 5 (defaults), pool max ${p.connections}`,
    perMinute:
      "pg-boss's schedule() takes a 5-field cron (a minute at the finest) and checks schedules every 30 s by default (cronMonitorIntervalSeconds), so it runs the same jobs every minute",
  },
  bullmq: {
    version: `bullmq ${packageVersion('bullmq')}`,
    settings: (p) =>
      `upsertJobScheduler(job, { pattern, startDate, endDate }) per job from every replica, a Worker per replica with concurrency ${p.concurrency}, removeOnComplete/removeOnFail true`,
  },
  'node-cron+redis': {
    version: `node-cron ${packageVersion('node-cron')}`,
    settings: () =>
      "cron.schedule(pattern, fn, { distributed: true, runCoordinator }) per job; the coordinator is ours, as node-cron's docs suggest (node-cron ships none for Redis): SET <key> NX PX distributedLease (30 s) per fire, not deleted on completion",
  },
  'node-cron+env': {
    version: `node-cron ${packageVersion('node-cron')}`,
    settings: () =>
      "cron.schedule(pattern, fn, { distributed: true }) per job with node-cron's built-in coordinator, NODE_CRON_RUN: replica 0 is the designated runner (here its shouldRun answers as NODE_CRON_RUN=true would, the others as false)",
  },
}

const replicaScript = fileURLToPath(new URL('./fleet-replica.js', import.meta.url))

/** A replica process and the lines it prints. */
interface Replica {
  readonly child: ChildProcessWithoutNullStreams
  /** Resolves on the line equal to `text`. */
  waitFor(text: string, timeoutMs: number): Promise<void>
  /** Resolves to the last line once the process exits. */
  readonly exited: Promise<string>
}

function startReplica(plan: ReplicaPlan, onRun: (job: number, slot: number, startedAt: number) => void): Replica {
  // SHEDLOCK_FLEET_NODE_ARGS: Node flags for the replicas, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile them.
  const flags = (process.env.SHEDLOCK_FLEET_NODE_ARGS ?? '').split(' ').filter((f) => f !== '')
  const child = spawn(process.execPath, [...flags, replicaScript, JSON.stringify(plan)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const waiting = new Map<string, () => void>()
  const seen = new Set<string>()
  let last = ''
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000)
  })
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.startsWith('R ')) {
      const [, job, slot, startedAt] = line.split(' ')
      onRun(Number(job), Number(slot), Number(startedAt))
      return
    }
    last = line
    seen.add(line)
    waiting.get(line)?.()
  })
  const exited = new Promise<string>((resolve, reject) => {
    child.on('exit', (code) => {
      if (code === 0) resolve(last)
      else {
        const why = stderr.split('\n').find((l) => /^\w*Error: /.test(l.trim())) ?? stderr.trim().split('\n').pop()
        reject(new Error(`${plan.contender} replica ${plan.replica} exited with ${code}: ${why ?? ''}`))
      }
    })
  })
  exited.catch(() => undefined)
  return {
    child,
    exited,
    waitFor(text, timeoutMs) {
      if (seen.has(text)) return Promise.resolve()
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${plan.contender} replica ${plan.replica}: no "${text}" within ${timeoutMs} ms`)),
          timeoutMs,
        )
        waiting.set(text, () => {
          clearTimeout(timer)
          resolve()
        })
        exited.then(
          () => reject(new Error(`${plan.contender} replica ${plan.replica} exited before "${text}"`)),
          reject,
        )
      })
    },
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))

/** One contender at one size: R replica processes, the window's ticks, the figures. */
async function measureContender(
  server: FleetServer,
  spaceName: string,
  contender: FleetContenderId,
  replicas: number,
  jobs: number,
  options: FleetOptions,
  progress: (message: string) => void,
): Promise<FleetContender> {
  const described = DESCRIPTIONS[contender]
  const periodMs = described.perMinute ? 60_000 : options.periodMs
  const ticks = described.perMinute ? options.minuteTicks : options.ticks
  const warmup = described.perMinute ? 0 : options.warmupTicks
  // PostgreSQL allows 100 connections, shared with whatever else runs: at most 60 for the fleet.
  const connections = Math.min(10, Math.floor(60 / replicas))
  const base = { contender, store: server.store, jobs, replicas, periodMs, connections, concurrency: connections }
  const space: FleetSpace = await server.space(spaceName, contender)
  const runs: Run[] = []
  const started: Replica[] = []
  let ended = false
  try {
    // The first replica sets up the schemas and queues; the others start once it is ready.
    for (let r = 0; r < replicas; r++) {
      const plan: ReplicaPlan = { ...base, url: space.url, space: space.space, replica: r }
      started.push(startReplica(plan, (job, slot, startedAt) => runs.push({ replica: r, job, slot, startedAt })))
      if (r === 0) await started[0]!.waitFor('ready', 180_000)
    }
    await Promise.all(started.map((r) => r.waitFor('ready', 180_000)))

    // Enough lead for every replica to put its schedules in place: BullMQ upserts one per job,
    // which took over 20 ms each for 1,000 jobs on 4 replicas of a loaded machine.
    const lead = 2500 + jobs * (contender === 'bullmq' ? 30 : 4)
    const scheduledFrom = Math.ceil((Date.now() + lead) / periodMs) * periodMs
    const window: ReplicaWindow = { firstFire: scheduledFrom, ticks: warmup + ticks, measureFrom: warmup }
    const firstFire = scheduledFrom + warmup * periodMs
    const lastFire = firstFire + (ticks - 1) * periodMs
    const boundaries = Array.from({ length: ticks + 1 }, (_, k) => firstFire + k * periodMs - BOUNDARY_LEAD_MS)
    const samples: (ServerSample | undefined)[] = []
    // A sample never rejects, and none is taken once the contender has ended (failed, or its space dropped).
    const sampling = boundaries.map(async (at, k) => {
      await sleep(at - Date.now())
      if (!ended) samples[k] = await space.sample().catch(() => undefined)
    })
    progress(
      `fleet ${server.store} ${replicas}×${jobs} ${contender}: ${warmup} + ${ticks} ticks every ${periodMs / 1000} s from ${new Date(scheduledFrom).toISOString()}`,
    )
    for (const r of started) r.child.stdin.write(`${JSON.stringify(window)}\n`)
    await Promise.all(started.map((r) => r.waitFor('started', Math.max(60_000, scheduledFrom - Date.now()))))
    // Late for a warm-up tick only costs the warm-up; late for a measured one is reported.
    const late = Date.now() - firstFire
    const armedLate = late > 0 ? [`schedules were in place ${late} ms after the first measured fire`] : []

    // Wait for every expected run, then a little longer for duplicates; give up at the deadline.
    const expected = jobs * ticks
    const inWindow = (run: Run): boolean =>
      run.slot >= firstFire && run.slot <= lastFire && (run.slot - firstFire) % periodMs === 0
    const deadline = lastFire + (described.perMinute ? 58_000 : Math.max(5000, 2 * periodMs))
    const earliest = lastFire + periodMs + 1000
    for (;;) {
      await sleep(250)
      const seen = new Set(runs.filter(inWindow).map((r) => `${r.job}@${r.slot}`)).size
      if (Date.now() >= deadline || (seen === expected && Date.now() >= earliest)) break
    }
    await Promise.all(sampling)
    for (const r of started) r.child.stdin.write('stop\n')
    const reports = (await Promise.all(started.map((r) => r.exited))).map((line) => JSON.parse(line) as ReplicaReport)
    const afterStop = await space.sample()
    return summarize(contender, described, {
      store: server.store,
      periodMs,
      ticks,
      warmup,
      firstFire,
      jobs,
      replicas,
      runs,
      samples,
      afterStop,
      reports,
      inWindow,
      connections,
      extraErrors: armedLate,
    })
  } finally {
    ended = true
    for (const r of started) if (r.child.exitCode === null) r.child.kill('SIGKILL')
    await space.drop().catch(() => undefined)
  }
}

/**
 * The fleet measurement: for each store and size, R replica processes run J jobs on one schedule
 * for a number of ticks, ours (croner + withLock in slot mode with a run ledger) and each peer
 * configured as its docs recommend, one after the other on the same server.
 */
export async function measureFleet(
  runId: string,
  options: FleetOptions,
  progress: (message: string) => void,
  onError: (store: string, message: string) => void,
): Promise<FleetRow[]> {
  const rows: FleetRow[] = []
  for (const store of options.stores) {
    let server: FleetServer
    try {
      server =
        store === 'postgres'
          ? await postgresFleetServer(process.env.SHEDLOCK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
          : await redisFleetServer(process.env.SHEDLOCK_REDIS_URL ?? 'redis://127.0.0.1:6379')
    } catch (error) {
      onError(store, `fleet: cannot connect: ${error instanceof Error ? error.message : String(error)}`)
      continue
    }
    try {
      for (const { replicas, jobs } of options.sizes) {
        const contenders: FleetContender[] = []
        for (const id of FLEET_CONTENDERS[store]) {
          if (options.contenders && !options.contenders.includes(id)) continue
          try {
            const name = `${runId}_${replicas}x${jobs}_${id.replace(/[^a-z0-9]/g, '')}`
            contenders.push(await measureContender(server, name, id, replicas, jobs, options, progress))
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error)
            progress(`fleet ${store} ${replicas}×${jobs} ${id} failed: ${message}`)
            onError(store, `fleet ${replicas}×${jobs} ${id}: ${message}`)
          }
        }
        rows.push({ store, server: server.version, replicas, jobs, contenders: withRatios(contenders) })
      }
    } finally {
      await server.close()
    }
  }
  return rows
}
