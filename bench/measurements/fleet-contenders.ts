// The fleet measurement's contenders, as each replica process runs them: J jobs on one schedule,
// each configured as its documentation recommends for one run per job and fire across replicas.
// Every run calls `record(job, nominal fire time)` as its first act.
import { Cron } from 'croner'
import { Redis } from 'ioredis'
import pg from 'pg'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { taskContext } from '../../src/integrations/task-context.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import { postgresLockProvider, postgresRunLedger } from '../../src/providers/postgres/index.ts'
import { redisLockProvider, redisRunLedger } from '../../src/providers/redis/index.ts'
import type { ReplicaPlan, ReplicaWindow } from './fleet-plan.ts'

/** Called by a run when it starts: the job's index and the fire time it runs for (ms since the epoch). */
export type RecordRun = (job: number, slot: number) => void

/** A contender, connected and set up in one replica, not yet scheduling. */
export interface ReplicaContender {
  /** Schedules the window's ticks (and starts the workers); resolves once every schedule is in place. */
  start(window: ReplicaWindow, record: RecordRun): Promise<void>
  /** Stops scheduling and working, and closes the connections. */
  stop(): Promise<void>
}

/** The cron of a period: with seconds for 1 and 2 s, per minute for 60 s. */
export function cronOf(periodMs: number): string {
  if (periodMs === 60_000) return '0 * * * * *'
  if (periodMs === 1000) return '* * * * * *'
  return `*/${periodMs / 1000} * * * * *`
}

const jobName = (j: number): string => `job-${j}`
const lastFireOf = (w: ReplicaWindow, periodMs: number): number => w.firstFire + (w.ticks - 1) * periodMs

function redisClient(url: string, options: { maxRetriesPerRequest?: number | null } = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, ...options })
}

/** shedlock: a croner `Cron` per job, each fire through `withLock(executor, { slot: true })`, with the store's run ledger. */
async function shedlock(plan: ReplicaPlan, errors: string[]): Promise<ReplicaContender> {
  let close: () => Promise<void>
  let executor: ReturnType<typeof createLockingTaskExecutor>
  if (plan.store === 'postgres') {
    const pool = new pg.Pool({ connectionString: plan.url, max: plan.connections })
    await pool.query('SELECT 1')
    executor = createLockingTaskExecutor(postgresLockProvider({ client: pool }), {
      runLedger: postgresRunLedger({ client: pool }),
    })
    close = () => pool.end()
  } else {
    const client = redisClient(plan.url)
    await client.ping()
    executor = createLockingTaskExecutor(redisLockProvider({ client, environment: plan.space }), {
      runLedger: redisRunLedger({ client, environment: plan.space }),
    })
    close = async () => void (await client.quit())
  }
  const crons: Cron[] = []
  return {
    async start(window, record) {
      for (let j = 0; j < plan.jobs; j++) {
        const run = withLock(
          executor,
          {
            name: jobName(j),
            lockAtMostFor: '30s',
            slot: true,
            onError: (error) => void errors.push(String(error)),
          },
          () => record(j, taskContext().slot!.getTime()),
        )
        crons.push(
          new Cron(
            cronOf(plan.periodMs),
            { startAt: new Date(window.firstFire - 500), stopAt: new Date(lastFireOf(window, plan.periodMs) + 500) },
            run,
          ),
        )
      }
    },
    async stop() {
      for (const c of crons) c.stop()
      await executor.close()
      await close()
    },
  }
}

/** BullMQ: a job scheduler per job (`upsertJobScheduler`, a cron pattern), upserted by every replica, and a Worker per replica. */
async function bullmq(plan: ReplicaPlan, errors: string[]): Promise<ReplicaContender> {
  const { Queue, Worker } = await import('bullmq')
  // Workers need maxRetriesPerRequest: null (BullMQ's connection guide); the queue may fail fast.
  const queueConnection = redisClient(plan.url)
  const workerConnection = redisClient(plan.url, { maxRetriesPerRequest: null })
  const queue = new Queue('fleet', { connection: queueConnection, prefix: plan.space })
  await queue.waitUntilReady()
  let worker: InstanceType<typeof Worker> | undefined
  return {
    async start(window, record) {
      const endDate = lastFireOf(window, plan.periodMs) + 500
      for (let j = 0; j < plan.jobs; j++) {
        await queue.upsertJobScheduler(
          jobName(j),
          { pattern: cronOf(plan.periodMs), startDate: window.firstFire - 500, endDate },
          { name: jobName(j), opts: { removeOnComplete: true, removeOnFail: true } },
        )
      }
      worker = new Worker(
        'fleet',
        async (job) => {
          // A scheduler's job carries its fire time as `prevMillis` (the id is `repeat:<scheduler>:<fire time>`).
          record(Number(job.name.slice(4)), Number((job.opts as { prevMillis?: number }).prevMillis))
        },
        { connection: workerConnection, prefix: plan.space, concurrency: plan.concurrency },
      )
      worker.on('error', (error) => void errors.push(String(error)))
      await worker.waitUntilReady()
    },
    async stop() {
      await worker?.close()
      await queue.close()
      queueConnection.disconnect()
      workerConnection.disconnect()
    },
  }
}

/** node-cron 4: `distributed: true` with a run coordinator, given to each task. */
async function nodeCron(plan: ReplicaPlan, errors: string[], viaRedis: boolean): Promise<ReplicaContender> {
  const cron = (await import('node-cron')).default
  const client = viaRedis ? redisClient(plan.url) : undefined
  await client?.ping()
  // node-cron asks shouldRun(`<task name>:<fire time>`, distributedLease) on each fire; a key per
  // fire, kept until it expires (not deleted on completion, or a replica firing late would run it again).
  const coordinator = client
    ? {
        async shouldRun(key: string, ttlMs: number): Promise<boolean> {
          return (await client.set(`${plan.space}:${key}`, '1', 'PX', ttlMs, 'NX')) === 'OK'
        },
      }
    : {
        // node-cron's default: NODE_CRON_RUN, one designated replica runs every fire (no store, no failover).
        shouldRun: (): boolean => plan.replica === 0,
      }
  const tasks: { destroy(): void | Promise<void> }[] = []
  return {
    async start(window, record) {
      const lastFire = lastFireOf(window, plan.periodMs)
      for (let j = 0; j < plan.jobs; j++) {
        const task = cron.schedule(
          cronOf(plan.periodMs),
          (context: { date: Date }) => {
            const slot = context.date.getTime()
            if (slot >= window.firstFire && slot <= lastFire) record(j, slot)
          },
          { name: `${plan.space}-${jobName(j)}`, distributed: true, runCoordinator: coordinator },
        )
        task.on('execution:failed', (context: { execution?: { error?: unknown } }) => {
          errors.push(String(context.execution?.error))
        })
        tasks.push(task)
      }
    },
    async stop() {
      for (const t of tasks) await t.destroy()
      await client?.quit()
    },
  }
}

/** Graphile Worker: the same crontab in every replica (a line per job, per minute: its finest period), `run()` per replica. */
async function graphileWorker(plan: ReplicaPlan, errors: string[]): Promise<ReplicaContender> {
  const { run, Logger } = await import('graphile-worker')
  const quiet = new Logger(() => (level, message) => {
    if (level === 'error') errors.push(message)
  })
  let runner: Awaited<ReturnType<typeof run>> | undefined
  return {
    async start(_window, record) {
      const crontab = Array.from({ length: plan.jobs }, (_, j) => `* * * * * ${jobName(j)}`).join('\n')
      const taskList = Object.fromEntries(
        Array.from({ length: plan.jobs }, (_, j) => [
          jobName(j),
          async (payload: unknown) => {
            // Each crontab job's payload carries `_cron.ts`, its nominal fire time.
            const ts = (payload as { _cron?: { ts?: string } })._cron?.ts
            record(j, ts ? Date.parse(ts) : Number.NaN)
          },
        ]),
      )
      runner = await run({
        connectionString: plan.url,
        maxPoolSize: plan.connections,
        concurrency: plan.concurrency,
        schema: plan.space,
        noHandleSignals: true,
        logger: quiet,
        crontab,
        taskList,
      })
    },
    async stop() {
      await runner?.stop()
    },
  }
}

/** pg-boss: a queue and a `schedule()` per job (cron per minute, its finest), a `work()` per queue in every replica. */
async function pgBoss(plan: ReplicaPlan, errors: string[]): Promise<ReplicaContender> {
  const PgBoss = (await import('pg-boss')).default
  const boss = new PgBoss({ connectionString: plan.url, schema: plan.space, max: plan.connections })
  boss.on('error', (error) => void errors.push(String(error)))
  await boss.start()
  if (plan.replica === 0) for (let j = 0; j < plan.jobs; j++) await boss.createQueue(jobName(j))
  let record: RecordRun = () => undefined
  // Workers and schedules are put in place before the window (a queue per job takes a while):
  // a fire of the minute before it runs outside the window and is not counted.
  for (let j = 0; j < plan.jobs; j++) {
    // The schedule is one row per queue: every replica may upsert it; the first does.
    if (plan.replica === 0) await boss.schedule(jobName(j), '* * * * *', undefined, { tz: 'UTC' })
    await boss.work(jobName(j), { includeMetadata: true }, async (jobs) => {
      // pg-boss passes no fire time: the minute its cron monitor sent the job in (a job
      // reaches the queue at most 30 s + the send-it worker's 5 s after the minute starts).
      for (const job of jobs) record(j, Math.floor(new Date(job.createdOn).getTime() / 60_000) * 60_000)
    })
  }
  return {
    async start(_window, recordRun) {
      record = recordRun
    },
    async stop() {
      await boss.stop({ graceful: false, wait: true })
    },
  }
}

/** Connects and sets up the plan's contender in this replica. */
export function prepareContender(plan: ReplicaPlan, errors: string[]): Promise<ReplicaContender> {
  switch (plan.contender) {
    case 'shedlock':
      return shedlock(plan, errors)
    case 'bullmq':
      return bullmq(plan, errors)
    case 'node-cron+redis':
      return nodeCron(plan, errors, true)
    case 'node-cron+env':
      return nodeCron(plan, errors, false)
    case 'graphile-worker':
      return graphileWorker(plan, errors)
    case 'pg-boss':
      return pgBoss(plan, errors)
  }
}
