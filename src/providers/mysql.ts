import { setTimeout as sleep } from 'node:timers/promises'
import { systemClock } from '../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { type DescribeSqlError, lockAtLeastAnchor, messageOf, type SqlAccessor, type SqlLockProviderOptions, sqlLockProvider } from '../support/sql/sql-lock-provider.ts'
import { type SqlTable, type SqlTableOptions, sqlTable, utcTimestamp } from '../support/sql/sql-table.ts'

/**
 * The part of a mysql2 3.x promise Pool (`mysql2/promise`) that this provider calls. We don't
 * import mysql2: any client whose `query(sql, values)` resolves to `[result, fields]`, with
 * `result.affectedRows` and `result.insertId` for writes, works. Pass a Pool, so that lock
 * statements never join a transaction you have open on one of its connections.
 */
export interface MysqlQueryable {
  query(sql: string, values: unknown[]): Promise<[result: unknown, fields: unknown]>
}

/** Options of {@link mysqlLockProvider}. */
export interface MysqlLockProviderOptions extends SqlLockProviderOptions {
  /** Your mysql2 promise Pool. The provider never opens connections of its own. */
  client: MysqlQueryable
}

const PROVIDER = 'mysql'
// UTC_TIMESTAMP(3) is the statement's start time in UTC, the same value everywhere in one
// statement, and does not depend on the session time zone.
const DB_NOW = 'UTC_TIMESTAMP(3)'
// Reported as insertId by the statements below when they found the row but must not count as a
// success. An arbitrary constant below 2^31: the lock table has no AUTO_INCREMENT column, and
// even one would take over a billion attempts to reach it.
const MARK = 1_518_500_249
// Retries of unlock and extend after a deadlock or a lock wait timeout.
const RETRIES = 3

/** A piece of SQL and the values of its `?` placeholders, in order. */
interface Fragment {
  sql: string
  values: unknown[]
}

/**
 * Locks in a MySQL 8 or MariaDB 10.5+ table in Java ShedLock's format (create it with
 * {@link mysqlSchema}; a table Java ShedLock created, with `TIMESTAMP(3)` columns, also works).
 * The `name` column must be the table's primary key: the upsert relies on it to find the row.
 *
 * One `INSERT … ON DUPLICATE KEY UPDATE` per acquire attempt that takes the row over only if it
 * expired, one `UPDATE` per release; unlock and extend only touch the row this acquisition holds.
 * Extensible. Uses `query` (text protocol, one round trip per statement), not `execute`.
 *
 * A lock name longer than the `name` column rejects with `LockProviderError` in strict mode, the
 * default since MySQL 5.7 and MariaDB 10.2.4; without strict mode (`STRICT_TRANS_TABLES` or
 * `STRICT_ALL_TABLES` in `sql_mode`) MySQL silently truncates long names, so two names that share
 * their first 64 characters become one lock. A name ending with a space rejects with
 * `LockConfigurationError`: MySQL compares `VARCHAR` values without trailing spaces (PAD SPACE
 * collations such as `utf8mb4_bin`), so it would share the row of the name without them.
 *
 * ```ts
 * import mysql from 'mysql2/promise'
 * import { mysqlLockProvider } from 'shedlock/mysql'
 * const provider = mysqlLockProvider({ client: mysql.createPool({ uri }) })
 * ```
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function mysqlLockProvider(options: MysqlLockProviderOptions): ExtensibleLockProvider {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError('mysql: pass your mysql2 promise Pool as { client } (an object with query(sql, values))')
  }
  const t = sqlTable(PROVIDER, options)
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const clock = options.clock ?? systemClock
  const useDbTime = options.useDbTime ?? true

  const run = async (sql: string, values: unknown[]): Promise<{ affectedRows: number; marked: boolean }> => {
    const reply: unknown = await client.query(sql, values)
    const result: unknown = Array.isArray(reply) ? reply[0] : undefined
    const affectedRows = (result as { affectedRows?: unknown } | null | undefined)?.affectedRows
    if (typeof affectedRows !== 'number') {
      throw new TypeError('client.query(sql, values) did not resolve to [result, fields] with result.affectedRows; pass a Pool from mysql2/promise (or pool.promise())')
    }
    // insertId may be a number, a bigint or a string (supportBigNumbers); MARK fits all three.
    return { affectedRows, marked: Number((result as { insertId?: unknown }).insertId) === MARK }
  }

  // Deadlocks and lock wait timeouts roll back only the failed statement. Unlock and extend are
  // idempotent and must not be lost to them (a lost unlock keeps the lock until lockAtMostFor),
  // so they are retried; Java ShedLock retries its unlock the same way.
  const retrying = async <T>(attempt: () => Promise<T>): Promise<T> => {
    for (let retry = 0; ; retry++) {
      try {
        return await attempt()
      } catch (error) {
        if (retry >= RETRIES || !isConcurrencyFailure(error)) throw error
        await sleep(Math.round((retry + 1) * (5 + Math.random() * 20)))
      }
    }
  }

  const acquire = async (lockName: string, owner: string, now: Fragment, until: Fragment): Promise<boolean> => {
    const expired = `${lockUntil} <= ${now.sql}`
    // MySQL evaluates ON DUPLICATE KEY UPDATE assignments left to right, and later ones see the
    // values earlier ones assigned; lock_until is assigned last so that every IF tests the old
    // value (also right under MariaDB's SIMULTANEOUS_ASSIGNMENT mode). VALUES() is deprecated in
    // MySQL 8.0.20, so the parameters are repeated instead.
    //
    // Success is not readable from affectedRows alone: mysql2 connects with CLIENT_FOUND_ROWS, so
    // an upsert that leaves a held row unchanged reports 1, like an insert (without the flag it
    // reports 0). The held branch therefore calls LAST_INSERT_ID(MARK), which makes the server
    // report MARK as this statement's insertId; an insert reports 0, a takeover 0 (or the row's
    // AUTO_INCREMENT value) and affectedRows 2. LAST_INSERT_ID(expr) only marks the statement
    // that calls it: later statements on the same pooled connection report their own insertId.
    const sql =
      `INSERT INTO ${t.table} (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}) VALUES (?, ${until.sql}, ${now.sql}, ?) ` +
      `ON DUPLICATE KEY UPDATE ${lockedBy} = IF(${expired}, ?, IF(LAST_INSERT_ID(${MARK}) = ${MARK}, ${lockedBy}, ${lockedBy})), ` +
      `${lockedAt} = IF(${expired}, ${now.sql}, ${lockedAt}), ` +
      `${lockUntil} = IF(${expired}, ${until.sql}, ${lockUntil})`
    const values = [lockName, ...until.values, ...now.values, owner, ...now.values, owner, ...now.values, ...now.values, ...now.values, ...until.values]
    try {
      const { affectedRows, marked } = await run(sql, values)
      return affectedRows > 0 && !marked
    } catch (error) {
      // Concurrent upserts of one key can deadlock in InnoDB (or time out waiting): another
      // contender is writing the row right now, so this attempt did not get the lock. Java
      // ShedLock also answers "not locked" to concurrency failures on acquire.
      if (isConcurrencyFailure(error)) return false
      throw error
    }
  }

  const extend = async (lockName: string, owner: string, now: Fragment, until: Fragment): Promise<boolean> => {
    // The same value twice within one millisecond leaves the row unchanged, which reports
    // affectedRows 0 without CLIENT_FOUND_ROWS; the marker tells that the row matched anyway.
    const sql =
      `UPDATE ${t.table} SET ${lockUntil} = IF(LAST_INSERT_ID(${MARK}) = ${MARK}, ${until.sql}, ${until.sql}) ` +
      `WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ${now.sql}`
    const { affectedRows, marked } = await retrying(() => run(sql, [...until.values, ...until.values, lockName, owner, ...now.values]))
    return affectedRows > 0 || marked
  }

  const unlock = async (lockName: string, owner: string, until: Fragment): Promise<void> => {
    await retrying(() => run(`UPDATE ${t.table} SET ${lockUntil} = ${until.sql} WHERE ${name} = ? AND ${lockedBy} = ?`, [...until.values, lockName, owner]))
  }

  const dbNow: Fragment = { sql: DB_NOW, values: [] }
  const dbIn = (ms: number): Fragment => ({ sql: `TIMESTAMPADD(MICROSECOND, ?, ${DB_NOW})`, values: [Math.round(ms * 1000)] })
  // Timestamps go over the wire as UTC text, never as Date objects, which mysql2 would convert
  // with its own `timezone` option.
  const at = (ms: number): Fragment => ({ sql: 'CAST(? AS DATETIME(3))', values: [utcTimestamp(ms)] })

  const accessor: SqlAccessor = useDbTime
    ? {
        acquire: (c, owner) => acquire(c.name, owner, dbNow, dbIn(c.lockAtMostFor)),
        extend: (next, owner) => extend(next.name, owner, dbNow, dbIn(next.lockAtMostFor)),
        unlock: (current, owner, acquired) => {
          const anchor = lockAtLeastAnchor(current, acquired, clock)
          return unlock(current.name, owner, {
            sql: `GREATEST(TIMESTAMPADD(MICROSECOND, ?, ${anchor.from === 'lockedAt' ? lockedAt : DB_NOW}), ${DB_NOW})`,
            values: [Math.round(anchor.seconds * 1e6)],
          })
        },
      }
    : {
        acquire: (c, owner) => acquire(c.name, owner, at(clock.now()), at(c.lockAtMostUntil.getTime())),
        extend: (next, owner) => extend(next.name, owner, at(clock.now()), at(next.lockAtMostUntil.getTime())),
        unlock: (current, owner) => unlock(current.name, owner, at(Math.max(clock.now(), current.lockAtLeastUntil.getTime()))),
      }
  const provider = sqlLockProvider(PROVIDER, accessor, options, describeMysqlError(t))
  return {
    name: provider.name,
    lock(configuration) {
      // VARCHAR comparisons under PAD SPACE collations (utf8mb4_bin, and Java ShedLock's tables)
      // ignore trailing spaces: "report " would find and take the row of "report".
      if (configuration.name.endsWith(' ')) {
        return Promise.reject(
          new LockConfigurationError(
            `Lock name ${JSON.stringify(configuration.name)} ends with a space: MySQL compares names without their trailing spaces, so it would be the same lock as ${JSON.stringify(configuration.name.trimEnd())}; remove the trailing space`,
          ),
        )
      }
      return provider.lock(configuration)
    },
  }
}

/**
 * DDL for the lock table in MySQL 8 and MariaDB 10.5+. Idempotent (`IF NOT EXISTS`).
 *
 * Java ShedLock's README uses `TIMESTAMP(3)` columns; this uses `DATETIME(3)`, which stores the
 * UTC wall-clock values the provider writes as they are, with no session time-zone conversion,
 * so that a daylight-saving gap in the session's zone cannot reject a write (Java ShedLock issue
 * #1876). A table with `TIMESTAMP(3)` columns works too.
 */
export function mysqlSchema(options: SqlTableOptions = {}): string {
  const { table, columns: c } = sqlTable(PROVIDER, options)
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    // utf8mb4_bin compares names exactly: the default collation is case-insensitive and would
    // make "Report" and "report" one lock.
    `  ${c.name} VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,`,
    // DATETIME(3), not TIMESTAMP(3): UTC stored as is, no time-zone conversion, no DST gaps.
    `  ${c.lockUntil} DATETIME(3) NOT NULL,`,
    `  ${c.lockedAt} DATETIME(3) NOT NULL,`,
    `  ${c.lockedBy} VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,`,
    `  PRIMARY KEY (${c.name})`,
    ');',
  ].join('\n')
}

/** ER_LOCK_DEADLOCK or ER_LOCK_WAIT_TIMEOUT: another statement was writing the same row. */
function isConcurrencyFailure(error: unknown): boolean {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown }
  return errno === 1213 || errno === 1205 || code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT'
}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'ER_CLIENT_INTERACTION_TIMEOUT',
])

function describeMysqlError(t: SqlTable): DescribeSqlError {
  return (error, action, lockName) => {
    const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown }
    // Driver messages do not carry passwords, but a connection URL in some wrapper's message might.
    const detail = messageOf(error).replace(/(\/\/[^:/@\s]*):[^@\s]*@/g, '$1:***@')
    let advice: string
    if (errno === 1146 || code === 'ER_NO_SUCH_TABLE') {
      advice = `table ${t.table} does not exist. Create it with:\n${mysqlSchema({ tableName: t.table, columnNames: t.columns })}`
    } else if (errno === 1054 || code === 'ER_BAD_FIELD_ERROR') {
      advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
    } else if (errno === 1406 || code === 'ER_DATA_TOO_LONG') {
      advice = `the name is too long for the ${t.columns.name} column (${detail}); use a shorter lock name or widen the column`
    } else if (errno === 1292 || code === 'ER_TRUNCATED_WRONG_VALUE') {
      advice = `the database rejected a timestamp (${detail}); TIMESTAMP columns reject times in a daylight-saving gap of the session time zone: use DATETIME(3) columns (see mysqlSchema) or a UTC session time zone`
    } else if (detail === 'Pool is closed.') {
      advice = `the pool was closed with end() (${detail}); the task was not run. Pass a pool that stays open while locks are used`
    } else if (typeof code === 'string' && UNREACHABLE.has(code)) {
      advice = `MySQL is unreachable (${detail}); the task was not run. Check the server and the pool; the provider recovers by itself once it is back`
    } else {
      advice = detail
    }
    return new LockProviderError(`mysql: could not ${action} lock "${lockName}": ${advice}`, { cause: error, provider: PROVIDER, lockName })
  }
}
