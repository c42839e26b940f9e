import { LockConfigurationError } from '../../core/errors.ts'
import type { RunLedger } from '../../core/run-ledger.ts'
import { runsTableName, type SqlRunLedgerOptions, sqlRunLedger } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import type { PostgresRowsClient } from './inspector.ts'
import { storeError } from '../../support/store-errors.ts'
import { describePostgresError, epochMs, numbered, PROVIDER, postgresRunsSchema } from './table.ts'

/** Options of {@link postgresRunLedger}. */
export interface PostgresRunLedgerOptions extends SqlRunLedgerOptions {
  /** Your `pg` Pool (the provider's). */
  client: PostgresRowsClient
}

/**
 * The run history in a PostgreSQL table (`shedlock_runs` by default; create it with
 * {@link postgresRunsSchema} or `shedlock init`), apart from the lock table: give it to the
 * executor, `createLockingTaskExecutor(provider, { runLedger: postgresRunLedger({ client: pool }) })`,
 * and read it with `history()`, `health()` and `tasks()`, or `shedlock history` and `shedlock status`.
 *
 * @throws LockConfigurationError for a missing client, a table name that is not a plain SQL identifier, or a bad `keep` or `maxAge`.
 */
export function postgresRunLedger(options: PostgresRunLedgerOptions): RunLedger {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError('postgres: pass your pg Pool as { client } (an object with query(text, values))')
  }
  const table = runsTableName(PROVIDER, options.tableName)
  const lockTableErrors = describePostgresError(sqlTable(PROVIDER, { tableName: table }))
  return sqlRunLedger(
    {
      provider: PROVIDER,
      query: async (sql, params) => (await client.query(numbered(sql), [...params])).rows,
      execute: async (sql, params) => (await client.query(numbered(sql), [...params])).rowCount ?? 0,
      timestamp: 'CAST(? AS timestamp)',
      // 13 parameters a row: 6,500 of PostgreSQL's 65,535.
      maxBatch: 500,
      epochMs,
      text: (column) => `CAST(${column} AS text)`,
      describe: (error, action, name) =>
        (error as { code?: unknown } | null)?.code === '42P01'
          ? storeError(
              PROVIDER,
              action,
              name,
              `table ${table} does not exist. Create it with:\n${postgresRunsSchema({ tableName: table })}`,
              error,
            )
          : lockTableErrors(error, action, name),
    },
    table,
    options,
  )
}
