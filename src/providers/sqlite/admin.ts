import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { sqlStoreAdmin } from '../../support/sql/sql-admin.ts'
import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import type { StoreAdmin, StoreOptions } from '../../support/store-admin.ts'
import type { StoreUrl } from '../../support/store-url.ts'
import { loadSqliteDriver, type SqliteConnection } from './driver.ts'
import { sqliteRunLedger } from './run-ledger.ts'
import { sqliteLockInspector } from './inspector.ts'
import { sqliteLockProvider } from './provider.ts'
import { sqliteRunsSchema, sqliteFencingColumnDdl, sqliteSchema } from './table.ts'

/** `shedlock schema sqlite`: the DDL of the lock table. */
export function schema(table: string | undefined, options: { fencingTokens?: boolean } = {}): string {
  return `${sqliteSchema({ tableName: table ?? 'shedlock', fencingTokens: options.fencingTokens ?? false })}\n-- The run history (optional; shedlock history, shedlock status):\n${sqliteRunsSchema()}`
}

/**
 * The path of a `sqlite:` URL: `sqlite:PATH`, relative or absolute (`sqlite:///abs/path`, an older
 * form, is read too).
 * @throws UsageError when it is empty.
 */
export function sqlitePath(url: StoreUrl): string {
  let path = url.raw.slice('sqlite:'.length)
  if (path.startsWith('//')) path = path.slice(2)
  if (path === '')
    throw new UsageError(
      'sqlite: URL without a path; use sqlite:PATH, e.g. sqlite:./locks.db or sqlite:/var/lib/app/locks.db',
    )
  return path
}

/**
 * Opens a `sqlite:PATH` URL with node:sqlite (Node >= 22.13), better-sqlite3 or libsql (see
 * {@link loadSqliteDriver}). Only `init` creates a missing database file: the other commands
 * refuse one, rather than leave an empty file behind after a typo.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const table = sqlTable('sqlite', {
    tableName: options.table ?? 'shedlock',
    fencingTokens: options.fencingTokens ?? false,
  })
  const path = sqlitePath(url)
  const initCommand = `shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${table.table}`}${table.fencing ? ' --fencing-tokens' : ''}`
  if (!options.create && path !== ':memory:' && !existsSync(path)) {
    throw new CliError(`no SQLite database at ${resolve(path)}; create it (and the lock table) with: ${initCommand}`)
  }
  const driver = await loadSqliteDriver()
  let database: SqliteConnection
  try {
    database = driver.open(path)
  } catch (error) {
    throw new CliError(`cannot open the SQLite database ${resolve(path)}: ${firstLine(error)}`, { cause: error })
  }
  const rows = async (sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]> =>
    database.prepare(sql).all(...params) as Record<string, unknown>[]
  const schemaPrefix = table.schema === undefined ? '' : `${table.schema}.`
  const where = `${url.redacted}${options.table === undefined ? '' : ` (table ${table.table})`}`

  const runsTable = runsTableName('sqlite', options.runsTable)
  const [runsSchemaName, runsBare] = runsTable.includes('.')
    ? (runsTable.split('.') as [string, string])
    : [undefined, runsTable]
  const store = sqlStoreAdmin({
    kind: 'SQLite',
    where,
    table,
    runLedger: sqliteRunLedger({ database, tableName: runsTable }),
    runsTable,
    runsTableExists: async () =>
      (
        await rows(
          `SELECT 1 AS present FROM ${runsSchemaName === undefined ? '' : `${runsSchemaName}.`}sqlite_master WHERE type = 'table' AND name = ?`,
          [runsBare],
        )
      ).length > 0,
    runsSchema: () => sqliteRunsSchema({ tableName: runsTable }),
    runsColumnTypes: { timestamp: 'TEXT NULL', text: 'TEXT NULL' },
    inspector: sqliteLockInspector({ database, tableName: table.table }),
    query: rows,
    execute: async (sql, params) => {
      if (params.length === 0 && /^\s*CREATE\b/i.test(sql)) {
        database.exec(sql)
        return 0
      }
      return Number(database.prepare(sql).run(...params).changes)
    },
    tableExists: async () =>
      (
        await rows(`SELECT 1 AS present FROM ${schemaPrefix}sqlite_master WHERE type = 'table' AND name = ?`, [
          table.bareTable,
        ])
      ).length > 0,
    columns: async () =>
      (await rows(`PRAGMA ${schemaPrefix}table_info(${table.bareTable})`, [])).map((row) => ({
        name: String(row.name),
        type: String(row.type).toLowerCase(),
      })),
    primaryKey: async () =>
      (await rows(`PRAGMA ${schemaPrefix}table_info(${table.bareTable})`, []))
        .filter((row) => Number(row.pk) > 0)
        .sort((a, b) => Number(a.pk) - Number(b.pk))
        .map((row) => String(row.name)),
    expectedTypes: { name: ['text'], time: ['text'], lockedBy: ['text'] },
    schema: () => sqliteSchema({ tableName: table.table, fencingTokens: table.fencing }),
    fencingColumnDdl: () => sqliteFencingColumnDdl({ tableName: table.table }),
    initCommand,
    provider: (fencingTokens, lockedBy) =>
      sqliteLockProvider({ database, tableName: table.table, fencingTokens, lockedBy }),
    version: async () =>
      `SQLite ${String((await rows('SELECT sqlite_version() AS version', []))[0]?.version ?? '?')} (${driver.name}), file ${resolve(path)}`,
    // SQLite's 'now' is this host's clock: a second reading of the same clock would measure nothing.
    readClock: async () =>
      'SQLite reads the clock of this host, so there is no offset to measure; processes sharing the file share that clock',
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
      return [
        ...done,
        after.toLowerCase() === 'wal'
          ? `set journal_mode to WAL (was ${before})`
          : `could not set journal_mode to WAL (it is ${after}); set it yourself`,
      ]
    },
  }
}
