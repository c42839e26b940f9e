import { randomUUID } from 'node:crypto'
import {
  healthOf,
  healthOfTasks,
  withAbandoned,
  type RunEnd,
  type RunLedger,
  type RunRecord,
  type RunStart,
} from '../../core/run-ledger.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { pruneDelayOf, retentionOf, type RunRetentionOptions } from '../run-pruner.ts'
import { type DescribeStoreError, messageOf, storeError, storeGuard } from '../store-errors.ts'
import { TickBatch } from '../tick-batch.ts'
import { storedOutcome, storedToken } from '../stored-run.ts'
import { sqlRunPruner } from './sql-run-pruner.ts'
import { utcTimestamp } from './sql-table.ts'

/** Options of the SQL run ledgers (`postgresRunLedger`, `mysqlRunLedger`, `sqliteRunLedger`). */
export interface SqlRunLedgerOptions extends RunRetentionOptions {
  /** The runs table, optionally schema-qualified; create it with the store's `…RunsSchema()` or `shedlock init`. Plain SQL identifiers only. @default "shedlock_runs" */
  tableName?: string
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
  /** A BIGINT column as decimal text, so that no driver reads it as a lossy number. */
  text(column: string): string
  readonly describe: DescribeStoreError
  /**
   * The most runs one `INSERT` may hold: the runs recorded in one turn of the event loop (a
   * scheduled tick's) go in one statement of up to this many rows. Omitted or 1: one `INSERT` per
   * run (a dialect whose statements take few parameters, or have no round trip to save).
   */
  readonly maxBatch?: number
}

// Names are interpolated into SQL text, so only plain identifiers pass: never quote, never escape.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/
// PostgreSQL, MySQL/MariaDB and SQLite's words for a column the table lacks.
const MISSING_TOKEN_COLUMN =
  /(column "?fencing_token"? .*does not exist|unknown column '?fencing_token|no such column: fencing_token|has no column named fencing_token)/i

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
 * The runs table's columns, in every SQL dialect: one row per run, written when it ends (or, for
 * a run longer than the executor's `recordRunningAfter`, when that time is up, and updated when it
 * ends). Times are UTC, as the node that ran it read them.
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
  'fencing_token',
  'next_fire_at',
  'triggered_by',
] as const

/**
 * Columns of {@link RUN_COLUMNS} that runs tables made by older versions lack, oldest first, each
 * with the kind of what it holds and what a run is recorded without in a table that lacks it: `shedlock init` adds them to an existing table; a ledger over a
 * table without them writes and reads the other columns, and warns once. A table that lacks one
 * lacks every later one (each version adds its columns to the end).
 */
export const LATER_RUN_COLUMNS = [
  { name: 'next_fire_at', kind: 'timestamp', without: 'their next fire time (no task reads as overdue)' },
  { name: 'triggered_by', kind: 'text', without: 'who triggered them (shedlock trigger)' },
] as const

// The same words as MISSING_TOKEN_COLUMN's for a column of LATER_RUN_COLUMNS, which older runs
// tables lack (and Spanner's): the names come from the list, so a column added there is matched.
const LATER_NAMES = LATER_RUN_COLUMNS.map((column) => column.name).join('|')
const MISSING_LATER_COLUMN = new RegExp(
  `(column "?(${LATER_NAMES})"? .*does not exist|unknown column '?(\\w+\\.)?(${LATER_NAMES})|no such column: (${LATER_NAMES})|has no column named (${LATER_NAMES})|column not found in table [\\w.]+: (${LATER_NAMES})|unrecognized name: (${LATER_NAMES}))`,
  'i',
)

/** A column of {@link LATER_RUN_COLUMNS}. */
export type LaterRunColumn = (typeof LATER_RUN_COLUMNS)[number]

/** The kinds of {@link LATER_RUN_COLUMNS}, each as a dialect's nullable column type: e.g. `{ timestamp: 'TIMESTAMP NULL', text: 'VARCHAR(255) NULL' }`. */
export type RunColumnTypes = { readonly [K in LaterRunColumn['kind']]: string }

/** The statement that adds `column` (of {@link LATER_RUN_COLUMNS}) to `table`, in the dialect's `types`. */
export function addRunColumnDdl(table: string, column: LaterRunColumn, types: RunColumnTypes): string {
  return `ALTER TABLE ${table} ADD COLUMN ${column.name} ${types[column.kind]};`
}

/**
 * The {@link RunLedger} over a SQL runs table, kept out of the lock table (Java ShedLock's table
 * stays exactly Java's). A run shorter than the executor's `recordRunningAfter` is one `INSERT` of
 * the whole row (`record()`); a longer one an `INSERT` of its `running` row and an `UPDATE` when it
 * ends (its handle knows the row). Old runs are deleted by a {@link sqlRunPruner}, apart from
 * the writes; reads never return more than `keep` runs, nor runs older than `maxAge`.
 */
export function sqlRunLedger(dialect: SqlRunDialect, table: string, options: SqlRunLedgerOptions): RunLedger {
  const { keep, maxAge } = retentionOf(dialect.provider, options)
  // A runs table created before the fencing_token column: the fix, not the driver's message.
  const guard = storeGuard((error, action, name) =>
    MISSING_TOKEN_COLUMN.test(messageOf(error))
      ? storeError(
          dialect.provider,
          action,
          name,
          `the runs table ${table} has no fencing_token column; add it with: ALTER TABLE ${table} ADD COLUMN fencing_token BIGINT NULL`,
          error,
        )
      : dialect.describe(error, action, name),
  )
  const ts = dialect.timestamp
  const full = runShape(dialect, table, RUN_COLUMNS.length)
  // The table as an older version made it, without the last `dropped` later columns: one step
  // narrower at each refusal for a missing column.
  let dropped = 0
  let shape = full
  let warned = false
  const warn = (): void => {
    warned = true
    const missing = LATER_RUN_COLUMNS.slice(-dropped)
    process.emitWarning(
      `${dialect.provider}: the runs table ${table} has no ${missing.map((column) => column.name).join(' or ')} column, so runs are recorded without ${missing.map((column) => column.without).join(' or ')}; shedlock init --runs-table ${table} adds it`,
      { code: 'SHEDLOCK_RUNS_TABLE_OLD' },
    )
  }
  // Runs `use` with the table's shape; refused for a missing later column, again with a narrower
  // one. Warns once, when a shape fits.
  const shaped = async <T>(use: (shape: RunShape) => Promise<T>): Promise<T> => {
    for (;;) {
      const from = dropped
      try {
        const result = await use(shape)
        if (from > 0 && !warned) warn()
        return result
      } catch (error) {
        if (from >= LATER_RUN_COLUMNS.length || !MISSING_LATER_COLUMN.test(messageOf(error))) throw error
        if (dropped === from) shape = runShape(dialect, table, RUN_COLUMNS.length - ++dropped)
      }
    }
  }

  const pruner = sqlRunPruner({
    table,
    timestamp: ts,
    keep,
    maxAge,
    delayMs: pruneDelayOf(options.pruneDelay),
    execute: (sql, params) => dialect.execute(sql, params),
  })
  const insert = (id: string, run: RunStart, end: RunEnd | undefined) =>
    shaped((to) => dialect.execute(to.insertInto + to.rowValues, to.valuesOf(id, run, end)))
  // A turn's ended runs in one multi-row INSERT (see maxBatch).
  const maxBatch = dialect.maxBatch ?? 1
  const records =
    maxBatch > 1
      ? new TickBatch<RunStart & RunEnd, true>(async (runs) => {
          const ids = runs.map(() => randomUUID())
          await shaped((to) =>
            dialect.execute(
              to.insertInto + Array.from(runs, () => to.rowValues).join(', '),
              runs.flatMap((run, k) => to.valuesOf(ids[k]!, run, run)),
            ),
          )
          return runs.map(() => true as const)
        }, maxBatch)
      : undefined
  // Runs older than maxAge are never read back, whether or not a prune has deleted them yet.
  const read = async (where: string, params: unknown[], limit: number): Promise<RunRecord[]> =>
    (
      await shaped((from) =>
        dialect.query(
          `SELECT ${from.columns} FROM ${table}${where} AND started_at >= ${ts} ORDER BY name, started_at DESC, id LIMIT ?`,
          [...params, utcTimestamp(Date.now() - maxAge), limit],
        ),
      )
    ).map(recordOf)
  return {
    name: dialect.provider,
    start: (run) =>
      guard('record', run.name, async () => {
        const id = randomUUID()
        await insert(id, run, undefined)
        return {
          id,
          // The handle knows the task: no statement to find its name again.
          finish: (end) =>
            guard('record', run.name, async () => {
              await shaped((to) => dialect.execute(to.finish, to.endValues(id, end)))
              pruner.wrote(run.name)
            }),
        }
      }),
    record: (run) =>
      guard('record', run.name, async () => {
        if (records) await records.add(run)
        else await insert(randomUUID(), run, run)
        pruner.wrote(run.name)
      }),
    history: (name, historyOptions = {}) =>
      guard('history', name, async () =>
        withAbandoned(await read(' WHERE name = ?', [name], Math.min(keep, Math.max(0, historyOptions.limit ?? 50)))),
      ),
    health: (name) => guard('history', name, async () => healthOf(name, await read(' WHERE name = ?', [name], keep))),
    tasks: () =>
      guard('history', '', async () => {
        const names = (
          await dialect.query(`SELECT DISTINCT name FROM ${table} WHERE started_at >= ${ts} ORDER BY name`, [
            utcTimestamp(Date.now() - maxAge),
          ])
        ).map((row) => String(row.name))
        return healthOfTasks(names, (name) => read(' WHERE name = ?', [name], keep))
      }),
  }
}

/** The statements over the first `width` of {@link RUN_COLUMNS}, built once: all of them, or those of a table made before the later ones. */
interface RunShape {
  readonly columns: string
  readonly insertInto: string
  readonly rowValues: string
  readonly finish: string
  valuesOf(id: string, run: RunStart, end: RunEnd | undefined): unknown[]
  endValues(id: string, end: RunEnd): unknown[]
}

function runShape(dialect: SqlRunDialect, table: string, width: number): RunShape {
  const ts = dialect.timestamp
  const withNext = width > RUN_COLUMNS.indexOf('next_fire_at')
  const withTrigger = width > RUN_COLUMNS.indexOf('triggered_by')
  const time = (date: Date | undefined): string | null => (date === undefined ? null : utcTimestamp(date.getTime()))
  return {
    columns:
      `id, name, ${dialect.epochMs('slot')} AS slot_ms, node, ${dialect.epochMs('started_at')} AS started_ms, ${dialect.epochMs('finished_at')} AS finished_ms, ` +
      `outcome, duration_ms, error_type, error_message, ${dialect.text('fencing_token')} AS fencing_token` +
      (withNext ? `, ${dialect.epochMs('next_fire_at')} AS next_fire_ms` : '') +
      (withTrigger ? ', triggered_by' : ''),
    insertInto: `INSERT INTO ${table} (${RUN_COLUMNS.slice(0, width).join(', ')}) VALUES `,
    rowValues: `(?, ?, ${ts}, ?, ${ts}, ${ts}, ?, ?, ?, ?, ?${withNext ? `, ${ts}` : ''}${withTrigger ? ', ?' : ''})`,
    finish: `UPDATE ${table} SET finished_at = ${ts}, outcome = ?, duration_ms = ?, error_type = ?, error_message = ?${withNext ? `, next_fire_at = COALESCE(${ts}, next_fire_at)` : ''} WHERE id = ?`,
    valuesOf: (id, run, end) => {
      const values: unknown[] = [
        id,
        run.name,
        time(run.slot),
        run.node.slice(0, 255),
        utcTimestamp(run.startedAt.getTime()),
        end ? utcTimestamp(end.finishedAt.getTime()) : null,
        end?.outcome ?? 'running',
        end ? Math.round(end.durationMs) : null,
        end?.error?.type ?? null,
        end?.error?.message ?? null,
        // As text: every driver binds it, none rounds it; the column converts it.
        run.fencingToken === undefined ? null : String(run.fencingToken),
      ]
      if (withNext) values.push(time(end?.nextFireAt ?? run.nextFireAt))
      if (withTrigger) values.push(run.triggeredBy?.slice(0, 255) ?? null)
      return values
    },
    endValues: (id, end) => {
      const values: unknown[] = [
        utcTimestamp(end.finishedAt.getTime()),
        end.outcome,
        Math.round(end.durationMs),
        end.error?.type ?? null,
        end.error?.message ?? null,
      ]
      if (withNext) values.push(time(end.nextFireAt))
      values.push(id)
      return values
    },
  }
}

function recordOf(row: Record<string, unknown>): RunRecord {
  const date = (value: unknown): Date | undefined =>
    value === null || value === undefined ? undefined : new Date(Math.round(Number(value)))
  return Object.freeze({
    id: String(row.id),
    name: String(row.name),
    slot: date(row.slot_ms),
    node: String(row.node),
    startedAt: date(row.started_ms)!,
    finishedAt: date(row.finished_ms),
    outcome: storedOutcome(row.outcome),
    durationMs: row.duration_ms === null || row.duration_ms === undefined ? undefined : Number(row.duration_ms),
    error:
      row.error_type === null || row.error_type === undefined
        ? undefined
        : { type: String(row.error_type), message: String(row.error_message ?? '') },
    fencingToken: storedToken(row.fencing_token),
    nextFireAt: date(row.next_fire_ms),
    triggeredBy: row.triggered_by === null || row.triggered_by === undefined ? undefined : String(row.triggered_by),
  })
}
