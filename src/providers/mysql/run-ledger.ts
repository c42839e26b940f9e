import { LockConfigurationError } from '../../core/errors.ts'
import type { RunLedger } from '../../core/run-ledger.ts'
import { runsTableName, type SqlRunLedgerOptions, sqlRunLedger } from '../../support/sql/sql-run-ledger.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { storeError } from '../../support/store-errors.ts'
import { checkPromiseClient, describeMysqlError, type MysqlClient, mysqlRunsSchema, PROVIDER } from './table.ts'

/** Options of {@link mysqlRunLedger}. */
export interface MysqlRunLedgerOptions extends SqlRunLedgerOptions {
  /** Your mysql2 promise Pool (the provider's). */
  client: MysqlClient
}

/**
 * The run history in a MySQL or MariaDB table (`shedlock_runs` by default; create it with
 * {@link mysqlRunsSchema} or `shedlock init`), apart from the lock table: give it to the executor,
 * `createLockingTaskExecutor(provider, { runLedger: mysqlRunLedger({ client: pool }) })`, and read
 * it with `history()`, `health()` and `tasks()`, or `shedlock history` and `shedlock status`.
 * Times are UTC `DATETIME(3)` values, whatever the session's time zone.
 *
 * @throws LockConfigurationError for a missing or callback-API client, a table name that is not a plain SQL identifier, or a bad `keep` or `maxAge`.
 */
export function mysqlRunLedger(options: MysqlRunLedgerOptions): RunLedger {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError(
      'mysql: pass your mysql2 promise Pool as { client } (an object with query(sql, values))',
    )
  }
  checkPromiseClient(client)
  const table = runsTableName(PROVIDER, options.tableName)
  const lockTableErrors = describeMysqlError(sqlTable(PROVIDER, { tableName: table }))
  const result = async (sql: string, params: readonly unknown[]): Promise<unknown> =>
    ((await client.query(sql, [...params])) as unknown[])[0]
  return sqlRunLedger(
    {
      provider: PROVIDER,
      query: async (sql, params) => (await result(sql, params)) as Record<string, unknown>[],
      execute: async (sql, params) =>
        Number(((await result(sql, params)) as { affectedRows?: unknown } | undefined)?.affectedRows ?? 0),
      timestamp: 'CAST(? AS DATETIME(3))',
      // mysql2's query() puts the values in the text: no placeholder limit, one packet of ~1 KB a row.
      maxBatch: 500,
      // The stored UTC wall-clock value, without the session's time zone.
      epochMs: (column) => `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${column}) / 1000)`,
      text: (column) => `CAST(${column} AS CHAR)`,
      describe: (error, action, name) => {
        const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown }
        return errno === 1146 || code === 'ER_NO_SUCH_TABLE'
          ? storeError(
              PROVIDER,
              action,
              name,
              `table ${table} does not exist. Create it with:\n${mysqlRunsSchema({ tableName: table })}`,
              error,
            )
          : lockTableErrors(error, action, name)
      },
    },
    table,
    options,
  )
}
