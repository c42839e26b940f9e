import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import { sqlLockInspector } from '../../support/sql/sql-inspector.ts'
import { type SqlTableOptions, sqlTable } from '../../support/sql/sql-table.ts'
import {
  checkPromiseClient,
  dbNow,
  describeMysqlError,
  epochMs,
  exactText,
  type MysqlColumnType,
  type MysqlLockColumns,
  type MysqlClient,
  nowEpochMs,
  PROVIDER,
  readLockColumns,
} from './table.ts'

/** Options of {@link mysqlLockInspector}: the provider's client and table options. */
export interface MysqlLockInspectorOptions extends SqlTableOptions {
  /** Your mysql2 promise Pool (the provider's). */
  client: MysqlClient
  /**
   * The type of the `lock_until` column, as the provider's option of the same name. Given, the
   * inspector sends no query to find it.
   * @default read once from `information_schema.COLUMNS`, on the first call
   */
  columnType?: MysqlColumnType
}

/**
 * Reads and force-releases the locks of a MySQL or MariaDB lock table, in the provider's format
 * (and Java ShedLock's): for dashboards, health endpoints and operators. Times are read on the
 * database server's clock, the one the provider decides expiry on, and are right from a session in
 * any time zone, for both column types (see `MysqlColumnType`): a Java ShedLock `TIMESTAMP(3)`
 * column is read as the instant it holds, a `DATETIME(3)` column ({@link mysqlSchema}) as the UTC
 * wall-clock time the provider writes into it.
 *
 * The first call also reads the type of `lock_until` from `information_schema.COLUMNS` (one more
 * query, once; not kept while the table is missing; skipped when `columnType` is given).
 *
 * A force-release sets `lock_until` to the database's now and `locked_by` to `"released"` (the row
 * stays, as released rows do), so that the holder can no longer release, extend or re-hold it.
 * Names are looked up as the `name` column compares them: exactly under {@link mysqlSchema}'s
 * `utf8mb4_bin`; without case and trailing spaces under Java ShedLock's default collation, where
 * `get('Report')` finds the row of `report` (which is the lock the provider takes for either).
 *
 * ```ts
 * import mysql from 'mysql2/promise'
 * import { mysqlLockInspector } from 'shedlock/mysql'
 * const inspector = mysqlLockInspector({ client: mysql.createPool({ uri }) })
 * const { now, locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing or callback-API client, table or column names that
 *   are not plain SQL identifiers, and a `columnType` other than `'datetime'` or `'timestamp'`.
 */
export function mysqlLockInspector(options: MysqlLockInspectorOptions): LockInspector {
  const { client, columnType: givenType } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError(
      'mysql: pass your mysql2 promise Pool as { client } (an object with query(sql, values))',
    )
  }
  checkPromiseClient(client)
  const table = sqlTable(PROVIDER, options)
  if (givenType !== undefined && givenType !== 'datetime' && givenType !== 'timestamp') {
    throw new LockConfigurationError(
      `mysql: columnType must be 'datetime' or 'timestamp' (the type of the ${table.columns.lockUntil} column), got ${JSON.stringify(givenType)}`,
    )
  }

  // The type of lock_until, read once; concurrent first calls share one reading. Until it is
  // known (a missing table: the statement reports it), DATETIME, as the provider does.
  let known: MysqlColumnType | undefined = givenType
  let reading: Promise<MysqlLockColumns | undefined> | undefined
  const columnType = async (): Promise<MysqlColumnType> => {
    if (known) return known
    reading ??= readLockColumns((sql, values) => client.query(sql, values), table).finally(() => {
      reading = undefined
    })
    const found = await reading
    if (found) known = found.columnType
    return found?.columnType ?? 'datetime'
  }

  return sqlLockInspector({
    provider: PROVIDER,
    clock: "the MySQL/MariaDB server's clock",
    table,
    query: async (sql, params) => {
      const reply: unknown = await client.query(sql, [...params])
      const [rows, fields] = Array.isArray(reply) ? (reply as unknown[]) : []
      if (!Array.isArray(rows))
        throw new TypeError(
          'client.query(sql, values) did not resolve to [rows, fields]; pass a Pool from mysql2/promise (or pool.promise())',
        )
      // A pool with rowsAsArray answers arrays, in the order of the fields.
      const names = Array.isArray(fields) ? fields.map((field) => String((field as { name?: unknown }).name)) : []
      return rows.map((row: unknown) =>
        Array.isArray(row)
          ? Object.fromEntries(names.map((name, i) => [name, row[i]]))
          : (row as Record<string, unknown>),
      )
    },
    execute: async (sql, params) => {
      const reply: unknown = await client.query(sql, [...params])
      // mysql2 connects with CLIENT_FOUND_ROWS: affectedRows counts matched rows. A release always
      // changes the row it matches (locked_by becomes "released"), so either count is right.
      const affectedRows = Array.isArray(reply)
        ? (reply[0] as { affectedRows?: unknown } | null | undefined)?.affectedRows
        : undefined
      if (typeof affectedRows !== 'number') {
        throw new TypeError(
          'client.query(sql, values) did not resolve to [result, fields] with result.affectedRows; pass a Pool from mysql2/promise (or pool.promise())',
        )
      }
      return affectedRows
    },
    dbNow: async () => dbNow(await columnType()),
    nowMs: async () => {
      // Read here, so that the type is known before text() is asked, which cannot wait.
      await columnType()
      return nowEpochMs()
    },
    epochMs: async (column) => epochMs(await columnType(), column),
    // Called after dbNow(), nowMs() or epochMs() of the same statement have read the type.
    text: (column) => exactText(known ?? 'datetime', column),
    describe: describeMysqlError(table),
  })
}
