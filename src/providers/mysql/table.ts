import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { CONCURRENCY_RETRIES } from '../../support/sql/concurrency-retry.ts'
import {
  addFencingColumnDdl,
  lacksFencingColumn,
  missingFencingColumn,
  type SqlTable,
  type SqlTableOptions,
  sqlTable,
  tableOptions,
} from '../../support/sql/sql-table.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
  SOCKET_FAILURE_CODES,
} from '../../support/store-errors.ts'

// Java ShedLock's table in MySQL and MariaDB: its DDL, how its two column types hold time (the
// now to compare with, epoch milliseconds of a column), how the provider and the inspector find
// out which type a table has, and what the database's errors mean. The provider, the inspector
// and the CLI read it from here.

/** The provider's name, as messages and diagnostics give it. */
export const PROVIDER = 'mysql'

/**
 * How the `lock_until` and `locked_at` columns hold time:
 * - `'datetime'` ({@link mysqlSchema}'s `DATETIME(3)`): a wall-clock value, stored as written. The
 *   provider writes UTC (`UTC_TIMESTAMP(3)`), whatever the session time zone.
 * - `'timestamp'` (Java ShedLock's `TIMESTAMP(3)`): an instant, which MySQL converts from and to
 *   the session time zone. The provider writes the session's own now (`NOW(3)`, or
 *   `FROM_UNIXTIME()` of the app clock), so that sessions in different time zones agree.
 */
export type MysqlColumnType = 'datetime' | 'timestamp'

// The column types' "now": the statement's start time, the same value everywhere in one
// statement. UTC_TIMESTAMP(3) does not depend on the session time zone, which suits DATETIME
// columns (stored as written). NOW(3) is in the session's zone, which is how MySQL reads and
// writes TIMESTAMP columns: it stores the true instant, whatever the zone.
const UTC_NOW = 'UTC_TIMESTAMP(3)'
const SESSION_NOW = 'NOW(3)'

/** The database's now as a column of `type` holds it: what `lock_until` is compared with and set to. */
export function dbNow(type: MysqlColumnType): string {
  return type === 'timestamp' ? SESSION_NOW : UTC_NOW
}

/**
 * Epoch milliseconds of a DATETIME value holding UTC wall-clock time, as a BIGINT (mysql2 returns
 * a number). TIMESTAMPDIFF from the epoch is arithmetic on the value as written, with no session
 * time zone involved; UNIX_TIMESTAMP() would read it in the session's zone instead.
 */
function utcEpochMs(expression: string): string {
  return `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${expression}) DIV 1000)`
}

/**
 * The database's now in epoch milliseconds, the same instant as {@link dbNow} of either type (both
 * are the statement's start), read without the session time zone. `precision` is that of the
 * reading: 3 for what the provider compares with, 6 for a clock reading.
 */
export function nowEpochMs(precision: 3 | 6 = 3): string {
  return utcEpochMs(`UTC_TIMESTAMP(${precision})`)
}

/**
 * A lock time column of `type` in epoch milliseconds, whatever the session time zone.
 * TIMESTAMP: `UNIX_TIMESTAMP(column)`, which MySQL and MariaDB answer from the stored instant,
 * without the session zone's conversion (so also in a repeated daylight-saving hour). DATETIME: the
 * UTC wall-clock value the provider writes, by arithmetic.
 */
export function epochMs(type: MysqlColumnType, column: string): string {
  return type === 'timestamp' ? `CAST(UNIX_TIMESTAMP(${column}) * 1000 AS SIGNED)` : utcEpochMs(column)
}

/**
 * A lock time column of `type` as text that names the stored value exactly, the same from any
 * session: the DATETIME value as written; the TIMESTAMP instant as epoch seconds (the session
 * zone's rendering would differ between sessions, and repeat in an autumn hour).
 */
export function exactText(type: MysqlColumnType, column: string): string {
  return type === 'timestamp' ? `CAST(UNIX_TIMESTAMP(${column}) AS CHAR)` : `CAST(${column} AS CHAR)`
}

/** The last instant a TIMESTAMP column holds (MySQL 8, MariaDB before 11.5). */
export const TIMESTAMP_END: { readonly ms: number; readonly why: string } = {
  ms: Date.UTC(2038, 0, 19, 3, 14, 7, 999),
  why: 'a TIMESTAMP column ends at 2038-01-19T03:14:07.999Z; DATETIME(3) columns, as in mysqlSchema(), go to 9999',
}

/** The lock table's columns as {@link readLockColumns} found them. */
export interface MysqlLockColumns {
  /** The type of `lock_until`: TIMESTAMP, or anything else (DATETIME) read as UTC wall-clock time. */
  readonly columnType: MysqlColumnType
  /** The declared length of the `name` column in characters; `undefined` when it has none (TEXT). */
  readonly maxNameLength: number | undefined
  /** The `name` column for messages, e.g. `column name of shedlock, varchar(64)`. */
  readonly nameColumn: string
  /** Whether the server is MariaDB (its `VERSION()` says so), which takes `SET STATEMENT … FOR`. */
  readonly mariadb: boolean
}

/** The client call {@link readLockColumns} makes: mysql2/promise's `query(sql, values)`. */
export type MysqlQuery = (sql: string, values: unknown[]) => Promise<unknown>

/**
 * Reads the types of the `name` and `lock_until` columns from `information_schema.COLUMNS`, one
 * query. Resolves to `undefined` when the table or the columns are missing (or the table is a
 * temporary one, which information_schema does not list): the caller's own statement then says
 * what is wrong.
 * @throws TypeError when the client does not answer like mysql2/promise (`[rows, fields]`).
 */
export async function readLockColumns(query: MysqlQuery, t: SqlTable): Promise<MysqlLockColumns | undefined> {
  const { name, lockUntil } = t.columns
  const reply: unknown = await query(
    'SELECT COLUMN_NAME AS c, DATA_TYPE AS t, CHARACTER_MAXIMUM_LENGTH AS n, COLUMN_TYPE AS d, VERSION() AS v FROM information_schema.COLUMNS ' +
      'WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME IN (?, ?)',
    [t.schema ?? null, t.bareTable, name, lockUntil],
  )
  // A client that does not answer like mysql2/promise fails here, before anything is written.
  const rows: unknown = Array.isArray(reply) ? reply[0] : undefined
  if (!Array.isArray(rows)) {
    throw new TypeError(
      'client.query(sql, values) did not resolve to [rows, fields]; pass a Pool from mysql2/promise (or pool.promise())',
    )
  }
  // Rows are objects, or arrays with the pool's rowsAsArray option. Column names compare
  // without case in MySQL.
  const columns = new Map<string, { type: string; length: unknown; declared: string }>()
  let version = ''
  for (const row of rows as unknown[]) {
    const [c, type, length, declared, v] = Array.isArray(row)
      ? row
      : [
          (row as { c?: unknown }).c,
          (row as { t?: unknown }).t,
          (row as { n?: unknown }).n,
          (row as { d?: unknown }).d,
          (row as { v?: unknown }).v,
        ]
    columns.set(String(c).toLowerCase(), { type: String(type).toLowerCase(), length, declared: String(declared) })
    version = String(v)
  }
  const nameColumn = columns.get(name.toLowerCase())
  const untilColumn = columns.get(lockUntil.toLowerCase())
  if (!nameColumn || !untilColumn) return undefined
  const bounded =
    (nameColumn.type === 'varchar' || nameColumn.type === 'char') &&
    nameColumn.length !== null &&
    nameColumn.length !== undefined
  return {
    columnType: untilColumn.type === 'timestamp' ? 'timestamp' : 'datetime',
    maxNameLength: bounded ? Number(nameColumn.length) : undefined,
    nameColumn: `column ${name} of ${t.table}, ${nameColumn.declared}`,
    mariadb: /mariadb/i.test(version),
  }
}

/**
 * DDL for the lock table in MySQL 8 and MariaDB 10.5+. Idempotent (`IF NOT EXISTS`).
 *
 * Java ShedLock's README uses `TIMESTAMP(3)` columns; this uses `DATETIME(3)`, which stores the
 * UTC wall-clock values the provider writes as they are, with no session time-zone conversion,
 * so that a daylight-saving gap or repeated hour in the session's zone cannot reject or shift a
 * write (Java ShedLock issue #1876), and deadlines may go past 2038. A table with `TIMESTAMP(3)`
 * columns works too, from sessions in any time zone (see {@link MysqlColumnType}). With
 * `fencingTokens: true`, also the nullable `fencing_token BIGINT` column (for an existing table:
 * {@link mysqlFencingColumnDdl}).
 *
 * ```ts
 * import { mysqlSchema } from 'shedlock/mysql'
 * await pool.query(mysqlSchema()) // CREATE TABLE IF NOT EXISTS shedlock (...)
 * ```
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function mysqlSchema(options: SqlTableOptions = {}): string {
  const { table, columns: c, fencing, fencingColumn } = sqlTable(PROVIDER, options)
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    // utf8mb4_bin compares names exactly: the default collation is case-insensitive and would
    // make "Report" and "report" one lock.
    `  ${c.name} VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,`,
    // DATETIME(3), not TIMESTAMP(3): UTC stored as is, no time-zone conversion, no DST gaps.
    `  ${c.lockUntil} DATETIME(3) NOT NULL,`,
    `  ${c.lockedAt} DATETIME(3) NOT NULL,`,
    `  ${c.lockedBy} VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,`,
    ...(fencing ? [`  ${fencingColumn} BIGINT NULL,`] : []),
    `  PRIMARY KEY (${c.name})`,
    ');',
  ].join('\n')
}

/**
 * The `ALTER TABLE` that adds the fencing token column to an existing lock table, for
 * `fencingTokens: true`: `ALTER TABLE shedlock ADD COLUMN fencing_token BIGINT NULL;`.
 */
export function mysqlFencingColumnDdl(options: SqlTableOptions = {}): string {
  return addFencingColumnDdl(sqlTable(PROVIDER, options))
}

/** ER_LOCK_DEADLOCK or ER_LOCK_WAIT_TIMEOUT: another statement was writing the same row. */
export function isConcurrencyFailure(error: unknown): boolean {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown }
  return errno === 1213 || errno === 1205 || code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT'
}

/**
 * Whether an acquire's error may hide a commit: anything but the server's own error reply (an
 * `errno` with a `sqlState`), which means the statement rolled back. A connection lost or reset
 * (`PROTOCOL_CONNECTION_LOST`, `ECONNRESET`), a client-side timeout: it may have committed.
 */
export function mysqlReplyLost(error: unknown): boolean {
  const { errno, sqlState } = (error ?? {}) as { errno?: unknown; sqlState?: unknown }
  return !(typeof errno === 'number' && errno > 0 && typeof sqlState === 'string')
}

/** A duplicate primary key (ER_DUP_ENTRY): the row an INSERT would add is already there. */
export function isDuplicateKey(error: unknown): boolean {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown }
  return errno === 1062 || code === 'ER_DUP_ENTRY'
}

const UNREACHABLE = new Set([
  ...SOCKET_FAILURE_CODES,
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'ER_CLIENT_INTERACTION_TIMEOUT',
])

/** What a MySQL or MariaDB error means for the lock and what to do about it. */
export function describeMysqlError(t: SqlTable): DescribeStoreError {
  return (error, action, lockName) => {
    const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown }
    // Driver messages do not carry passwords, but a connection URL in some wrapper's message might.
    const detail = redactUrlPasswords(messageOf(error))
    let advice: string
    if (errno === 1146 || code === 'ER_NO_SUCH_TABLE') {
      advice = `table ${t.table} does not exist. Create it with:\n${mysqlSchema(tableOptions(t))}`
    } else if ((errno === 1054 || code === 'ER_BAD_FIELD_ERROR') && lacksFencingColumn(t, detail)) {
      advice = missingFencingColumn(t, addFencingColumnDdl(t))
    } else if (errno === 1054 || code === 'ER_BAD_FIELD_ERROR') {
      advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
    } else if (errno === 1406 || code === 'ER_DATA_TOO_LONG') {
      advice = `the name is too long for the ${t.columns.name} column (${detail}); use a shorter lock name or widen the column`
    } else if (isConcurrencyFailure(error)) {
      advice = `a deadlock or lock wait timeout with concurrent lock statements persisted through ${CONCURRENCY_RETRIES + 1} attempts (${detail}); ${outcomeOf(action)}`
    } else if (
      errno === 1290 ||
      errno === 1792 ||
      errno === 1836 ||
      code === 'ER_OPTION_PREVENTS_STATEMENT' ||
      code === 'ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION' ||
      code === 'ER_READ_ONLY_MODE'
    ) {
      advice = `the server is read-only (${detail}): a replica, or a primary that was demoted; ${outcomeOf(action)}. Point the pool at the primary (after a failover, at the promoted replica)`
    } else if (errno === 1292 || code === 'ER_TRUNCATED_WRONG_VALUE') {
      advice = `the database rejected a timestamp (${detail}); TIMESTAMP columns reject times in a daylight-saving gap of the session time zone: use DATETIME(3) columns (see mysqlSchema) or a UTC session time zone`
    } else if (detail === 'Pool is closed.') {
      advice = `the pool was closed with end() (${detail}); ${outcomeOf(action)}. Pass a pool that stays open while locks are used`
    } else if (typeof code === 'string' && UNREACHABLE.has(code)) {
      advice = `MySQL is unreachable (${detail}); ${outcomeOf(action)}. Check the server and the pool; the provider recovers by itself once it is back`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}

/**
 * The part of a mysql2 3.x promise Pool (`mysql2/promise`) that this provider calls. We don't
 * import mysql2: any client whose `query(sql, values)` resolves to `[result, fields]`, with
 * `result.affectedRows` and `result.insertId` for writes, works. Pass a Pool, so that lock
 * statements never join a transaction you have open on one of its connections.
 */
export interface MysqlClient {
  query(sql: string, values: unknown[]): Promise<[result: unknown, fields: unknown]>
}

/** @deprecated Renamed to {@link MysqlClient}; this alias goes in the next major. */
export type MysqlQueryable = MysqlClient

/**
 * Refuses what is not a promise client, before anything is sent: mysql2's callback API runs the
 * statement and returns a `Query` emitter, not a promise, so an acquire would write the row and
 * then fail to read the reply, leaving the lock held until `lockAtMostFor`. Internal: the
 * inspector checks its client with it too.
 * @throws LockConfigurationError for a callback-API client.
 */
export function checkPromiseClient(client: MysqlClient): void {
  // A callback API declares query(sql, values, callback): mysql2's callback Pool, Connection,
  // PoolConnection and PoolCluster namespace, the "mysql" package. Their promise wrappers declare
  // query(sql, values). Only the declaration is read: nothing is called, not even valueOf() of
  // a proxy's answer.
  const declared: unknown = client.query.length
  if (typeof declared !== 'number' || declared < 3) return
  // mysql2's callback objects have promise(), which returns the wrapper; the wrappers do not.
  if (typeof (client as { promise?: unknown }).promise === 'function') {
    throw new LockConfigurationError(
      'mysql: { client } is a mysql2 callback-API pool or connection (createPool() or createConnection() from "mysql2"), whose query() takes a callback and returns no promise; pass client.promise(), or a pool from "mysql2/promise"',
    )
  }
  throw new LockConfigurationError(
    `mysql: { client }.query takes ${declared} parameters, like a callback API's query(sql, values, callback); pass a pool from "mysql2/promise" (or pool.promise() of a mysql2 pool), whose query(sql, values) returns a promise`,
  )
}

/**
 * DDL of the run history's table in MySQL 8 and MariaDB 10.5+ (see `mysqlRunLedger`): one row per
 * run, kept apart from the lock table; times are UTC in `DATETIME(3)` columns. Idempotent.
 */
export function mysqlRunsSchema(options: { tableName?: string } = {}): string {
  const table = runsTableName(PROVIDER, options.tableName)
  const bare = table.split('.').at(-1)!
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    '  id VARCHAR(36) NOT NULL PRIMARY KEY,',
    '  name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,',
    '  slot DATETIME(3) NULL,',
    '  node VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,',
    '  started_at DATETIME(3) NOT NULL,',
    '  finished_at DATETIME(3) NULL,',
    '  outcome VARCHAR(16) NOT NULL,',
    '  duration_ms BIGINT NULL,',
    '  error_type VARCHAR(100) NULL,',
    '  error_message VARCHAR(500) CHARACTER SET utf8mb4 NULL,',
    '  fencing_token BIGINT NULL,',
    '  next_fire_at DATETIME(3) NULL,',
    '  triggered_by VARCHAR(255) CHARACTER SET utf8mb4 NULL,',
    `  INDEX ${bare}_name_started (name, started_at)`,
    ');',
  ].join('\n')
}
