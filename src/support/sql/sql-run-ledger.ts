import { randomUUID } from 'node:crypto'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { healthOf, type RunLedger, type RunOutcome, type RunRecord, type TaskHealth } from '../../core/run-ledger.ts'
import { type DescribeStoreError, storeGuard } from '../store-errors.ts'
import { utcTimestamp } from './sql-table.ts'

/** Options of the SQL run ledgers (`postgresRunLedger`, `mysqlRunLedger`, `sqliteRunLedger`). */
export interface SqlRunLedgerOptions {
  /** The runs table, optionally schema-qualified; create it with the store's `…RunsSchema()` or `shedlock init`. Plain SQL identifiers only. @default "shedlock_runs" */
  tableName?: string
  /** Runs kept per task name; older ones are deleted (every `keep / 10` writes of the task, so up to 10 % more rows stay between two deletes; reads return at most `keep`). @default 100 */
  keep?: number
  /** Runs older than this are deleted, of every task (also of a task that no longer runs, within 10 minutes of a write), in milliseconds or a duration string. @default "30d" */
  maxAge?: Duration
}

/** What one SQL dialect contributes to {@link sqlRunLedger}. Statements use `?` placeholders. */
export interface SqlRunDialect {
  readonly provider: string
  query(sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]>
  execute(sql: string, params: readonly unknown[]): Promise<number>
  /** A timestamp parameter, as the dialect's timestamp columns take UTC text: e.g. `CAST(? AS DATETIME(3))`. */
  readonly timestamp: string
  /** A timestamp column as epoch milliseconds (a number). */
  epochMs(column: string): string
  readonly describe: DescribeStoreError
}

/** How often one ledger deletes the expired runs of every task (not only of the task that writes), in milliseconds. */
export const SWEEP_EVERY_MS: number = 10 * 60_000
/** At most this many rows per sweep; when it deletes as many, the next write sweeps again. */
export const SWEEP_LIMIT: number = 1_000
/** A task's rows beyond `keep` are deleted once per this share of `keep` writes of it (every 10th write with the default 100). */
export const PRUNE_SHARE: number = 0.1

// Names are interpolated into SQL text, so only plain identifiers pass: never quote, never escape.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/
const OUTCOMES: ReadonlySet<string> = new Set<RunOutcome>(['running', 'ok', 'failed', 'lock-lost', 'skipped'])

/**
 * The validated runs table name: plain identifiers, optionally schema-qualified.
 * @throws LockConfigurationError naming the store and the bad value.
 */
export function runsTableName(provider: string, tableName: unknown = 'shedlock_runs'): string {
  if (typeof tableName !== 'string' || !IDENTIFIER.test(tableName)) {
    throw new LockConfigurationError(
      `${provider}: the runs tableName ${JSON.stringify(tableName)} is not a plain SQL identifier; use letters, digits and underscores, optionally prefixed by a schema, e.g. "shedlock_runs"`,
    )
  }
  return tableName
}

/**
 * The runs table's columns, in every SQL dialect: one row per run, written when it starts and
 * updated when it ends. Times are UTC, as the node that ran it read them.
 */
export const RUN_COLUMNS = [
  'id',
  'name',
  'slot',
  'node',
  'started_at',
  'finished_at',
  'outcome',
  'duration_ms',
  'error_type',
  'error_message',
] as const

/**
 * The {@link RunLedger} over a SQL runs table, kept out of the lock table (Java ShedLock's table
 * stays exactly Java's). Each run is one `INSERT` when it starts and one `UPDATE` when it ends
 * (its handle knows the row); after every {@link PRUNE_SHARE} of `keep` ends of a task, the task's
 * runs beyond `keep` or older than `maxAge` are deleted (two `DELETE`s on the `(name, started_at)`
 * index), and reads never return more than `keep`. The first end, and then one every {@link SWEEP_EVERY_MS},
 * deletes the runs older than `maxAge` of every task instead (at most {@link SWEEP_LIMIT} rows),
 * so that a task that no longer runs loses its rows too.
 */
export function sqlRunLedger(dialect: SqlRunDialect, table: string, options: SqlRunLedgerOptions): RunLedger {
  const keep = options.keep ?? 100
  if (!Number.isSafeInteger(keep) || keep < 1)
    throw new LockConfigurationError(
      `${dialect.provider}: keep must be a whole number of runs, 1 or more, got ${JSON.stringify(options.keep)}`,
    )
  const maxAge = parseDuration(options.maxAge ?? '30d')
  const guard = storeGuard(dialect.describe)
  const ts = dialect.timestamp
  const columns =
    `id, name, ${dialect.epochMs('slot')} AS slot_ms, node, ${dialect.epochMs('started_at')} AS started_ms, ${dialect.epochMs('finished_at')} AS finished_ms, ` +
    'outcome, duration_ms, error_type, error_message'

  // The age limit of every task, not only of the one that writes: a renamed or removed task
  // writes no more, and its rows would stay for ever (and `shedlock status --stale` flag it).
  // At most every SWEEP_EVERY_MS, the age DELETE of one write covers all names instead of the
  // task's, bounded to SWEEP_LIMIT rows: no statement more per run. Not on every write: the sweep
  // reads the whole table (no index leads with started_at); on PostgreSQL 15 with 100,000 rows
  // (1,000 tasks × 100 runs), none expired, it took 1.2 ms against 0.7 ms for the task's own DELETE,
  // and it grows with the table.
  let nextSweep = 0
  // A task's own rows are pruned on every PRUNE_SHARE-th of `keep` writes of it, not on each:
  // two DELETEs a run were most of what a run cost the store (8 statements a slot run, with the
  // claim, the lock, the start, the release and the end). Reads never return more than `keep`
  // runs, so the few rows over it between two prunes are never seen.
  const pruneEvery = Math.max(1, Math.ceil(keep * PRUNE_SHARE))
  const writes = new Map<string, number>()
  const prune = async (name: string): Promise<void> => {
    const now = Date.now()
    const sweepDue = now >= nextSweep
    const count = (writes.get(name) ?? 0) + 1
    const due = count >= pruneEvery
    if (due) writes.delete(name)
    else writes.set(name, count)
    if (!sweepDue && !due) return
    const cutoff = utcTimestamp(now - maxAge)
    if (sweepDue) {
      nextSweep = now + SWEEP_EVERY_MS
      // The derived table lets MySQL read the table it deletes from, with a LIMIT.
      const deleted = await dialect.execute(
        `DELETE FROM ${table} WHERE id IN (SELECT id FROM (SELECT id FROM ${table} WHERE started_at < ${ts} LIMIT ?) expired)`,
        [cutoff, SWEEP_LIMIT],
      )
      if (deleted >= SWEEP_LIMIT) nextSweep = now // more left: the next write sweeps again
    } else {
      await dialect.execute(`DELETE FROM ${table} WHERE name = ? AND started_at < ${ts}`, [name, cutoff])
    }
    if (!due) return
    // The derived table lets MySQL read the table it deletes from.
    await dialect.execute(
      `DELETE FROM ${table} WHERE name = ? AND started_at < (SELECT started_at FROM (SELECT started_at FROM ${table} WHERE name = ? ORDER BY started_at DESC LIMIT 1 OFFSET ?) kept)`,
      [name, name, keep - 1],
    )
  }
  const insert = (
    id: string,
    run: { name: string; slot: Date | undefined; node: string; startedAt: Date },
    end?: {
      finishedAt: Date
      outcome: string
      durationMs: number
      error?: { type: string; message: string } | undefined
    },
  ) =>
    dialect.execute(
      `INSERT INTO ${table} (${RUN_COLUMNS.join(', ')}) VALUES (?, ?, ${ts}, ?, ${ts}, ${ts}, ?, ?, ?, ?)`,
      [
        id,
        run.name,
        run.slot === undefined ? null : utcTimestamp(run.slot.getTime()),
        run.node.slice(0, 255),
        utcTimestamp(run.startedAt.getTime()),
        end ? utcTimestamp(end.finishedAt.getTime()) : null,
        end?.outcome ?? 'running',
        end ? Math.round(end.durationMs) : null,
        end?.error?.type ?? null,
        end?.error?.message ?? null,
      ],
    )
  // Runs older than maxAge are never read back, whether or not a prune has deleted them yet.
  const read = async (where: string, params: unknown[], limit: number): Promise<RunRecord[]> =>
    (
      await dialect.query(
        `SELECT ${columns} FROM ${table}${where} AND started_at >= ${ts} ORDER BY name, started_at DESC, id LIMIT ?`,
        [...params, utcTimestamp(Date.now() - maxAge), limit],
      )
    ).map(recordOf)

  return {
    name: dialect.provider,
    start: (run) =>
      guard('record', run.name, async () => {
        const id = randomUUID()
        await insert(id, run)
        return {
          id,
          // The handle knows the task: no statement to find its name again.
          finish: (end) =>
            guard('record', run.name, async () => {
              await dialect.execute(
                `UPDATE ${table} SET finished_at = ${ts}, outcome = ?, duration_ms = ?, error_type = ?, error_message = ? WHERE id = ?`,
                [
                  utcTimestamp(end.finishedAt.getTime()),
                  end.outcome,
                  Math.round(end.durationMs),
                  end.error?.type ?? null,
                  end.error?.message ?? null,
                  id,
                ],
              )
              await prune(run.name)
            }),
        }
      }),
    record: (run) =>
      guard('record', run.name, async () => {
        await insert(randomUUID(), run, run)
        await prune(run.name)
      }),
    history: (name, historyOptions = {}) =>
      guard('inspect', name, () =>
        read(' WHERE name = ?', [name], Math.min(keep, Math.max(0, historyOptions.limit ?? 50))),
      ),
    health: (name) => guard('inspect', name, async () => healthOf(name, await read(' WHERE name = ?', [name], keep))),
    tasks: () =>
      guard('list', '', async () => {
        const names = (
          await dialect.query(`SELECT DISTINCT name FROM ${table} WHERE started_at >= ${ts} ORDER BY name`, [
            utcTimestamp(Date.now() - maxAge),
          ])
        ).map((row) => String(row.name))
        const health: TaskHealth[] = []
        for (const name of names) health.push(healthOf(name, await read(' WHERE name = ?', [name], keep)))
        return health
      }),
  }
}

function recordOf(row: Record<string, unknown>): RunRecord {
  const date = (value: unknown): Date | undefined =>
    value === null || value === undefined ? undefined : new Date(Math.round(Number(value)))
  const outcome = String(row.outcome)
  return Object.freeze({
    id: String(row.id),
    name: String(row.name),
    slot: date(row.slot_ms),
    node: String(row.node),
    startedAt: date(row.started_ms)!,
    finishedAt: date(row.finished_ms),
    outcome: (OUTCOMES.has(outcome) ? outcome : 'running') as RunOutcome,
    durationMs: row.duration_ms === null || row.duration_ms === undefined ? undefined : Number(row.duration_ms),
    error:
      row.error_type === null || row.error_type === undefined
        ? undefined
        : { type: String(row.error_type), message: String(row.error_message ?? '') },
  })
}
