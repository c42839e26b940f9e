import { systemClock } from '../../core/clock.ts'
import { LockConfigurationError, type LockProviderError } from '../../core/errors.ts'
import { storeError } from '../../support/store-errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { retryAfterFirst, retryConcurrencyFailures } from '../../support/sql/concurrency-retry.ts'
import {
  lockAtLeastAnchor,
  type SqlAccessor,
  type SqlLockProviderOptions,
  type SqlTableLimits,
  fencingTokenOf,
  sqlLockProvider,
} from '../../support/sql/sql-lock-provider.ts'
import { type SqlTable, sqlTable, utcTimestamp } from '../../support/sql/sql-table.ts'
import { mysqlLockInspector } from './inspector.ts'
import {
  checkPromiseClient,
  dbNow as dbNowOf,
  describeMysqlError,
  isConcurrencyFailure,
  isDuplicateKey,
  type MysqlColumnType,
  type MysqlQueryable,
  PROVIDER,
  readLockColumns,
  TIMESTAMP_END,
} from './table.ts'

export type { MysqlQueryable } from './table.ts'

/** Options of {@link mysqlLockProvider}. */
export interface MysqlLockProviderOptions extends SqlLockProviderOptions {
  /** Your mysql2 promise Pool. The provider never opens connections of its own. */
  client: MysqlQueryable
  /**
   * The type of the `lock_until` column (see {@link MysqlColumnType}); `locked_at` is written
   * the same way. Given, the provider sends no query to find it (nor the `name` column's length:
   * see `maxNameLength`). A wrong value lets nodes whose sessions are in different time zones
   * take each other's locks.
   * @default read once from `information_schema.COLUMNS`, on the first `lock()`
   */
  columnType?: MysqlColumnType
  /**
   * The longest lock name, in characters, when `columnType` is given; without `columnType` the
   * provider reads the `name` column's declared length instead (and refuses this option).
   * @default 64, the `VARCHAR(64)` of {@link mysqlSchema} and of Java ShedLock's DDL
   */
  maxNameLength?: number
  /**
   * Replication-safe acquisition, for a primary with semi-synchronous replication
   * (`rpl_semi_sync_master_enabled`): the provider reads the semi-sync status before and after
   * each acquisition (`SHOW GLOBAL STATUS`, two more queries) and keeps the lock only when
   * semi-sync was on throughout and no commit fell back to asynchronous meanwhile
   * (`Rpl_semi_sync_master_no_tx` unchanged: a replica acknowledged every commit, ours included).
   * Otherwise the row is given back (deleted) and `lock()` rejects with `LockProviderError`: the
   * task does not run. MariaDB gives up waiting after `rpl_semi_sync_master_timeout` and goes on
   * asynchronously, which this detects. Extensions and releases are not checked.
   * @default false
   */
  requireSemiSync?: boolean
}

// Reported as insertId by the statements below when they found the row but must not count as a
// success. An arbitrary constant below 2^31: the lock table has no AUTO_INCREMENT column, and
// even one would take over a billion attempts to reach it.
const MARK = 1_518_500_249

/**
 * Locks in a MySQL 8 or MariaDB 10.5+ table in Java ShedLock's format (create it with
 * {@link mysqlSchema}; a table Java ShedLock created, with `TIMESTAMP(3)` columns, also works).
 * The `name` column must be the table's primary key: the upsert relies on it to find the row.
 *
 * One `INSERT … ON DUPLICATE KEY UPDATE` per acquire attempt that takes the row over only if it
 * expired, one `UPDATE` per release; unlock and extend only touch the row this acquisition holds.
 * Extensible. Uses `query` (text protocol, one round trip per statement), not `execute`.
 *
 * The first acquire of a provider also reads the types of the `name` and `lock_until` columns
 * from `information_schema.COLUMNS` (one more query, once; not kept while the table is missing;
 * skipped when `columnType` is given). `DATETIME` columns get UTC values; `TIMESTAMP` columns get
 * the session's now, which MySQL stores as the true instant, so nodes whose sessions are in
 * different time zones exclude each other on both (see {@link MysqlColumnType}). On a `TIMESTAMP`
 * column, a `lockAtMostUntil` after 2038-01-19T03:14:07.999Z rejects with `LockConfigurationError`.
 * Caveat: a session time zone with daylight saving reads and writes `TIMESTAMP` values in its
 * repeated autumn hour ambiguously (and rejects values in its spring gap): use `DATETIME(3)`
 * columns or sessions at `+00:00`.
 *
 * A lock name longer than the `name` column (in characters) rejects with `LockConfigurationError`
 * before the acquire statement is sent, in strict SQL mode or not (without strict mode, MySQL
 * would silently truncate it, so that two names sharing their first 64 characters became one
 * lock). A name ending with a space rejects with `LockConfigurationError`: MySQL compares
 * `VARCHAR` values without trailing spaces (PAD SPACE collations such as `utf8mb4_bin`), so it
 * would share the row of the name without them.
 *
 * Deadlocks and lock wait timeouts on acquire mean "not acquired" (another contender is writing
 * the row); unlock and extend retry them up to 5 times (jittered backoff, at most 310 ms in all).
 *
 * Pass a promise client: a mysql2 callback-API pool or connection (`createPool()` from `mysql2`)
 * rejects with `LockConfigurationError` when the provider is created; use `pool.promise()`.
 *
 * ```ts
 * import mysql from 'mysql2/promise'
 * import { mysqlLockProvider } from 'shedlock/mysql'
 * const provider = mysqlLockProvider({ client: mysql.createPool({ uri }) })
 * ```
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers,
 *   for a client of mysql2's callback API (or any `query(sql, values, callback)`), and for a
 *   `columnType` or `maxNameLength` that is not one of the values above.
 */
export function mysqlLockProvider(options: MysqlLockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  return createMysqlLockProvider(options, 'upsert')
}

/**
 * Internal: how an acquire tells a held lock from a new one. `'upsert'`: one statement, read
 * through its insertId marker (mysql2, and the ORM clients that report MySQL's insertId).
 * `'countOnly'`: for clients that report nothing but a row count (Prisma): an `UPDATE` that takes
 * an expired row over, then, when it found none, an `INSERT` (two statements only the first time
 * a name is acquired, or while it is held).
 */
export type MysqlAcquireMode = 'upsert' | 'countOnly'

/** Internal: {@link mysqlLockProvider} with the acquire statements of `mode`. */
export function createMysqlLockProvider(
  options: MysqlLockProviderOptions,
  mode: MysqlAcquireMode,
): ExtensibleLockProvider & InspectableLockProvider {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError(
      'mysql: pass your mysql2 promise Pool as { client } (an object with query(sql, values))',
    )
  }
  checkPromiseClient(client)
  const t = sqlTable(PROVIDER, options)
  const { name, lockUntil } = t.columns
  const clock = options.clock ?? systemClock
  const useDbTime = options.useDbTime ?? true
  const { columnType: givenType, maxNameLength } = options
  if (givenType !== undefined && givenType !== 'datetime' && givenType !== 'timestamp') {
    throw new LockConfigurationError(
      `mysql: columnType must be 'datetime' or 'timestamp' (the type of the ${lockUntil} column), got ${JSON.stringify(givenType)}`,
    )
  }
  if (
    maxNameLength !== undefined &&
    (givenType === undefined || !Number.isSafeInteger(maxNameLength) || maxNameLength < 1)
  ) {
    throw new LockConfigurationError(
      givenType === undefined
        ? 'mysql: maxNameLength applies only with columnType; without it, the provider reads the length of the name column from the table'
        : `mysql: maxNameLength must be a positive whole number of characters (the length of the ${name} column), got ${JSON.stringify(maxNameLength)}`,
    )
  }

  // Deadlocks and lock wait timeouts roll back only the failed statement. Unlock and extend are
  // idempotent and must not be lost to them (a lost unlock keeps the lock until lockAtMostFor),
  // so they are retried; Java ShedLock retries its unlock the same way.
  const retrying = <T>(attempt: () => Promise<T>): Promise<T> => retryConcurrencyFailures(attempt, isConcurrencyFailure)

  // The type of lock_until decides how times are written; until it is known (a missing table:
  // the statement reports it), DATETIME's UTC.
  let columnType: MysqlColumnType | undefined = givenType
  const limitsOf = (type: MysqlColumnType, limits: SqlTableLimits): SqlTableLimits =>
    type === 'timestamp' ? { ...limits, latestDeadline: TIMESTAMP_END } : limits
  const readLimits = async (): Promise<SqlTableLimits | undefined> => {
    // Given columnType: nothing to read.
    if (givenType)
      return limitsOf(givenType, {
        maxNameLength: maxNameLength ?? 64,
        nameColumn:
          maxNameLength === undefined ? 'maxNameLength, 64 by default with columnType' : 'the maxNameLength option',
      })
    const found = await readLockColumns((sql, values) => client.query(sql, values), t)
    // No such table or columns: nothing is kept, and the acquire statement reports what is wrong.
    if (!found) return undefined
    columnType = found.columnType
    return limitsOf(
      found.columnType,
      found.maxNameLength === undefined ? {} : { maxNameLength: found.maxNameLength, nameColumn: found.nameColumn },
    )
  }

  // The statements depend only on the column type (and the time mode), so each is built once per
  // type: building the long upsert for every acquisition showed in the CPU per lock.
  const built: Partial<Record<MysqlColumnType, Statements>> = {}
  const statements = (): Statements => {
    const type = columnType ?? 'datetime'
    built[type] ??= buildStatements(t, type, useDbTime)
    return built[type]
  }

  // App time. Timestamps never go over the wire as Date objects, which mysql2 would convert with
  // its own `timezone` option. DATETIME: UTC text. TIMESTAMP: epoch seconds (a number with up to
  // 3 decimals, so a DECIMAL literal: exact), which FROM_UNIXTIME() turns into the session's
  // local time, which MySQL turns back into the same instant when it stores or compares it.
  const appTime = (ms: number): unknown => (columnType === 'timestamp' ? Math.round(ms) / 1000 : utcTimestamp(ms))
  // With database time, "now" is SQL without a parameter and "until" one parameter (the
  // microseconds to add to it); with app time each is one parameter (see appTime()).
  const nowValue = (): unknown => (useDbTime ? undefined : appTime(clock.now()))
  const untilValue = (c: LockConfiguration): unknown =>
    useDbTime ? Math.round(c.lockAtMostFor * 1000) : appTime(c.lockAtMostUntil.getTime())

  // Each accessor function sends its statement itself, not through a helper: mysql2 records the
  // caller's stack with every query (`trace`, on by default, up to 10 frames), so each frame
  // between the caller and client.query() costs on every statement.
  const acquire = async (c: LockConfiguration, owner: string): Promise<boolean | bigint> => {
    const sql = statements().acquire
    const now = nowValue()
    const until = untilValue(c)
    const values = useDbTime
      ? [c.name, until, owner, owner, until]
      : t.fencing
        ? [c.name, until, now, owner, now, owner, now, now, now, now, until]
        : [c.name, until, now, owner, now, owner, now, now, now, until]
    try {
      const result = resultOf(await client.query(sql, values))
      // With fencing tokens, insertId is the new token, or 0 for a held row (see buildStatements).
      if (t.fencing) return result.affectedRows > 0 && Number(result.insertId) > 0 && fencingTokenOf(result.insertId)
      return result.affectedRows > 0 && !isMarked(result)
    } catch (error) {
      // Concurrent upserts of one key can deadlock in InnoDB (or time out waiting): another
      // contender is writing the row right now, so this attempt did not get the lock. Java
      // ShedLock also answers "not locked" to concurrency failures on acquire.
      if (isConcurrencyFailure(error)) return false
      throw error
    }
  }

  // For clients that report only a row count, with or without CLIENT_FOUND_ROWS (the mariadb
  // connector sets it by default: then an unchanged row counts 1, like an insert, and a takeover
  // 2, so the upsert cannot be read). Each statement's count is decisive on its own: the UPDATE
  // only matches an expired row, and always changes it, as locked_by is unique per acquisition;
  // the INSERT either adds the row or fails on its primary key. Not INSERT IGNORE, which would
  // also turn a too long locked_by (and other strict-mode errors) into a silently altered row.
  const acquireCountOnly = async (c: LockConfiguration, owner: string): Promise<boolean | bigint> => {
    const { takeover, insert } = statements()
    const now = nowValue()
    const until = untilValue(c)
    let acquired: boolean
    try {
      const taken = resultOf(
        await client.query(takeover, useDbTime ? [owner, until, c.name] : [owner, now, until, c.name, now]),
      )
      // No expired row: held, or not there yet. A held row makes the INSERT fail on its key.
      acquired =
        taken.affectedRows > 0 ||
        resultOf(await client.query(insert, useDbTime ? [c.name, until, owner] : [c.name, until, now, owner]))
          .affectedRows > 0
    } catch (error) {
      // Another contender holds or is writing the row; as in acquire above.
      if (isDuplicateKey(error) || isConcurrencyFailure(error)) return false
      throw error
    }
    if (!acquired || !t.fencing) return acquired
    // A client without insertId cannot have the token back from the write: one more statement,
    // which finds the row as this acquisition wrote it, unless it expired and was taken already.
    const [rows] = await client.query(statements().token, [c.name, owner])
    const row = Array.isArray(rows) ? (rows[0] as { fencing_token?: unknown } | undefined) : undefined
    return row === undefined ? false : fencingTokenOf(row.fencing_token)
  }

  const extend = async (next: LockConfiguration, owner: string): Promise<boolean> => {
    const { extend: sql, held } = statements()
    const now = nowValue()
    const until = untilValue(next)
    const values = useDbTime ? [until, until, next.name, owner] : [until, until, next.name, owner, now]
    const result = await retrying(async () => resultOf(await client.query(sql, values)))
    // The same value twice within one millisecond leaves the row unchanged, which reports
    // affectedRows 0 without CLIENT_FOUND_ROWS; the marker tells that the row matched anyway.
    if (result.affectedRows > 0 || isMarked(result)) return true
    if (mode !== 'countOnly') return false
    // A client without the marker that counts changed rows: 0 is either a lost lock or an
    // unchanged row. Only this acquisition writes its owner, and it never moves lock_until back,
    // so a row still ours and unexpired now was so at the UPDATE, which then matched it.
    const [rows] = await retrying(() => client.query(held, useDbTime ? [next.name, owner] : [next.name, owner, now]))
    return Array.isArray(rows) && rows.length > 0
  }

  // The first attempt is sent from here; retryAfterFirst() repeats it after a concurrency failure.
  const unlock = (current: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<void> => {
    const s = statements()
    let sql = s.unlock
    let values: unknown[]
    if (useDbTime) {
      const anchor = lockAtLeastAnchor(current, acquired, clock)
      if (anchor.from === 'lockedAt') sql = s.unlockFromLockedAt
      values = [Math.round(anchor.seconds * 1e6), current.name, owner]
    } else values = [appTime(Math.max(clock.now(), current.lockAtLeastUntil.getTime())), current.name, owner]
    const attempt = (): Promise<void> => client.query(sql, values).then(checkResult)
    let first: Promise<void>
    try {
      first = client.query(sql, values).then(checkResult)
    } catch (error) {
      first = Promise.reject(error)
    }
    return retryAfterFirst(first, attempt, isConcurrencyFailure)
  }

  const requireSemiSync = options.requireSemiSync ?? false
  if (typeof requireSemiSync !== 'boolean') {
    throw new LockConfigurationError(
      `mysql: requireSemiSync must be true or false, got ${JSON.stringify(options.requireSemiSync)}`,
    )
  }
  const plainAcquire = mode === 'countOnly' ? acquireCountOnly : acquire
  const semiSyncAcquire = async (c: LockConfiguration, owner: string): Promise<boolean | bigint> => {
    const before = await semiSyncState(client)
    if (before.problem !== undefined) throw semiSyncError(c, `${before.problem}; nothing was written`)
    const acquired = await plainAcquire(c, owner)
    if (acquired === false) return false
    const after = await semiSyncState(client).catch((error: unknown) => ({
      problem: `its status could not be read (${String(error)})`,
      noTx: undefined,
    }))
    if (after.problem === undefined && after.noTx === before.noTx) return acquired
    // Maybe on the primary alone: a failover could grant it again. Given back, not run.
    await client
      .query(`DELETE FROM ${t.table} WHERE ${name} = ? AND ${t.columns.lockedBy} = ?`, [c.name, owner])
      .catch(() => {})
    const why =
      after.problem ??
      `a commit went unacknowledged meanwhile (Rpl_semi_sync_master_no_tx ${before.noTx} -> ${after.noTx}: a replica did not answer within rpl_semi_sync_master_timeout)`
    throw semiSyncError(c, `${why}; the lock was given back`)
  }

  const accessor: SqlAccessor = {
    readLimits,
    // VARCHAR comparisons under PAD SPACE collations (utf8mb4_bin, and Java ShedLock's tables)
    // ignore trailing spaces: "report " would find and take the row of "report".
    checkName: (lockName) => {
      if (lockName.endsWith(' ')) {
        throw new LockConfigurationError(
          `Lock name ${JSON.stringify(lockName)} ends with a space: MySQL compares names without their trailing spaces, so it would be the same lock as ${JSON.stringify(lockName.trimEnd())}; remove the trailing space`,
        )
      }
    },
    acquire: requireSemiSync ? semiSyncAcquire : plainAcquire,
    extend,
    unlock,
  }
  const provider = sqlLockProvider(PROVIDER, accessor, options, describeMysqlError(t))
  const inspect = {
    client,
    tableName: t.table,
    columnNames: t.columns,
    ...(options.columnType === undefined ? {} : { columnType: options.columnType }),
  }
  return { name: provider.name, inspector: () => mysqlLockInspector(inspect), lock: provider.lock }
}

/** The semi-sync status of the server: `problem` says why a commit may not be on a replica. */
async function semiSyncState(client: MysqlQueryable): Promise<{ problem?: string; noTx?: number }> {
  // MariaDB and MySQL before 8.0.26 say master, later MySQL source.
  const [rows] = await client.query(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_no_tx', 'Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_no_tx')",
    [],
  )
  const status = new Map<string, string>()
  for (const row of Array.isArray(rows) ? (rows as { Variable_name?: unknown; Value?: unknown }[]) : []) {
    status.set(String(row.Variable_name).toLowerCase().replace('_source_', '_master_'), String(row.Value))
  }
  const on = status.get('rpl_semi_sync_master_status')
  const noTx = Number(status.get('rpl_semi_sync_master_no_tx'))
  if (on === undefined)
    return {
      problem:
        'the server has no semi-synchronous replication (no Rpl_semi_sync_master_status; MySQL needs the rpl_semi_sync_source plugin)',
    }
  if (on !== 'ON')
    return {
      problem:
        'semi-synchronous replication is off (Rpl_semi_sync_master_status OFF: rpl_semi_sync_master_enabled is off, or no replica acknowledged in time and the primary went on asynchronously)',
      noTx,
    }
  return { noTx }
}

function semiSyncError(c: LockConfiguration, why: string): LockProviderError {
  return storeError(PROVIDER, 'acquire', c.name, `requireSemiSync is on, but ${why}; the task was not run`, undefined)
}

/** The statements of one column type and time mode; see {@link buildStatements}. */
interface Statements {
  /** The upsert: values name, until, [now], owner, [now], owner, [now], [now], [now], [now: fencing only], until. */
  readonly acquire: string
  /** countOnly's takeover: values owner, [now], until, name, [now]. */
  readonly takeover: string
  /** countOnly's insert: values name, until, [now], owner. */
  readonly insert: string
  /** Values until, until, name, owner, [now]. */
  readonly extend: string
  /** Whether a row is still held: values name, owner, [now]. */
  readonly held: string
  /** countOnly with fencing tokens: the token of the row this acquisition holds, values name, owner. */
  readonly token: string
  /** Database time: values microseconds, name, owner, from now. App time: values until, name, owner. */
  readonly unlock: string
  /** Database time only: values microseconds, name, owner, from locked_at. */
  readonly unlockFromLockedAt: string
}

/**
 * The statements, with `?` for each value in the order {@link Statements} lists (`[now]`: app
 * time only). With database time, now is the column type's now and the until value is the
 * microseconds to add to it; with app time both are values, as `appTime()` writes them.
 */
function buildStatements(t: SqlTable, type: MysqlColumnType, useDbTime: boolean): Statements {
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const at = type === 'timestamp' ? 'FROM_UNIXTIME(?)' : 'CAST(? AS DATETIME(3))'
  const now = useDbTime ? dbNowOf(type) : at
  const until = useDbTime ? `TIMESTAMPADD(MICROSECOND, ?, ${now})` : at
  const expired = `${lockUntil} <= ${now}`
  const token = t.fencingColumn
  const insertOf = (firstToken: string): string =>
    `INSERT INTO ${t.table} (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}${t.fencing ? `, ${token}` : ''}) VALUES (?, ${until}, ${now}, ?${t.fencing ? `, ${firstToken}` : ''})`
  const insert = insertOf('1')
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
  //
  // With fencing tokens, insertId is the token instead: LAST_INSERT_ID(1) for a new row (the
  // VALUES are evaluated before the key is found taken), LAST_INSERT_ID(token + 1) for a
  // takeover (a NULL token, as Java ShedLock's INSERT leaves it, counts as 0), LAST_INSERT_ID(0)
  // for a held row: tokens start at 1, so 0 says "not acquired" without a marker that a token
  // could reach. The OK packet carries it: no extra round trip.
  const acquire = t.fencing
    ? `${insertOf('LAST_INSERT_ID(1)')} ` +
      `ON DUPLICATE KEY UPDATE ${lockedBy} = IF(${expired}, ?, ${lockedBy}), ` +
      `${lockedAt} = IF(${expired}, ${now}, ${lockedAt}), ` +
      `${token} = IF(${expired}, LAST_INSERT_ID(COALESCE(${token}, 0) + 1), IF(LAST_INSERT_ID(0) = 0, ${token}, ${token})), ` +
      `${lockUntil} = IF(${expired}, ${until}, ${lockUntil})`
    : `${insert} ` +
      `ON DUPLICATE KEY UPDATE ${lockedBy} = IF(${expired}, ?, IF(LAST_INSERT_ID(${MARK}) = ${MARK}, ${lockedBy}, ${lockedBy})), ` +
      `${lockedAt} = IF(${expired}, ${now}, ${lockedAt}), ` +
      `${lockUntil} = IF(${expired}, ${until}, ${lockUntil})`
  const unlockTo = (from: string): string =>
    `UPDATE ${t.table} SET ${lockUntil} = GREATEST(TIMESTAMPADD(MICROSECOND, ?, ${from}), ${now}) WHERE ${name} = ? AND ${lockedBy} = ?`
  return {
    acquire,
    takeover: `UPDATE ${t.table} SET ${lockedBy} = ?, ${lockedAt} = ${now}, ${t.fencing ? `${token} = COALESCE(${token}, 0) + 1, ` : ''}${lockUntil} = ${until} WHERE ${name} = ? AND ${lockUntil} <= ${now}`,
    insert,
    // The same value twice within one millisecond leaves the row unchanged: see extend().
    extend:
      `UPDATE ${t.table} SET ${lockUntil} = IF(LAST_INSERT_ID(${MARK}) = ${MARK}, ${until}, ${until}) ` +
      `WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ${now}`,
    held: `SELECT 1 AS held FROM ${t.table} WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ${now}`,
    token: `SELECT ${token} AS fencing_token FROM ${t.table} WHERE ${name} = ? AND ${lockedBy} = ?`,
    unlock: useDbTime
      ? unlockTo(now)
      : `UPDATE ${t.table} SET ${lockUntil} = ${at} WHERE ${name} = ? AND ${lockedBy} = ?`,
    unlockFromLockedAt: unlockTo(lockedAt),
  }
}

/** {@link resultOf} of a release, whose result is not used otherwise. */
function checkResult(reply: unknown): void {
  resultOf(reply)
}

/** The result of a mysql2 `query()` reply (`[result, fields]`); a reply of another shape is a wrong client. */
function resultOf(reply: unknown): { affectedRows: number; insertId?: unknown } {
  const result = Array.isArray(reply) ? (reply[0] as { affectedRows?: unknown } | null | undefined) : undefined
  if (typeof result?.affectedRows !== 'number') {
    throw new TypeError(
      'client.query(sql, values) did not resolve to [result, fields] with result.affectedRows; pass a Pool from mysql2/promise (or pool.promise())',
    )
  }
  return result as { affectedRows: number; insertId?: unknown }
}

/** Whether the statement went through a `LAST_INSERT_ID(MARK)` branch. insertId may be a number, a bigint or a string (supportBigNumbers); MARK fits all three. */
function isMarked(result: { insertId?: unknown }): boolean {
  return Number(result.insertId) === MARK
}
