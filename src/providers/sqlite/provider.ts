import { systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { lockAtLeastAnchor, type SqlAccessor, type SqlLockProviderOptions, sqlLockProvider } from '../../support/sql/sql-lock-provider.ts'
import { sqlTable, utcTimestamp } from '../../support/sql/sql-table.ts'
import { type SqliteRowsDatabase, sqliteLockInspector } from './inspector.ts'
import { DB_NOW, DB_NOW_PLUS, describeSqliteError, FORMAT, PROVIDER } from './table.ts'

/** A prepared statement, as {@link SqliteDatabase} returns it. Only `run` is called, with text parameters. */
export interface SqliteStatement {
  run(...params: string[]): { changes: number | bigint }
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

type StatementKind = 'acquire' | 'extend' | 'unlock' | 'unlockExtended'

/**
 * Locks in a SQLite table in Java ShedLock's layout (create it with {@link sqliteSchema}).
 *
 * One `INSERT … ON CONFLICT(name) DO UPDATE … WHERE lock_until <= now` per acquire attempt, one
 * `UPDATE` per release; unlock and extend only touch the row this acquisition holds. Extensible.
 * Each statement is prepared once per provider, on first use.
 *
 * Safe across processes that share one database file: SQLite's write lock serialises the upserts,
 * so exactly one of them takes a free lock. Use WAL (`PRAGMA journal_mode = WAL`) and a busy
 * timeout, so that a process that meets another's write waits for it instead of failing with
 * `SQLITE_BUSY`: better-sqlite3 waits 5 s by default, `node:sqlite` and libsql wait 0 ms unless
 * opened with `{ timeout: 5000 }` (or after `PRAGMA busy_timeout = 5000`). libsql is
 * better-sqlite3's API over a prebuilt binary: nothing to compile on install, on any Node line.
 * The drivers are synchronous: while a statement waits for the write lock, it blocks the event loop.
 *
 * With `node:sqlite` and libsql, also set `PRAGMA synchronous = NORMAL` (better-sqlite3 is built
 * with it as the WAL default): under `FULL`, every commit waits for an fsync, which made an
 * acquire and release 14 times slower (300 µs against 21 µs, Node 24). `NORMAL` in WAL mode loses
 * no commit when a process crashes, only on a power loss or OS crash, which also ends every
 * process of the host that could hold a lock; at worst, a tick run just before it may run again
 * after the reboot.
 *
 * With `useDbTime` (the default), "database time" is SQLite's `'now'`: this host's clock, read by
 * SQLite. Every process on the host shares it, so they agree on expiry; it protects nothing
 * against clock changes of the host itself. A `schema.table` name refers to an attached database.
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
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function sqliteLockProvider(options: SqliteLockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  const { database } = options ?? {}
  if (!database || typeof database.prepare !== 'function') {
    throw new LockConfigurationError('sqlite: pass your open better-sqlite3 Database, libsql Database or node:sqlite DatabaseSync as { database } (an object with prepare(sql))')
  }
  const t = sqlTable(PROVIDER, options)
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const clock = options.clock ?? systemClock
  const useDbTime = options.useDbTime ?? true

  // Upsert-if-expired: a missing row is inserted, an expired one taken over, a held one left alone.
  const upsert = (untilSql: string, nowSql: string): string =>
    `INSERT INTO ${t.table} (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}) VALUES (?, ${untilSql}, ${nowSql}, ?) ` +
    `ON CONFLICT(${name}) DO UPDATE SET ${lockUntil} = excluded.${lockUntil}, ${lockedAt} = excluded.${lockedAt}, ${lockedBy} = excluded.${lockedBy} ` +
    `WHERE ${lockUntil} <= excluded.${lockedAt}`

  // Parameters are bound in the order the `?` appear in each text.
  const sql: Record<StatementKind, string> = useDbTime
    ? {
        // (name, until modifier, owner)
        acquire: upsert(DB_NOW_PLUS, DB_NOW),
        // (until modifier, name, owner)
        extend: `UPDATE ${t.table} SET ${lockUntil} = ${DB_NOW_PLUS} WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ${DB_NOW}`,
        // (modifier from locked_at, name, owner)
        unlock: `UPDATE ${t.table} SET ${lockUntil} = MAX(strftime(${FORMAT}, ${lockedAt}, ?), ${DB_NOW}) WHERE ${name} = ? AND ${lockedBy} = ?`,
        // (modifier from now, name, owner)
        unlockExtended: `UPDATE ${t.table} SET ${lockUntil} = ${DB_NOW_PLUS} WHERE ${name} = ? AND ${lockedBy} = ?`,
      }
    : {
        // (name, until, now, owner)
        acquire: upsert('?', '?'),
        // (until, name, owner, now)
        extend: `UPDATE ${t.table} SET ${lockUntil} = ? WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ?`,
        // (until, name, owner)
        unlock: `UPDATE ${t.table} SET ${lockUntil} = ? WHERE ${name} = ? AND ${lockedBy} = ?`,
        // Unused: with app time every release counts from this process's clock.
        unlockExtended: `UPDATE ${t.table} SET ${lockUntil} = ? WHERE ${name} = ? AND ${lockedBy} = ?`,
      }

  // Prepared on first use and kept; a failed prepare (say, the table is not there yet) is not kept.
  const prepared = new Map<StatementKind, SqliteStatement>()
  const run = async (kind: StatementKind, params: string[]): Promise<number> => {
    let statement = prepared.get(kind)
    if (!statement) {
      statement = database.prepare(sql[kind])
      prepared.set(kind, statement)
    }
    return Number(statement.run(...params).changes)
  }

  const accessor: SqlAccessor = useDbTime
    ? {
        acquire: async (c, owner) => (await run('acquire', [c.name, secondsModifier(c.lockAtMostFor / 1000), owner])) > 0,
        extend: async (next, owner) => (await run('extend', [secondsModifier(next.lockAtMostFor / 1000), next.name, owner])) > 0,
        unlock: async (current, owner, acquired) => {
          const anchor = lockAtLeastAnchor(current, acquired, clock)
          await run(anchor.from === 'lockedAt' ? 'unlock' : 'unlockExtended', [secondsModifier(anchor.seconds), current.name, owner])
        },
      }
    : {
        acquire: async (c, owner) => (await run('acquire', [c.name, utcTimestamp(c.lockAtMostUntil.getTime()), utcTimestamp(clock.now()), owner])) > 0,
        extend: async (next, owner) => (await run('extend', [utcTimestamp(next.lockAtMostUntil.getTime()), next.name, owner, utcTimestamp(clock.now())])) > 0,
        unlock: async (current, owner) => {
          const until = Math.max(clock.now(), current.lockAtLeastUntil.getTime())
          await run('unlock', [utcTimestamp(until), current.name, owner])
        },
      }
  const inspect = { database: database as SqliteRowsDatabase, tableName: t.table, columnNames: t.columns }
  return { ...sqlLockProvider(PROVIDER, accessor, options, describeSqliteError(t)), inspector: () => sqliteLockInspector(inspect) }
}

/** A date modifier for strftime(), e.g. `+30.000 seconds`. */
function secondsModifier(seconds: number): string {
  return `+${Math.max(0, seconds).toFixed(3)} seconds`
}
