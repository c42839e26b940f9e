import type { RunLedger } from '../../core/run-ledger.ts'
import { RUN_COLUMNS, runsTableName, type SqlRunLedgerOptions, sqlRunLedger } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { storeError } from '../../support/store-errors.ts'
import {
  describeSpannerError,
  isMissingTable,
  isSpannerDatabase,
  missingDatabase,
  PROVIDER,
  type SpannerDatabase,
} from './format.ts'
import { spannerExecute, spannerQuery } from './inspector.ts'

/** Options of {@link spannerRunLedger}. */
export interface SpannerRunLedgerOptions extends SqlRunLedgerOptions {
  /** Your `@google-cloud/spanner` `Database` (the provider's). */
  database: SpannerDatabase
}

/**
 * DDL of the run history's table in Spanner (see {@link spannerRunLedger}): one row per run, keyed
 * by a random UUID (no hot spot), with an index on `(name, started_at)`, apart from the lock table.
 * Idempotent. Two statements: run them with `database.updateSchema()` (without the `;`).
 */
export function spannerRunsSchema(options: { tableName?: string } = {}): string {
  const table = runsTableName(PROVIDER, options.tableName)
  const bare = table.split('.').at(-1)!
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    '  id STRING(36) NOT NULL,',
    '  name STRING(255) NOT NULL,',
    '  slot TIMESTAMP,',
    '  node STRING(255) NOT NULL,',
    '  started_at TIMESTAMP NOT NULL,',
    '  finished_at TIMESTAMP,',
    '  outcome STRING(16) NOT NULL,',
    '  duration_ms INT64,',
    '  error_type STRING(100),',
    '  error_message STRING(500),',
    '  fencing_token INT64,',
    '  next_fire_at TIMESTAMP,',
    '  triggered_by STRING(255),',
    ') PRIMARY KEY (id);',
    `CREATE INDEX IF NOT EXISTS ${bare}_name_started ON ${table} (name, started_at);`,
  ].join('\n')
}

// The ledger sends each run's fencing token as decimal text, which Spanner does not cast to the
// INT64 column: in its INSERTs (`width` columns per row), the token's parameter goes as a bigint.
const TOKEN_AT = RUN_COLUMNS.indexOf('fencing_token')

function tokensAsIntegers(params: readonly unknown[], width: number): unknown[] {
  return params.map((value, k) =>
    k % width === TOKEN_AT && typeof value === 'string' && /^\d+$/.test(value) ? BigInt(value) : value,
  )
}

/** The number of columns an `INSERT INTO t (a, b, …) VALUES …` names. */
function insertWidth(sql: string): number {
  return sql.slice(sql.indexOf('(') + 1, sql.indexOf(')')).split(',').length
}

/**
 * The run history in a Spanner table (`shedlock_runs` by default; create it with
 * {@link spannerRunsSchema} or `shedlock init`), apart from the lock table: give it to the
 * executor, `createLockingTaskExecutor(provider, { runLedger: spannerRunLedger({ database }) })`,
 * and read it with `history()`, `health()` and `tasks()`, or `shedlock history` and `shedlock
 * status`. Each write is one DML statement in a read-write transaction; reads are strong queries.
 *
 * @throws LockConfigurationError for a missing database, a table name that is not a plain identifier, or a bad `keep` or `maxAge`.
 */
export function spannerRunLedger(options: SpannerRunLedgerOptions): RunLedger {
  const { database } = options ?? {}
  if (!isSpannerDatabase(database)) throw missingDatabase()
  const table = runsTableName(PROVIDER, options.tableName)
  const otherErrors = describeSpannerError(sqlTable(PROVIDER, { tableName: table }))
  const execute = spannerExecute(database, 10_000)
  const insert = `INSERT INTO ${table} (`
  return sqlRunLedger(
    {
      provider: PROVIDER,
      query: spannerQuery(database),
      execute: (sql, params) =>
        execute(sql, sql.startsWith(insert) ? tokensAsIntegers(params, insertWidth(sql)) : params),
      // The ledger sends UTC text ('2030-01-01 00:00:00.000'); Spanner's own default zone is Los Angeles.
      timestamp: "TIMESTAMP(CAST(? AS STRING), 'UTC')",
      // 13 parameters a row: 910 of the 950 a Spanner statement takes.
      maxBatch: 70,
      epochMs: (column) => `UNIX_MILLIS(${column})`,
      text: (column) => `CAST(${column} AS STRING)`,
      describe: (error, action, name) =>
        isMissingTable(error, table)
          ? storeError(
              PROVIDER,
              action,
              name,
              `table ${table} does not exist. Create it with:\n${spannerRunsSchema({ tableName: table })}`,
              error,
            )
          : otherErrors(error, action, name),
    },
    table,
    options,
  )
}
