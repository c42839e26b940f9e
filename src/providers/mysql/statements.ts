// The statements a MySQL or MariaDB provider sends, built once per column type and time mode,
// and how their replies are read.
import type { SqlTable } from '../../support/sql/sql-table.ts'
import { dbNow as dbNowOf, type MysqlColumnType } from './table.ts'

// Reported as insertId by the statements below when they found the row but must not count as a
// success. An arbitrary constant below 2^31: the lock table has no AUTO_INCREMENT column, and
// even one would take over a billion attempts to reach it.
const MARK = 1_518_500_249

/** The statements of one column type and time mode; see {@link buildStatements}. */
export interface Statements {
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
  /**
   * MariaDB only (empty on MySQL): a slot's claim and its task's lock in one compound statement,
   * the values of `acquire` twice; its one row `claimed, locked` reads as `acquire`'s insertId.
   */
  readonly acquirePair: string
}

/**
 * The statements, with `?` for each value in the order {@link Statements} lists (`[now]`: app
 * time only). With database time, now is the column type's now and the until value is the
 * microseconds to add to it; with app time both are values, as `appTime()` writes them.
 */
export function buildStatements(t: SqlTable, type: MysqlColumnType, useDbTime: boolean, mariadb = false): Statements {
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const at = type === 'timestamp' ? 'FROM_UNIXTIME(?)' : 'CAST(? AS DATETIME(3))'
  const now = useDbTime ? dbNowOf(type) : at
  const until = useDbTime ? `TIMESTAMPADD(MICROSECOND, ?, ${now})` : at
  const expired = `${lockUntil} <= ${now}`
  const token = t.fencingColumn
  const insertOf = (firstToken: string): string =>
    `INSERT INTO ${t.table} (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}${t.fencing ? `, ${token}` : ''}) VALUES (?, ${until}, ${now}, ?${t.fencing ? `, ${firstToken}` : ''})`
  // A row without a token (new, recreated after a delete, or inserted by Java ShedLock) starts
  // above the floor: the database clock in microseconds (never below fencingFloor() at the same
  // moment), above every token the name had before (support/fencing.ts). A takeover adds 1.
  const insert = insertOf(FENCING_FLOOR)
  // MariaDB: the acquire waits at most 1 s (innodb_lock_wait_timeout's least value but NOWAIT)
  // for a row another transaction is writing, say one whose commit waits for a semi-synchronous
  // replica, and then fails with 1205, read as "not acquired", instead of waiting 50 s with the
  // connection. MySQL has no such statement prefix (SET_VAR does not take InnoDB variables).
  const wait = mariadb ? 'SET STATEMENT innodb_lock_wait_timeout = 1 FOR ' : ''
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
  // With fencing tokens, insertId is the token instead: LAST_INSERT_ID(floor) for a new row (the
  // VALUES are evaluated before the key is found taken), LAST_INSERT_ID(token + 1) for a
  // takeover (the floor for a NULL token, as Java ShedLock's INSERT leaves it), LAST_INSERT_ID(0)
  // for a held row: tokens are at least 1, so 0 says "not acquired" without a marker that a
  // token could reach. The OK packet carries it: no extra round trip.
  const acquire = t.fencing
    ? `${wait}${insertOf(`LAST_INSERT_ID(${FENCING_FLOOR})`)} ` +
      `ON DUPLICATE KEY UPDATE ${lockedBy} = IF(${expired}, ?, ${lockedBy}), ` +
      `${lockedAt} = IF(${expired}, ${now}, ${lockedAt}), ` +
      `${token} = IF(${expired}, LAST_INSERT_ID(COALESCE(${token} + 1, ${FENCING_FLOOR})), IF(LAST_INSERT_ID(0) = 0, ${token}, ${token})), ` +
      `${lockUntil} = IF(${expired}, ${until}, ${lockUntil})`
    : `${wait}${insertOf('1')} ` +
      `ON DUPLICATE KEY UPDATE ${lockedBy} = IF(${expired}, ?, IF(LAST_INSERT_ID(${MARK}) = ${MARK}, ${lockedBy}, ${lockedBy})), ` +
      `${lockedAt} = IF(${expired}, ${now}, ${lockedAt}), ` +
      `${lockUntil} = IF(${expired}, ${until}, ${lockUntil})`
  const unlockTo = (from: string): string =>
    `UPDATE ${t.table} SET ${lockUntil} = GREATEST(TIMESTAMPADD(MICROSECOND, ?, ${from}), ${now}) WHERE ${name} = ? AND ${lockedBy} = ?`
  return {
    acquire,
    acquirePair: mariadb ? pairOf(acquire, t.fencing) : '',
    takeover: `${wait}UPDATE ${t.table} SET ${lockedBy} = ?, ${lockedAt} = ${now}, ${t.fencing ? `${token} = COALESCE(${token} + 1, ${FENCING_FLOOR}), ` : ''}${lockUntil} = ${until} WHERE ${name} = ? AND ${lockUntil} <= ${now}`,
    insert: `${wait}${insert}`,
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

/**
 * A slot's claim and its task's lock in one round trip, and one transaction, on MariaDB (MySQL has
 * no compound statement outside a stored program): the second upsert runs only if the first took
 * its row, and an error (a deadlock, a lock wait) rolls both back before it reaches the client,
 * so no claim is ever kept for a task whose lock was not asked for. The server runs it to the end
 * whatever happens to the client: a node that dies after sending it leaves both taken, and its
 * task lock lapses as any holder's does. Each upsert reads as the client reads `acquire`'s reply:
 * a row count, and LAST_INSERT_ID (the token, or the held-row marker), reset before each.
 */
function pairOf(acquire: string, fencing: boolean): string {
  const taken = fencing
    ? 'IF(ROW_COUNT() > 0, LAST_INSERT_ID(), 0)'
    : `IF(ROW_COUNT() > 0 AND LAST_INSERT_ID() <> ${MARK}, 1, 0)`
  return [
    'BEGIN NOT ATOMIC',
    'DECLARE claimed BIGINT DEFAULT 0;',
    'DECLARE locked BIGINT DEFAULT 0;',
    'DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;',
    'START TRANSACTION;',
    `DO LAST_INSERT_ID(0); ${acquire}; SET claimed = ${taken};`,
    `IF claimed <> 0 THEN DO LAST_INSERT_ID(0); ${acquire}; SET locked = ${taken}; END IF;`,
    'COMMIT;',
    'SELECT claimed, locked;',
    'END',
  ].join('\n')
}

/**
 * The first token of a row that has none: the database clock in microseconds since the epoch,
 * plus 1. In whole milliseconds (`UTC_TIMESTAMP(3)`), a row deleted and taken again within the
 * millisecond of its last token repeated it.
 */
export const FENCING_FLOOR = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + 1)"

/** {@link resultOf} of a release, whose result is not used otherwise. */
export function checkResult(reply: unknown): void {
  resultOf(reply)
}

/** The result of a mysql2 `query()` reply (`[result, fields]`); a reply of another shape is a wrong client. */
export function resultOf(reply: unknown): { affectedRows: number; insertId?: unknown } {
  const result = Array.isArray(reply) ? (reply[0] as { affectedRows?: unknown } | null | undefined) : undefined
  if (typeof result?.affectedRows !== 'number') {
    throw new TypeError(
      'client.query(sql, values) did not resolve to [result, fields] with result.affectedRows; pass a Pool from mysql2/promise (or pool.promise())',
    )
  }
  return result as { affectedRows: number; insertId?: unknown }
}

/**
 * What `acquirePair` took, as `[claim, task]`: `false`, or `true` / the fencing token each. A
 * reply of another shape is a wrong client.
 */
export function pairResult(reply: unknown, fencing: boolean): readonly [boolean | bigint, boolean | bigint] {
  // mysql2 answers a compound statement with its result set first, then the OK packet.
  const rows = Array.isArray(reply) && Array.isArray(reply[0]) ? (reply[0] as unknown[]) : []
  const row = (Array.isArray(rows[0]) ? rows[0][0] : rows[0]) as { claimed?: unknown; locked?: unknown } | undefined
  if (row === undefined || row.claimed === undefined)
    throw new TypeError("client.query() did not resolve to the paired acquire's row; pass a Pool from mysql2/promise")
  const taken = (value: unknown): boolean | bigint =>
    BigInt(value as number) === 0n ? false : fencing ? BigInt(value as number) : true
  return [taken(row.claimed), taken(row.locked)]
}

/** Whether the statement went through a `LAST_INSERT_ID(MARK)` branch. insertId may be a number, a bigint or a string (supportBigNumbers); MARK fits all three. */
export function isMarked(result: { insertId?: unknown }): boolean {
  return Number(result.insertId) === MARK
}
