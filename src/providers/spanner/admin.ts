import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { sqlStoreAdmin } from '../../support/sql/sql-admin.ts'
import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { type SpannerDatabase, spannerFencingColumnDdl, spannerSchema } from './format.ts'
import { spannerLockInspector, spannerQuery, spannerExecute } from './inspector.ts'
import { spannerLockProvider } from './provider.ts'
import { spannerRunLedger, spannerRunsSchema } from './run-ledger.ts'

interface AdminDatabase extends SpannerDatabase {
  updateSchema(statements: string[]): Promise<[{ promise(): Promise<unknown> }, ...unknown[]]>
  close(): Promise<void> | void
}
interface SpannerClient {
  instance(id: string): { database(id: string): AdminDatabase }
  close(): void
}
interface SpannerModule {
  Spanner: new (options: { projectId: string }) => SpannerClient
}

const TIMEOUT_MS = 10_000

/** `shedlock schema spanner`: the DDL of the lock table, and of the run history's table. */
export function schema(table: string | undefined, options: { fencingTokens?: boolean } = {}): string {
  return `${spannerSchema({ tableName: table ?? 'shedlock', fencingTokens: options.fencingTokens ?? false })}\n-- The run history (optional; shedlock history, shedlock status):\n${spannerRunsSchema()}`
}

/**
 * Opens a `spanner://PROJECT/INSTANCE/DATABASE` URL with `@google-cloud/spanner`. Credentials come
 * from the client's usual sources (Application Default Credentials), never from the URL; with
 * `SPANNER_EMULATOR_HOST` set, the client talks to that emulator, and the command line turns the
 * client's multiplexed sessions off (unless set otherwise), which the emulator's transactions need.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.username !== '' || parsed.password !== '')
    throw new UsageError('spanner URLs take no credentials: the client reads Application Default Credentials')
  ownParameters(url, [])
  const [instanceId, databaseId, ...rest] = parsed.pathname.replace(/^\//, '').split('/').map(decodeURIComponent)
  const projectId = decodeURIComponent(parsed.hostname)
  if (projectId === '' || parsed.port !== '' || !instanceId || !databaseId || rest.some((part) => part !== ''))
    throw new UsageError(`${url.redacted} is not spanner://PROJECT/INSTANCE/DATABASE`)
  const emulator = process.env.SPANNER_EMULATOR_HOST
  if (emulator) {
    // @google-cloud/spanner 8 and 9 fail every read-write transaction on the emulator (1.5) with
    // multiplexed sessions on; and with no metadata server, the client's look for one only waits.
    process.env.GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS ??= 'false'
    process.env.GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW ??= 'false'
    process.env.METADATA_SERVER_DETECTION ??= 'none'
  }
  const table = sqlTable('spanner', {
    tableName: options.table ?? 'shedlock',
    fencingTokens: options.fencingTokens ?? false,
  })
  const { Spanner } = await importDriver<SpannerModule>('@google-cloud/spanner', '@google-cloud/spanner', 'spanner://')
  const client = new Spanner({ projectId })
  const database = client.instance(instanceId).database(databaseId)
  const query = spannerQuery(database)
  const dml = spannerExecute(database, TIMEOUT_MS)
  const where = `project ${projectId}, instance ${instanceId}, database ${databaseId}${emulator ? `, emulator at ${emulator}` : ''}`
  const close = async (): Promise<void> => {
    await database.close()
    client.close()
  }
  try {
    await withTimeout(query('SELECT 1 AS one', []), TIMEOUT_MS, { store: 'Spanner' })
  } catch (error) {
    await close().catch(() => {})
    throw new CliError(
      `cannot reach Cloud Spanner (${where}): ${firstLine(error)}; check the URL, the credentials${emulator ? ' and that the emulator runs' : ''}`,
      { cause: error },
    )
  }
  const exists = async (name: string): Promise<boolean> =>
    (
      await query(
        'SELECT COUNT(*) AS n FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
        at(name),
      )
    )[0]?.n === 1
  const runsTable = runsTableName('spanner', options.runsTable)

  return sqlStoreAdmin({
    kind: 'Cloud Spanner',
    where: `${url.redacted} (${where}${options.table === undefined ? '' : `, table ${table.table}`})`,
    table,
    inspector: spannerLockInspector({ database, tableName: table.table }),
    runLedger: spannerRunLedger({ database, tableName: runsTable }),
    runsTable,
    runsTableExists: () => exists(runsTable),
    runsSchema: () => spannerRunsSchema({ tableName: runsTable }),
    runsColumnTypes: { timestamp: 'TIMESTAMP', text: 'STRING(255)' },
    query,
    // DDL goes through the admin API (a long-running operation), DML through a transaction.
    execute: async (sql, params) => {
      if (!/^\s*(CREATE|ALTER|DROP)\s/i.test(sql)) return dml(sql, params)
      const [operation] = await database.updateSchema([sql.trim().replace(/;$/, '')])
      await operation.promise()
      return 0
    },
    tableExists: () => exists(table.table),
    columns: async () =>
      (
        await query(
          'SELECT COLUMN_NAME AS name, SPANNER_TYPE AS type FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION',
          at(table.table),
        )
      ).map((row) => ({ name: String(row.name), type: String(row.type).toLowerCase() })),
    primaryKey: async () =>
      (
        await query(
          "SELECT COLUMN_NAME AS name FROM INFORMATION_SCHEMA.INDEX_COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_TYPE = 'PRIMARY_KEY' ORDER BY ORDINAL_POSITION",
          at(table.table),
        )
      ).map((row) => String(row.name)),
    expectedTypes: {
      name: ['string(64)', 'string(255)', 'string(max)'],
      time: ['timestamp'],
      lockedBy: ['string(255)', 'string(max)'],
    },
    schema: () => spannerSchema({ tableName: table.table, fencingTokens: table.fencing }),
    fencingColumnDdl: () => spannerFencingColumnDdl({ tableName: table.table }),
    initCommand: `shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${table.table}`}${table.fencing ? ' --fencing-tokens' : ''}`,
    provider: (_fencingTokens, lockedBy) =>
      spannerLockProvider({ database, tableName: table.table, fencingTokens: table.fencing, lockedBy }),
    version: async () => `Cloud Spanner (${where})`,
    readClock: () =>
      timed('SELECT CURRENT_TIMESTAMP()', 1, async () =>
        Number((await query('SELECT UNIX_MICROS(CURRENT_TIMESTAMP()) / 1000 AS ms', []))[0]?.ms),
      ),
    clockDependence:
      'the provider decides expiry on this clock (useDbTime, the default); host clocks matter only with useDbTime: false',
    close,
  })
}

/** The schema and table of `name` (`schema.table` or `table`), as INFORMATION_SCHEMA names them. */
function at(name: string): [string, string] {
  const parts = name.split('.')
  return parts.length === 2 ? [parts[0]!, parts[1]!] : ['', name]
}
