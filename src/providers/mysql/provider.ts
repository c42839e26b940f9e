import { systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import {
  type SqlAccessor,
  type SqlLockProviderOptions,
  type SqlTableLimits,
  sqlLockProvider,
  unlockNow,
} from '../../support/sql/sql-lock-provider.ts'
import { type SqlTable, sqlTable, utcTimestamp } from '../../support/sql/sql-table.ts'
import {
  countOnlyAcquire,
  extendOf,
  type MysqlRowAccess,
  unlockOf,
  upsertAcquire,
  upsertPairAcquire,
} from './accessor.ts'
import { mysqlLockInspector } from './inspector.ts'
import { semiSyncAcquire } from './semi-sync.ts'
import { buildStatements, type Statements } from './statements.ts'
import {
  checkPromiseClient,
  describeMysqlError,
  mysqlReplyLost,
  type MysqlColumnType,
  type MysqlClient,
  PROVIDER,
  readLockColumns,
  TIMESTAMP_END,
} from './table.ts'

export type { MysqlClient, MysqlQueryable } from './table.ts'

/** Options of {@link mysqlLockProvider}. */
export interface MysqlLockProviderOptions extends SqlLockProviderOptions {
  /** Your mysql2 promise Pool. The provider never opens connections of its own. */
  client: MysqlClient
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
   * Otherwise the row is given back (its `lock_until` set to now, owner-checked; the row and its
   * fencing token stay) and `lock()` rejects with `LockProviderError`: the
   * task does not run. MariaDB gives up waiting after `rpl_semi_sync_master_timeout` and goes on
   * asynchronously, which this detects. Extensions and releases are not checked.
   * @default false
   */
  requireSemiSync?: boolean
}

/**
 * Locks in a MySQL 8 or MariaDB 10.5+ table in Java ShedLock's format (create it with
 * {@link mysqlSchema}; a table Java ShedLock created, with `TIMESTAMP(3)` columns, also works),
 * through your mysql2 promise Pool: one statement per acquire attempt and per release. Extensible;
 * the database clock decides expiry unless `useDbTime: false`.
 *
 * ```ts
 * import mysql from 'mysql2/promise'
 * import { mysqlLockProvider } from 'shedlock/mysql'
 * const provider = mysqlLockProvider({ client: mysql.createPool({ uri }) })
 * ```
 *
 * A name longer than the `name` column, or ending with a space, rejects with
 * `LockConfigurationError` before anything is sent. See docs/providers/mysql.md.
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers,
 *   for a client of mysql2's callback API (or any `query(sql, values, callback)`; use
 *   `pool.promise()`), and for a `columnType` or `maxNameLength` that is not one of its values.
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

/**
 * Internal: {@link mysqlLockProvider} with the acquire statements of `mode`. `paired`: slot runs
 * claim and lock in one compound statement on MariaDB, which needs a client that returns its result
 * set as mysql2 does (the ORM adapters pass `false`).
 */
export function createMysqlLockProvider(
  options: MysqlLockProviderOptions,
  mode: MysqlAcquireMode,
  paired: boolean = mode === 'upsert',
): ExtensibleLockProvider & InspectableLockProvider {
  const { client, t, requireSemiSync } = checkOptions(options)
  const clock = options.clock ?? systemClock
  const useDbTime = options.useDbTime ?? true
  const { columnType: givenType, maxNameLength } = options

  // The type of lock_until decides how times are written; until it is known (a missing table:
  // the statement reports it), DATETIME's UTC.
  let columnType: MysqlColumnType | undefined = givenType
  // MariaDB takes a per-statement lock wait (statements.ts); found with the column types.
  let mariadb = false
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
    mariadb = found.mariadb
    return limitsOf(
      found.columnType,
      found.maxNameLength === undefined ? {} : { maxNameLength: found.maxNameLength, nameColumn: found.nameColumn },
    )
  }

  // The statements depend only on the column type (and the time mode), so each is built once per
  // type, as PostgreSQL's are (measured there: built per acquisition, 1.5–2.5 µs of CPU a lock).
  const built: Partial<Record<`${MysqlColumnType}${'' | ':mariadb'}`, Statements>> = {}
  const statements = (): Statements => {
    const type = columnType ?? 'datetime'
    const key = mariadb ? (`${type}:mariadb` as const) : type
    built[key] ??= buildStatements(t, type, useDbTime, mariadb)
    return built[key]
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

  const rows: MysqlRowAccess = { client, t, useDbTime, clock, statements, appTime, nowValue, untilValue }
  const acquire = mode === 'countOnly' ? countOnlyAcquire(rows) : upsertAcquire(rows)
  const unlock = unlockOf(rows)
  const accessor: SqlAccessor = {
    readLimits,
    checkName,
    // The semi-sync give-back frees the row (owner-checked) and keeps it, with its token.
    acquire: requireSemiSync
      ? semiSyncAcquire(client, acquire, (c, owner) => unlockNow({ unlock } as SqlAccessor, c, owner))
      : acquire,
    extend: extendOf(rows, mode === 'countOnly'),
    unlock,
    replyLost: mysqlReplyLost,
  }
  // Slot runs: claim and task lock in one statement on MariaDB. Not with requireSemiSync, whose
  // checks go around each acquire, nor for the clients of countOnly or the ORM adapters.
  if (paired && mode === 'upsert' && !requireSemiSync)
    accessor.acquirePair = upsertPairAcquire(rows, { acquire, unlock })
  const provider = sqlLockProvider(PROVIDER, accessor, options, describeMysqlError(t))
  const inspect = {
    client,
    tableName: t.table,
    columnNames: t.columns,
    ...(options.columnType === undefined ? {} : { columnType: options.columnType }),
  }
  // Not a spread: the provider's paired acquisition is a property a spread does not copy.
  return Object.assign(provider, { inspector: () => mysqlLockInspector(inspect) })
}

/** The options' client, table and `requireSemiSync`, checked in the order their errors are reported. */
function checkOptions(options: MysqlLockProviderOptions): {
  client: MysqlClient
  t: SqlTable
  requireSemiSync: boolean
} {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError(
      'mysql: pass your mysql2 promise Pool as { client } (an object with query(sql, values))',
    )
  }
  checkPromiseClient(client)
  const t = sqlTable(PROVIDER, options)
  const { name, lockUntil } = t.columns
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
  const requireSemiSync = options.requireSemiSync ?? false
  if (typeof requireSemiSync !== 'boolean') {
    throw new LockConfigurationError(
      `mysql: requireSemiSync must be true or false, got ${JSON.stringify(options.requireSemiSync)}`,
    )
  }
  return { client, t, requireSemiSync }
}

function limitsOf(type: MysqlColumnType, limits: SqlTableLimits): SqlTableLimits {
  return type === 'timestamp' ? { ...limits, latestDeadline: TIMESTAMP_END } : limits
}

// VARCHAR comparisons under PAD SPACE collations (utf8mb4_bin, and Java ShedLock's tables)
// ignore trailing spaces: "report " would find and take the row of "report".
function checkName(lockName: string): void {
  if (lockName.endsWith(' ')) {
    throw new LockConfigurationError(
      `Lock name ${JSON.stringify(lockName)} ends with a space: MySQL compares names without their trailing spaces, so it would be the same lock as ${JSON.stringify(lockName.trimEnd())}; remove the trailing space`,
    )
  }
}
