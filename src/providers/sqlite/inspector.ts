import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import { sqlLockInspector } from '../../support/sql/sql-inspector.ts'
import { type SqlTableOptions, sqlTable } from '../../support/sql/sql-table.ts'
import { DB_NOW, DB_NOW_MS, describeSqliteError, epochMs, PROVIDER } from './table.ts'

/** A prepared statement, as {@link SqliteRowsDatabase} returns it: `all` reads rows, `run` changes them. */
export interface SqliteRowsStatement {
  all(...params: unknown[]): unknown[]
  run(...params: unknown[]): { changes: number | bigint }
}

/**
 * The part of a SQLite connection that {@link sqliteLockInspector} calls: a better-sqlite3 (12)
 * `Database` and a `node:sqlite` `DatabaseSync` both have it, so pass either as is.
 */
export interface SqliteRowsDatabase {
  prepare(sql: string): SqliteRowsStatement
}

/** Options of {@link sqliteLockInspector}: the provider's connection and table options. */
export interface SqliteLockInspectorOptions extends SqlTableOptions {
  /** Your open connection (the provider's, or another one to the same file). The inspector never opens or closes it. */
  database: SqliteRowsDatabase
}

/**
 * Reads and force-releases the locks of a SQLite lock table, in the provider's format: for
 * dashboards, health endpoints and operators. Times are read on SQLite's `'now'`, this host's
 * clock, which the provider decides expiry on; the processes that share the file share it.
 *
 * A force-release sets `lock_until` to now and `locked_by` to `"released"` (the row stays, as
 * released rows do), so that the holder can no longer release, extend or re-hold it. Each call is
 * one synchronous statement of the driver, like the provider's: it waits for another process's
 * write up to the connection's busy timeout.
 *
 * ```ts
 * import Database from 'better-sqlite3' // or libsql's Database, or node:sqlite's DatabaseSync
 * import { sqliteLockInspector } from 'shedlock/sqlite'
 * const inspector = sqliteLockInspector({ database: new Database('locks.db', { timeout: 5000 }) })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing database or table or column names that are not plain SQL identifiers.
 */
export function sqliteLockInspector(options: SqliteLockInspectorOptions): LockInspector {
  const { database } = options ?? {}
  if (!database || typeof database.prepare !== 'function') {
    throw new LockConfigurationError(
      'sqlite: pass your open better-sqlite3 Database, libsql Database or node:sqlite DatabaseSync as { database } (an object with prepare(sql))',
    )
  }
  const table = sqlTable(PROVIDER, options)
  return sqlLockInspector({
    provider: PROVIDER,
    clock: "this host's clock, read by SQLite",
    table,
    query: async (sql, params) => database.prepare(sql).all(...params) as Record<string, unknown>[],
    execute: async (sql, params) => Number(database.prepare(sql).run(...params).changes),
    dbNow: () => DB_NOW,
    nowMs: () => DB_NOW_MS,
    epochMs,
    // The stored text itself: what the provider wrote, compared as written.
    text: (column) => column,
    describe: describeSqliteError(table),
  })
}
