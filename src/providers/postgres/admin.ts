import { CliError, firstLine } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { sqlStoreAdmin } from '../../support/sql/sql-admin.ts'
import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import type { StoreUrl } from '../../support/store-url.ts'
import { postgresLockInspector } from './inspector.ts'
import { postgresLockProvider } from './provider.ts'
import { postgresRunLedger } from './run-ledger.ts'
import { epochMs, numbered, postgresRunsSchema, postgresFencingColumnDdl, postgresSchema } from './table.ts'

interface PgPool {
  query(
    text: string,
    values?: readonly unknown[],
  ): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>
  on(event: 'error', listener: (error: Error) => void): unknown
  end(): Promise<void>
}
interface PgModule {
  default: { Pool: new (config: { connectionString: string; max: number; connectionTimeoutMillis: number }) => PgPool }
}

/** `shedlock schema postgres`: the DDL of the lock table, and of the run history's table. */
export function schema(table: string | undefined, options: { fencingTokens?: boolean } = {}): string {
  return `${postgresSchema({ tableName: table ?? 'shedlock', fencingTokens: options.fencingTokens ?? false })}\n-- The run history (optional; shedlock history, shedlock status):\n${postgresRunsSchema()}`
}

/** Opens a `postgres://` or `postgresql://` URL with `pg` (node-postgres). */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const table = sqlTable('postgres', {
    tableName: options.table ?? 'shedlock',
    fencingTokens: options.fencingTokens ?? false,
  })
  const pg = await importDriver<PgModule>('pg', 'pg', 'postgres://')
  const pool = new pg.default.Pool({ connectionString: url.raw, max: 2, connectionTimeoutMillis: 10_000 })
  // An idle connection that breaks emits 'error' on the pool; without a listener it would crash the CLI.
  pool.on('error', () => {})
  const query = async (sql: string, params: readonly unknown[]) => (await pool.query(numbered(sql), params)).rows
  const where = options.table === undefined ? url.redacted : `${url.redacted} (table ${table.table})`
  try {
    await pool.query('SELECT 1')
  } catch (error) {
    await pool.end().catch(() => {})
    throw new CliError(
      `cannot reach PostgreSQL at ${url.redacted}: ${firstLine(error)}; check the URL, the server and its pg_hba.conf`,
      { cause: error },
    )
  }
  const schemaOf = (): string => (table.schema === undefined ? 'current_schema()' : '?')
  const schemaParams = (): string[] => (table.schema === undefined ? [] : [table.schema])

  const runsTable = runsTableName('postgres', options.runsTable)
  return sqlStoreAdmin({
    kind: 'PostgreSQL',
    where,
    table,
    inspector: postgresLockInspector({ client: pool, tableName: table.table }),
    runLedger: postgresRunLedger({ client: pool, tableName: runsTable }),
    runsTable,
    runsTableExists: async () =>
      (await query('SELECT to_regclass(?) IS NOT NULL AS present', [runsTable]))[0]?.present === true,
    runsSchema: () => postgresRunsSchema({ tableName: runsTable }),
    runsColumnTypes: { timestamp: 'TIMESTAMP NULL', text: 'VARCHAR(255) NULL' },
    query,
    execute: async (sql, params) => (await pool.query(numbered(sql), params)).rowCount ?? 0,
    tableExists: async () =>
      (await query('SELECT to_regclass(?) IS NOT NULL AS present', [table.table]))[0]?.present === true,
    columns: async () =>
      (
        await query(
          `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = ${schemaOf()} AND table_name = ? ORDER BY ordinal_position`,
          [...schemaParams(), table.bareTable.toLowerCase()],
        )
      ).map((row) => ({ name: String(row.name), type: String(row.type).toLowerCase() })),
    primaryKey: async () =>
      (
        await query(
          `SELECT k.column_name AS name FROM information_schema.table_constraints c JOIN information_schema.key_column_usage k ` +
            `ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema AND k.table_name = c.table_name ` +
            `WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = ${schemaOf()} AND c.table_name = ? ORDER BY k.ordinal_position`,
          [...schemaParams(), table.bareTable.toLowerCase()],
        )
      ).map((row) => String(row.name)),
    expectedTypes: {
      name: ['character varying', 'text'],
      time: ['timestamp without time zone'],
      lockedBy: ['character varying', 'text'],
    },
    schema: () => postgresSchema({ tableName: table.table, fencingTokens: table.fencing }),
    fencingColumnDdl: () => postgresFencingColumnDdl({ tableName: table.table }),
    initCommand: `shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${table.table}`}${table.fencing ? ' --fencing-tokens' : ''}`,
    provider: (fencingTokens, lockedBy) =>
      postgresLockProvider({ client: pool, tableName: table.table, fencingTokens, lockedBy }),
    version: async () => `PostgreSQL ${String((await query('SHOW server_version', []))[0]?.server_version ?? '?')}`,
    readClock: () =>
      timed('SELECT clock_timestamp()', 1, async () =>
        Number((await query(`SELECT ${epochMs('clock_timestamp()')} AS ms`, []))[0]?.ms),
      ),
    clockDependence:
      'the provider decides expiry on this clock (useDbTime, the default); host clocks matter only with useDbTime: false',
    close: () => pool.end(),
  })
}
