import { LockConfigurationError } from '../../core/errors.ts'
import type { RunLedger } from '../../core/run-ledger.ts'
import { runsTableName, type SqlRunLedgerOptions, sqlRunLedger } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { messageOf, storeError } from '../../support/store-errors.ts'
import type { SqliteRowsDatabase } from './inspector.ts'
import { describeSqliteError, epochMs, PROVIDER, sqliteRunsSchema } from './table.ts'

/** Options of {@link sqliteRunLedger}. */
export interface SqliteRunLedgerOptions extends SqlRunLedgerOptions {
  /** Your open connection: a better-sqlite3 or libsql `Database`, or a `node:sqlite` `DatabaseSync`. */
  database: SqliteRowsDatabase
}

/**
 * The run history in a SQLite table (`shedlock_runs` by default; create it with
 * {@link sqliteRunsSchema} or `shedlock init`), apart from the lock table: give it to the
 * executor, `createLockingTaskExecutor(provider, { runLedger: sqliteRunLedger({ database }) })`,
 * and read it with `history()`, `health()` and `tasks()`, or `shedlock history` and `shedlock status`.
 *
 * @throws LockConfigurationError for a missing database, a table name that is not a plain SQL identifier, or a bad `keep` or `maxAge`.
 */
export function sqliteRunLedger(options: SqliteRunLedgerOptions): RunLedger {
  const { database } = options ?? {}
  if (!database || typeof database.prepare !== 'function') {
    throw new LockConfigurationError(
      'sqlite: pass your open better-sqlite3 Database, libsql Database or node:sqlite DatabaseSync as { database } (an object with prepare(sql))',
    )
  }
  const table = runsTableName(PROVIDER, options.tableName)
  const lockTableErrors = describeSqliteError(sqlTable(PROVIDER, { tableName: table }))
  return sqlRunLedger(
    {
      provider: PROVIDER,
      query: async (sql, params) => database.prepare(sql).all(...params) as Record<string, unknown>[],
      execute: async (sql, params) => Number(database.prepare(sql).run(...params).changes),
      timestamp: '?',
      epochMs,
      text: (column) => `CAST(${column} AS TEXT)`,
      describe: (error, action, name) =>
        /^no such table\b/i.test(messageOf(error))
          ? storeError(
              PROVIDER,
              action,
              name,
              `table ${table} does not exist. Create it with:\n${sqliteRunsSchema({ tableName: table })}`,
              error,
            )
          : lockTableErrors(error, action, name),
    },
    table,
    options,
  )
}
