import { CliError, firstLine } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { sqlStoreAdmin } from '../../support/sql/sql-admin.ts'
import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import type { StoreUrl } from '../../support/store-url.ts'
import { mysqlRunLedger } from './run-ledger.ts'
import { mysqlLockInspector } from './inspector.ts'
import { mysqlLockProvider } from './provider.ts'
import { mysqlFencingColumnDdl, mysqlRunsSchema, mysqlSchema, nowEpochMs } from './table.ts'

interface MysqlPool {
  query(sql: string, values?: readonly unknown[]): Promise<[unknown, unknown]>
  end(): Promise<void>
}
interface MysqlModule {
  default: { createPool(config: { uri: string; connectionLimit: number; connectTimeout: number }): MysqlPool }
}

/** `shedlock schema mysql` (and `mariadb`): the DDL of the lock table. */
export function schema(table: string | undefined, options: { fencingTokens?: boolean } = {}): string {
  return `${mysqlSchema({ tableName: table ?? 'shedlock', fencingTokens: options.fencingTokens ?? false })}\n-- The run history (optional; shedlock history, shedlock status):\n${mysqlRunsSchema()}`
}

/** Opens a `mysql://` or `mariadb://` URL with `mysql2`. */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const table = sqlTable('mysql', {
    tableName: options.table ?? 'shedlock',
    fencingTokens: options.fencingTokens ?? false,
  })
  const mysql = await importDriver<MysqlModule>('mysql2/promise', 'mysql2', 'mysql://')
  // mysql2 reads user, password, host, port, database and further options from the URI, whatever its scheme.
  const pool = mysql.default.createPool({ uri: url.raw, connectionLimit: 2, connectTimeout: 10_000 })
  const rows = async (sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]> => {
    const [result] = await pool.query(sql, params)
    return Array.isArray(result) ? (result as Record<string, unknown>[]) : []
  }
  let version: string
  try {
    version = String((await rows('SELECT VERSION() AS version', []))[0]?.version ?? '?')
  } catch (error) {
    await pool.end().catch(() => {})
    throw new CliError(
      `cannot reach MySQL at ${url.redacted}: ${firstLine(error)}; check the URL, the user's password and that the server runs`,
      {
        cause: error,
      },
    )
  }
  const schemaOf = table.schema === undefined ? 'DATABASE()' : '?'
  const schemaParams = table.schema === undefined ? [] : [table.schema]
  const where = options.table === undefined ? url.redacted : `${url.redacted} (table ${table.table})`
  const kind = /mariadb/i.test(version) ? 'MariaDB' : 'MySQL'
  const inspector = mysqlLockInspector({ client: pool, tableName: table.table })
  const runsTable = runsTableName('mysql', options.runsTable)
  const [runsSchema, runsBare] = runsTable.includes('.')
    ? (runsTable.split('.') as [string, string])
    : [undefined, runsTable]

  return sqlStoreAdmin({
    kind,
    where,
    table,
    runLedger: mysqlRunLedger({ client: pool, tableName: runsTable }),
    runsTable,
    runsTableExists: async () =>
      (
        await rows(
          `SELECT 1 AS present FROM information_schema.tables WHERE table_schema = ${runsSchema === undefined ? 'DATABASE()' : '?'} AND table_name = ?`,
          [...(runsSchema === undefined ? [] : [runsSchema]), runsBare],
        )
      ).length > 0,
    runsSchema: () => mysqlRunsSchema({ tableName: runsTable }),
    runsColumnTypes: { timestamp: 'DATETIME(3) NULL', text: 'VARCHAR(255) CHARACTER SET utf8mb4 NULL' },
    // The server is known here: list's header names it.
    inspector: { ...inspector, clock: `the ${kind} server's clock` },
    query: rows,
    execute: async (sql, params) => {
      const [result] = await pool.query(sql, params)
      // mysql2 connects with CLIENT_FOUND_ROWS: affectedRows counts matched rows.
      return Number((result as { affectedRows?: unknown }).affectedRows ?? 0)
    },
    tableExists: async () =>
      (
        await rows(
          `SELECT 1 AS present FROM information_schema.tables WHERE table_schema = ${schemaOf} AND table_name = ?`,
          [...schemaParams, table.bareTable],
        )
      ).length > 0,
    columns: async () =>
      (
        await rows(
          `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = ${schemaOf} AND table_name = ? ORDER BY ordinal_position`,
          [...schemaParams, table.bareTable],
        )
      ).map((row) => ({ name: String(row.name), type: String(row.type).toLowerCase() })),
    primaryKey: async () =>
      (
        await rows(
          `SELECT column_name AS name FROM information_schema.key_column_usage WHERE constraint_name = 'PRIMARY' AND table_schema = ${schemaOf} AND table_name = ? ORDER BY ordinal_position`,
          [...schemaParams, table.bareTable],
        )
      ).map((row) => String(row.name)),
    expectedTypes: { name: ['varchar'], time: ['datetime', 'timestamp'], lockedBy: ['varchar'] },
    schema: () => mysqlSchema({ tableName: table.table, fencingTokens: table.fencing }),
    fencingColumnDdl: () => mysqlFencingColumnDdl({ tableName: table.table }),
    initCommand: `shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${table.table}`}${table.fencing ? ' --fencing-tokens' : ''}`,
    provider: (fencingTokens, lockedBy) =>
      mysqlLockProvider({ client: pool, tableName: table.table, fencingTokens, lockedBy }),
    version: async () =>
      `${kind} ${String((await rows('SELECT VERSION() AS version', []))[0]?.version ?? '?').replace(/-MariaDB.*$/i, '')}`,
    readClock: () =>
      timed('SELECT UTC_TIMESTAMP(6)', 1, async () => Number((await rows(`SELECT ${nowEpochMs(6)} AS ms`, []))[0]?.ms)),
    clockDependence:
      'the provider decides expiry on this clock (useDbTime, the default); host clocks matter only with useDbTime: false',
    close: () => pool.end(),
  })
}
