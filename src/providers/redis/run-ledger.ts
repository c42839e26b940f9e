import { randomUUID } from 'node:crypto'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import {
  healthOf,
  healthOfTasks,
  withAbandoned,
  type RunEnd,
  type RunLedger,
  type RunOutcome,
  type RunRecord,
  type RunStart,
} from '../../core/run-ledger.ts'
import { runHandle } from '../../support/run-handle.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { storedOutcome, storedToken } from '../../support/stored-run.ts'
import { TickBatch } from '../../support/tick-batch.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { type RedisClient, toRedisCommands } from './client.ts'
import { SET_REPLY } from './commands.ts'
import {
  APPEND_RUN,
  APPEND_RUNS,
  DEFAULT_ENVIRONMENT,
  describeRedisError,
  PROVIDER,
  READ_RUNS,
  redisRunsKeySpace,
  redisScanPattern,
  runScript,
  runScriptOnKeys,
} from './format.ts'
import { scanKeys, scanNodes, textOf } from './scan.ts'

/** Options of {@link redisRunLedger}. */
export interface RedisRunLedgerOptions {
  /** Your connected client, as the provider takes it: ioredis `Redis` or `Cluster`, node-redis client or cluster, or a `RedisCommands` port. */
  client: RedisClient
  /** Second part of every key, `<keyPrefix>:<environment>:<name>`: use the provider's. @default "default" */
  environment?: string
  /** First part of every key, `<keyPrefix>:<environment>:<name>`; not the locks' prefix, so that the inspector never sees a run history as a lock. @default "shedlock-runs" */
  keyPrefix?: string
  /** Runs kept per task name; older ones are trimmed from the task's stream. @default 100 */
  keep?: number
  /** Runs older than this are not read back, and a task's stream is deleted once it has had no run for this long; milliseconds or a duration string. @default "30d" */
  maxAge?: Duration
  /** How long one Redis command may take, milliseconds or a duration string. @default "5s" */
  timeout?: Duration
}

/**
 * The run history in Redis, apart from the lock keys: one capped stream per task,
 * `shedlock-runs:<environment>:<name>`. A run appends one entry when it ends, or, when it is still
 * going after the executor's `recordRunningAfter`, one then and one when it ends (each entry holds
 * the whole run as JSON, fencing token included, so a trimmed start entry loses nothing); each append
 * trims the stream to `2 × keep` entries and sets its expiry to `maxAge`, in one script on the
 * node that owns the key (Cluster clients route it by the key). Needs Redis 5 or later (streams).
 *
 * `tasks()` SCANs for the
 * streams, so it needs a client that can send raw commands (ioredis, node-redis, or a port with
 * `command`).
 *
 * ```ts
 * const runLedger = redisRunLedger({ client: redis })
 * const executor = createLockingTaskExecutor(redisLockProvider({ client: redis }), { runLedger })
 * ```
 *
 * @throws LockConfigurationError for a missing client, a bad key part, `keep`, `maxAge` or `timeout`.
 */
export function redisRunLedger(options: RedisRunLedgerOptions): RunLedger {
  if (options === null || typeof options !== 'object')
    throw new LockConfigurationError('redis: pass options { client, environment?, keep?, maxAge? } to redisRunLedger')
  const commands = toRedisCommands(options.client)
  const space = redisRunsKeySpace({
    keyPrefix: options.keyPrefix,
    environment: options.environment ?? DEFAULT_ENVIRONMENT,
  })
  const keep = options.keep ?? 100
  if (!Number.isSafeInteger(keep) || keep < 1)
    throw new LockConfigurationError(
      `redis: keep must be a whole number of runs, 1 or more, got ${JSON.stringify(options.keep)}`,
    )
  const maxAge = parseDuration(options.maxAge ?? '30d')
  const timeout = parseDuration(options.timeout ?? '5s')
  if (maxAge <= 0 || timeout <= 0) throw new LockConfigurationError('redis: maxAge and timeout must be longer than 0ms')
  const guard = storeGuard((error, action, name) =>
    describeRedisError(error, action, name, commands.client, timeout, 'run ledger'),
  )
  const bounded = <T>(promise: Promise<T>): Promise<T> => withTimeout(promise, timeout, { store: 'Redis' })

  const append = (run: RunStart, id: string, end: RunEnd | undefined): Promise<unknown> =>
    bounded(
      runScript(commands, APPEND_RUN, space.prefix + run.name, [
        id,
        JSON.stringify(stored(id, run, end)),
        String(keep * 2),
        String(Math.ceil(maxAge)),
      ]),
    )

  // A turn's ended runs in one APPEND_RUNS call: a fleet's tick of 200 jobs costs a replica one
  // call instead of 200. Only on one node (the keys are in different Cluster slots) and through
  // the adapters, whose ports pass a script's further keys (SET_REPLY marks them).
  const records =
    commands.masters === undefined && SET_REPLY in commands
      ? new TickBatch<readonly [key: string, id: string, json: string], true>(async (batch) => {
          const keys = batch.map(([key]) => key) as [string, ...string[]]
          const args = [String(keep * 2), String(Math.ceil(maxAge)), ...batch.flatMap(([, id, json]) => [id, json])]
          await runScriptOnKeys(commands, APPEND_RUNS, keys, args)
          return batch.map(() => true as const)
        })
      : undefined

  const read = async (name: string, limit: number): Promise<RunRecord[]> => {
    const reply = await bounded(runScript(commands, READ_RUNS, space.prefix + name, [String(keep * 2)]))
    const since = Date.now() - maxAge
    const seen = new Set<string>()
    // Where each run's oldest entry (its start) sits in the stream, newest first: two runs that
    // started within one millisecond are ordered by when their starts were appended.
    const startAt = new Map<string, number>()
    const runs: RunRecord[] = []
    // Newest entry first: the first entry of a run is its latest state.
    for (const [index, entry] of (Array.isArray(reply) ? reply : []).entries()) {
      const record = recordOf(name, entry)
      if (!record) continue
      startAt.set(record.id, index)
      if (seen.has(record.id)) continue
      seen.add(record.id)
      if (record.startedAt.getTime() >= since) runs.push(record)
    }
    runs.sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime() || startAt.get(a.id)! - startAt.get(b.id)!)
    return runs.slice(0, Math.min(limit, keep))
  }

  return {
    name: PROVIDER,
    start: (run) =>
      guard('record', run.name, async () => {
        const id = randomUUID()
        await append(run, id, undefined)
        return runHandle(PROVIDER, id, (end) =>
          guard('record', run.name, async () => void (await append(run, id, end))),
        )
      }),
    record: (run) =>
      guard('record', run.name, async () => {
        const id = randomUUID()
        if (!records) await append(run, id, run)
        else await bounded(records.add([space.prefix + run.name, id, JSON.stringify(stored(id, run, run))]))
      }),
    history: (name, historyOptions = {}) =>
      guard('history', name, async () => withAbandoned(await read(name, Math.max(0, historyOptions.limit ?? 50)))),
    health: (name) => guard('history', name, async () => healthOf(name, await read(name, keep))),
    tasks: async () => {
      const command = commands.command?.bind(commands)
      if (typeof command !== 'function') {
        throw new LockConfigurationError(
          `redis: tasks() SCANs for the run histories, which the ${commands.client} port passed as client cannot: give it a command(args) method, or pass an ioredis or node-redis client`,
        )
      }
      return guard('history', '', async () => {
        const clientPrefix = commands.keyPrefix ?? ''
        const nodes = await scanNodes(commands, command, bounded)
        const names = [...(await scanKeys(nodes, redisScanPattern(space, clientPrefix), clientPrefix, bounded))]
          .map((key) => key.slice(space.prefix.length))
          .sort()
        return healthOfTasks(names, (name) => read(name, keep))
      })
    },
  }
}

/** What one stream entry holds: the whole run, as far as it is known. */
interface StoredRun {
  id: string
  slot: string | null
  node: string
  startedAt: string
  finishedAt: string | null
  outcome: RunOutcome
  durationMs: number | null
  error: { type: string; message: string } | null
  /** Decimal text: JSON numbers lose a bigint's digits. Absent in entries written before it was kept. */
  fencingToken?: string | null
  /** ISO-8601; absent in entries written before it was kept, or for a task without a schedule. */
  nextFireAt?: string
  /** Who triggered the run (`shedlock trigger`); absent for a scheduled run, or in entries written before it was kept. */
  triggeredBy?: string
}

function stored(id: string, run: RunStart, end: RunEnd | undefined): StoredRun {
  const entry: StoredRun = {
    id,
    slot: run.slot?.toISOString() ?? null,
    node: run.node.slice(0, 255),
    startedAt: run.startedAt.toISOString(),
    finishedAt: end?.finishedAt.toISOString() ?? null,
    outcome: end?.outcome ?? 'running',
    durationMs: end ? Math.round(end.durationMs) : null,
    error: end?.error ? { type: end.error.type, message: end.error.message } : null,
    fencingToken: run.fencingToken === undefined ? null : String(run.fencingToken),
  }
  // A run's end knows the later fire time; its start (a `running` entry) its own.
  const next = end?.nextFireAt ?? run.nextFireAt
  if (next !== undefined) entry.nextFireAt = next.toISOString()
  if (run.triggeredBy !== undefined) entry.triggeredBy = run.triggeredBy.slice(0, 255)
  return entry
}

/** A stream entry `[entryId, [field, value, …]]` as a run; `undefined` for an entry that is not one of ours. */
function recordOf(name: string, entry: unknown): RunRecord | undefined {
  if (!Array.isArray(entry) || !Array.isArray(entry[1])) return undefined
  const fields = entry[1] as unknown[]
  let json: string | undefined
  for (let i = 0; i + 1 < fields.length; i += 2) if (textOf(fields[i]) === 'run') json = textOf(fields[i + 1])
  if (json === undefined) return undefined
  let run: Partial<StoredRun>
  try {
    run = JSON.parse(json) as Partial<StoredRun>
  } catch {
    return undefined
  }
  const date = (value: unknown): Date | undefined =>
    typeof value === 'string' && !Number.isNaN(Date.parse(value)) ? new Date(value) : undefined
  const startedAt = date(run.startedAt)
  if (typeof run.id !== 'string' || !startedAt) return undefined
  return Object.freeze({
    id: run.id,
    name,
    slot: date(run.slot),
    node: String(run.node ?? ''),
    startedAt,
    finishedAt: date(run.finishedAt),
    outcome: storedOutcome(run.outcome),
    durationMs: typeof run.durationMs === 'number' ? run.durationMs : undefined,
    error:
      run.error && typeof run.error.type === 'string'
        ? { type: run.error.type, message: String(run.error.message ?? '') }
        : undefined,
    fencingToken: storedToken(run.fencingToken),
    nextFireAt: date(run.nextFireAt),
    triggeredBy: typeof run.triggeredBy === 'string' ? run.triggeredBy : undefined,
  })
}
