import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import {
  addFencingColumnDdl,
  lacksFencingColumn,
  missingFencingColumn,
  type SqlTable,
  type SqlTableOptions,
  sqlTable,
  tableOptions,
} from '../../support/sql/sql-table.ts'
import { sqliteLockTableDdl } from '../../support/sql/sqlite-dialect.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'

// The lock table in SQLite: Java ShedLock's columns, with times as UTC text. Its DDL, the now the
// provider compares lock_until with, how to read the times as epoch milliseconds, and what the
// drivers' errors mean. The provider, the inspector and the CLI read it from here.

/** The provider's name, as messages and diagnostics give it. */
export const PROVIDER = 'sqlite'

// SQLite's time expressions live with the SQL that Cloudflare D1 shares (support/sql/sqlite-dialect.ts).
export { DB_NOW, DB_NOW_MS, epochMs } from '../../support/sql/sqlite-dialect.ts'

/**
 * DDL for the lock table in SQLite: Java ShedLock's columns, with times as UTC text
 * `YYYY-MM-DD HH:MM:SS.SSS` (SQLite's own datetime format, which sorts as text in time order).
 * Idempotent (`IF NOT EXISTS`); run it with `database.exec()`. With `fencingTokens: true`, also
 * the nullable `fencing_token INTEGER` column (for an existing table: {@link sqliteFencingColumnDdl}).
 *
 * ```ts
 * import { sqliteSchema } from 'shedlock/sqlite'
 * database.exec(sqliteSchema({ tableName: 'shedlock' }))
 * ```
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function sqliteSchema(options: SqlTableOptions = {}): string {
  return sqliteLockTableDdl(sqlTable(PROVIDER, options))
}

/**
 * The `ALTER TABLE` that adds the fencing token column to an existing lock table, for
 * `fencingTokens: true`: `ALTER TABLE shedlock ADD COLUMN fencing_token INTEGER NULL;`.
 */
export function sqliteFencingColumnDdl(options: SqlTableOptions = {}): string {
  return addFencingColumnDdl(sqlTable(PROVIDER, options), 'INTEGER')
}

/** What a better-sqlite3, libsql or node:sqlite error means for the lock and what to do about it. */
export function describeSqliteError(t: SqlTable): DescribeStoreError {
  return (error, action, lockName) => {
    const detail = redactUrlPasswords(messageOf(error))
    let advice: string
    if (isClosed(error)) {
      advice = `the database is closed (${detail}); ${outcomeOf(action)}. Keep the connection open while the provider is in use`
    } else if (isBusy(error)) {
      advice = `the database is locked by another writer; set a busy timeout (better-sqlite3: the timeout option, 5 s by default; node:sqlite and libsql: open with { timeout: 5000 }) and use WAL (${detail})`
    } else if (/^no such table\b|^unknown database\b/i.test(detail)) {
      advice = `table ${t.table} does not exist (${detail}). Create it with:\n${sqliteSchema(tableOptions(t))}`
    } else if (lacksFencingColumn(t, detail)) {
      advice = missingFencingColumn(t, addFencingColumnDdl(t, 'INTEGER'))
    } else if (/^no such column\b|\bhas no column named\b|ON CONFLICT clause does not match/i.test(detail)) {
      advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}

/** better-sqlite3 and libsql throw `TypeError: The database connection is not open`; node:sqlite an Error with code `ERR_INVALID_STATE`. */
function isClosed(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return (
    code === 'ERR_INVALID_STATE' ||
    (error instanceof TypeError && /database connection is not open/i.test(error.message))
  )
}

/** better-sqlite3 and libsql: code `SQLITE_BUSY` (or an extended `SQLITE_BUSY_*`); node:sqlite: `errcode` 5 in its low byte. */
function isBusy(error: unknown): boolean {
  const { code, errcode } = (error ?? {}) as { code?: unknown; errcode?: unknown }
  return (
    (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) ||
    (typeof errcode === 'number' && (errcode & 0xff) === 5)
  )
}

/**
 * DDL of the run history's table in SQLite (see `sqliteRunLedger`): one row per run, kept apart
 * from the lock table; times are UTC text `YYYY-MM-DD HH:MM:SS.SSS`. Idempotent; run it with
 * `database.exec()`.
 */
export function sqliteRunsSchema(options: { tableName?: string } = {}): string {
  const table = runsTableName(PROVIDER, options.tableName)
  const [schema, bare] = table.includes('.') ? (table.split('.') as [string, string]) : [undefined, table]
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    '  id TEXT NOT NULL PRIMARY KEY,',
    '  name TEXT NOT NULL,',
    '  slot TEXT NULL,',
    '  node TEXT NOT NULL,',
    '  started_at TEXT NOT NULL,',
    '  finished_at TEXT NULL,',
    '  outcome TEXT NOT NULL,',
    '  duration_ms INTEGER NULL,',
    '  error_type TEXT NULL,',
    '  error_message TEXT NULL,',
    '  fencing_token BIGINT NULL,',
    '  next_fire_at TEXT NULL,',
    '  triggered_by TEXT NULL',
    ');',
    // SQLite names the index's database on the index, not on the table.
    `CREATE INDEX IF NOT EXISTS ${schema === undefined ? '' : `${schema}.`}${bare}_name_started ON ${bare} (name, started_at);`,
  ].join('\n')
}
