import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { sqliteLockProvider, sqliteSchema } from '../../providers/sqlite.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { CliError, messageOf } from '../command.ts'
import { sqlStore } from '../sql-store.ts'
import { loadSqliteDriver, type SqliteConnection } from '../sqlite-driver.ts'
import type { Store, StoreOptions } from '../store.ts'
import { sqlitePath, type StoreUrl } from '../store-url.ts'

/** The statement methods both drivers have (better-sqlite3 12, node:sqlite). */
interface Statement {
  all(...params: unknown[]): unknown[]
  run(...params: unknown[]): { changes: number | bigint }
}

// julianday() parses the stored 'YYYY-MM-DD HH:MM:SS.SSS' UTC text; 2440587.5 is the Unix epoch's Julian day.
const epochMs = (expression: string): string => `((julianday(${expression}) - 2440587.5) * 86400000.0)`

/**
 * Opens a `sqlite:PATH` URL with node:sqlite (Node >= 22.13) or better-sqlite3. Only `init`
 * creates a missing database file: the other commands refuse one, rather than leave an empty
 * file behind after a typo.
 */
export async function openSqliteStore(url: StoreUrl, options: StoreOptions): Promise<Store> {
  const table = sqlTable('sqlite', { tableName: options.table ?? 'shedlock' })
  const path = sqlitePath(url)
  const initCommand = `shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${table.table}`}`
  if (!options.create && path !== ':memory:' && !existsSync(path)) {
    throw new CliError(`no SQLite database at ${resolve(path)}; create it (and the lock table) with: ${initCommand}`)
  }
  const driver = await loadSqliteDriver()
  let database: SqliteConnection
  try {
    database = driver.open(path)
  } catch (error) {
    throw new CliError(`cannot open the SQLite database ${resolve(path)}: ${messageOf(error)}`, { cause: error })
  }
  const statement = (sql: string): Statement => database.prepare(sql) as unknown as Statement
  const rows = async (sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]> => statement(sql).all(...params) as Record<string, unknown>[]
  const schemaPrefix = table.schema === undefined ? '' : `${table.schema}.`
  const where = `${url.redacted}${options.table === undefined ? '' : ` (table ${table.table})`}`

  const store = sqlStore({
    kind: 'SQLite',
    where,
    clock: "this host's clock, read by SQLite",
    table,
    query: rows,
    execute: async (sql, params) => {
      if (params.length === 0 && /^\s*CREATE\b/i.test(sql)) {
        database.exec(sql)
        return 0
      }
      return Number(statement(sql).run(...params).changes)
    },
    dbNow: `strftime('%Y-%m-%d %H:%M:%f', 'now')`,
    nowMs: epochMs(`'now'`),
    epochMs,
    text: (column) => column,
    tableExists: async () => (await rows(`SELECT 1 AS present FROM ${schemaPrefix}sqlite_master WHERE type = 'table' AND name = ?`, [table.bareTable])).length > 0,
    columns: async () =>
      (await rows(`PRAGMA ${schemaPrefix}table_info(${table.bareTable})`, [])).map((row) => ({ name: String(row.name), type: String(row.type).toLowerCase() })),
    primaryKey: async () =>
      (await rows(`PRAGMA ${schemaPrefix}table_info(${table.bareTable})`, []))
        .filter((row) => Number(row.pk) > 0)
        .sort((a, b) => Number(a.pk) - Number(b.pk))
        .map((row) => String(row.name)),
    expectedTypes: { name: ['text'], time: ['text'], lockedBy: ['text'] },
    schema: () => sqliteSchema({ tableName: table.table }),
    initCommand,
    provider: () => sqliteLockProvider({ database, tableName: table.table }),
    version: async () => `SQLite ${String((await rows('SELECT sqlite_version() AS version', []))[0]?.version ?? '?')} (${driver.name}), file ${resolve(path)}`,
    // SQLite's 'now' is this host's clock: a second reading of the same clock would measure nothing.
    readClock: async () => 'SQLite reads the clock of this host, so there is no offset to measure; processes sharing the file share that clock',
    clockDependence: '',
    close: async () => {
      database.close()
    },
  })
  return {
    ...store,
    async init() {
      const done = await store.init()
      // WAL lets processes read while another writes, and is a property of the file: set once here.
      const before = String((await rows('PRAGMA journal_mode', []))[0]?.journal_mode ?? '')
      if (before.toLowerCase() === 'wal') return [...done, 'journal_mode is already WAL']
      const after = String((await rows('PRAGMA journal_mode = WAL', []))[0]?.journal_mode ?? '')
      return [...done, after.toLowerCase() === 'wal' ? `set journal_mode to WAL (was ${before})` : `could not set journal_mode to WAL (it is ${after}); set it yourself`]
    },
  }
}
