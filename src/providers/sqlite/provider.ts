import { systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { type SqlLockProviderOptions, sqlLockProvider } from '../../support/sql/sql-lock-provider.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { preparedOnce, sqliteAccessor } from '../../support/sql/sqlite-dialect.ts'
import { type SqliteRowsDatabase, sqliteLockInspector } from './inspector.ts'
import { describeSqliteError, PROVIDER } from './table.ts'

/**
 * A prepared statement, as {@link SqliteDatabase} returns it, called with text parameters: `run`,
 * and with `fencingTokens` `get` (the acquire's `RETURNING` row), which the three drivers have.
 */
export interface SqliteStatement {
  run(...params: string[]): { changes: number | bigint }
  get?(...params: string[]): unknown
}

/**
 * The part of a SQLite connection that this provider calls. We import no driver: a better-sqlite3
 * (12) `Database`, a libsql (0.5) `Database` and a `node:sqlite` `DatabaseSync` all have this
 * `prepare`, so pass any of them as is.
 */
export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement
}

/** Options of {@link sqliteLockProvider}. */
export interface SqliteLockProviderOptions extends SqlLockProviderOptions {
  /** Your open connection: a better-sqlite3 or libsql `Database`, or a `node:sqlite` `DatabaseSync`. The provider never opens or closes it. */
  database: SqliteDatabase
}

/**
 * Locks in a SQLite table in Java ShedLock's layout (create it with {@link sqliteSchema}), for
 * processes of one host sharing a database file: one upsert per acquire attempt, one `UPDATE` per
 * release. Extensible; with `useDbTime` (the default) SQLite's `'now'`, this host's clock,
 * decides expiry.
 *
 * Use WAL and a busy timeout, so that a process that meets another's write waits for it instead
 * of failing with `SQLITE_BUSY` (`node:sqlite` and libsql wait 0 ms unless opened with `timeout`);
 * the drivers are synchronous, so that wait blocks the event loop:
 *
 * ```ts
 * import { DatabaseSync } from 'node:sqlite' // or: import Database from 'better-sqlite3'
 * import { sqliteLockProvider, sqliteSchema } from 'shedlock/sqlite'
 * const database = new DatabaseSync('locks.db', { timeout: 5000 })
 * database.exec('PRAGMA journal_mode = WAL')
 * database.exec('PRAGMA synchronous = NORMAL') // node:sqlite; better-sqlite3's default in WAL
 * database.exec(sqliteSchema())
 * const provider = sqliteLockProvider({ database })
 * ```
 *
 * See docs/providers/sqlite.md.
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function sqliteLockProvider(
  options: SqliteLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { database } = options ?? {}
  if (!database || typeof database.prepare !== 'function') {
    throw new LockConfigurationError(
      'sqlite: pass your open better-sqlite3 Database, libsql Database or node:sqlite DatabaseSync as { database } (an object with prepare(sql))',
    )
  }
  const t = sqlTable(PROVIDER, options)
  const clock = options.clock ?? systemClock

  // Prepared on first use and kept; a failed prepare (say, the table is not there yet) is not kept.
  const statement = preparedOnce((sql) => database.prepare(sql))
  const accessor = sqliteAccessor(
    t,
    options.useDbTime ?? true,
    async (kind, sql, params) => Number(statement(kind, sql).run(...params).changes),
    clock,
    async (kind, sql, params) => {
      const found = statement(kind, sql)
      if (typeof found.get !== 'function')
        throw new TypeError('fencingTokens needs prepared statements with get() (better-sqlite3, libsql, node:sqlite)')
      return found.get(...params) as Record<string, unknown> | undefined
    },
  )
  const inspect = { database: database as SqliteRowsDatabase, tableName: t.table, columnNames: t.columns }
  return {
    ...sqlLockProvider(PROVIDER, accessor, options, describeSqliteError(t)),
    inspector: () => sqliteLockInspector(inspect),
  }
}
