// What a MySQL or MariaDB provider sends to take, extend and release a lock row.
//
// Each function sends its statement itself, not through a helper: mysql2 records the caller's
// stack with every query (`trace`, on by default, up to 10 frames), so each frame between the
// caller and client.query() costs on every statement.
import type { Clock } from '../../core/clock.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import { retryAfterFirst, retryConcurrencyFailures } from '../../support/sql/concurrency-retry.ts'
import {
  acquireOneAfterOther,
  fencingTokenOf,
  lockAtLeastAnchor,
  type SqlAccessor,
} from '../../support/sql/sql-lock-provider.ts'
import type { SqlTable } from '../../support/sql/sql-table.ts'
import { checkResult, isMarked, pairResult, resultOf, type Statements } from './statements.ts'
import { isConcurrencyFailure, isDuplicateKey, type MysqlClient } from './table.ts'

/** One provider's client, table and time values, as its statements take them. */
export interface MysqlRowAccess {
  readonly client: MysqlClient
  readonly t: SqlTable
  readonly useDbTime: boolean
  readonly clock: Clock
  /** The statements of the `lock_until` column's type, as far as it is known yet. */
  statements(): Statements
  /** An app-time instant (epoch milliseconds) as the `lock_until` column's type takes it. */
  appTime(ms: number): unknown
  /** The now value: `undefined` with database time, where now is SQL. */
  nowValue(): unknown
  /** The until value: microseconds to add to now with database time, an app-time instant otherwise. */
  untilValue(c: LockConfiguration): unknown
}

// Deadlocks and lock wait timeouts roll back only the failed statement. Unlock and extend are
// idempotent and must not be lost to them (a lost unlock keeps the lock until lockAtMostFor),
// so they are retried; Java ShedLock retries its unlock the same way.
const retrying = <T>(attempt: () => Promise<T>): Promise<T> => retryConcurrencyFailures(attempt, isConcurrencyFailure)

/** The acquire of mode `'upsert'`: one statement, read through its insertId. */
export function upsertAcquire(s: MysqlRowAccess): SqlAccessor['acquire'] {
  const { client, t } = s
  return async (c, owner) => {
    const sql = s.statements().acquire
    try {
      const result = resultOf(await client.query(sql, upsertValues(s, c, owner)))
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
}

/** The values of the upsert (`Statements.acquire`) that takes `c` for `owner`. */
function upsertValues(s: MysqlRowAccess, c: LockConfiguration, owner: string): unknown[] {
  const until = s.untilValue(c)
  if (s.useDbTime) return [c.name, until, owner, owner, until]
  const now = s.nowValue()
  return s.t.fencing
    ? [c.name, until, now, owner, now, owner, now, now, now, now, until]
    : [c.name, until, now, owner, now, owner, now, now, now, until]
}

/**
 * The paired acquire of mode `'upsert'` (a slot's claim and its task's lock): one compound
 * statement on MariaDB (`Statements.acquirePair`); on MySQL, or after a concurrency failure rolled
 * the statement back, the two upserts one after the other, as `one` takes them.
 */
export function upsertPairAcquire(
  s: MysqlRowAccess,
  one: Pick<SqlAccessor, 'acquire' | 'unlock'>,
): NonNullable<SqlAccessor['acquirePair']> {
  const { client, t } = s
  return async (first, firstOwner, second, secondOwner) => {
    const sql = s.statements().acquirePair
    if (sql === '') return acquireOneAfterOther(one, first, firstOwner, second, secondOwner)
    let reply: unknown
    try {
      reply = await client.query(sql, [...upsertValues(s, first, firstOwner), ...upsertValues(s, second, secondOwner)])
    } catch (error) {
      if (!isConcurrencyFailure(error)) throw error
      return acquireOneAfterOther(one, first, firstOwner, second, secondOwner)
    }
    return pairResult(reply, t.fencing)
  }
}

/**
 * The acquire of mode `'countOnly'`, for clients that report only a row count, with or without
 * CLIENT_FOUND_ROWS (the mariadb connector sets it by default: then an unchanged row counts 1,
 * like an insert, and a takeover 2, so the upsert cannot be read). Each statement's count is
 * decisive on its own: the UPDATE only matches an expired row, and always changes it, as
 * locked_by is unique per acquisition; the INSERT either adds the row or fails on its primary
 * key. Not INSERT IGNORE, which would also turn a too long locked_by (and other strict-mode
 * errors) into a silently altered row.
 */
export function countOnlyAcquire(s: MysqlRowAccess): SqlAccessor['acquire'] {
  const { client, t, useDbTime } = s
  return async (c, owner) => {
    const { takeover, insert } = s.statements()
    const now = s.nowValue()
    const until = s.untilValue(c)
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
      // Another contender holds or is writing the row; as in upsertAcquire().
      if (isDuplicateKey(error) || isConcurrencyFailure(error)) return false
      throw error
    }
    if (!acquired || !t.fencing) return acquired
    // A client without insertId cannot have the token back from the write: one more statement,
    // which finds the row as this acquisition wrote it, unless it expired and was taken already.
    const [rows] = await client.query(s.statements().token, [c.name, owner])
    const row = Array.isArray(rows) ? (rows[0] as { fencing_token?: unknown } | undefined) : undefined
    return row === undefined ? false : fencingTokenOf(row.fencing_token)
  }
}

/** The extend; with `countOnly`, a row left unchanged is read back to tell it from a lost lock. */
export function extendOf(s: MysqlRowAccess, countOnly: boolean): SqlAccessor['extend'] {
  const { client, useDbTime } = s
  return async (next, owner) => {
    const { extend: sql, held } = s.statements()
    const now = s.nowValue()
    const until = s.untilValue(next)
    const values = useDbTime ? [until, until, next.name, owner] : [until, until, next.name, owner, now]
    const result = await retrying(async () => resultOf(await client.query(sql, values)))
    // The same value twice within one millisecond leaves the row unchanged, which reports
    // affectedRows 0 without CLIENT_FOUND_ROWS; the marker tells that the row matched anyway.
    if (result.affectedRows > 0 || isMarked(result)) return true
    if (!countOnly) return false
    // A client without the marker that counts changed rows: 0 is either a lost lock or an
    // unchanged row. Only this acquisition writes its owner, and it never moves lock_until back,
    // so a row still ours and unexpired now was so at the UPDATE, which then matched it.
    const [rows] = await retrying(() => client.query(held, useDbTime ? [next.name, owner] : [next.name, owner, now]))
    return Array.isArray(rows) && rows.length > 0
  }
}

/** The unlock: its first attempt is sent from here; retryAfterFirst() repeats it after a concurrency failure. */
export function unlockOf(s: MysqlRowAccess): SqlAccessor['unlock'] {
  const { client, useDbTime, clock } = s
  return (current, owner, acquired) => {
    const statements = s.statements()
    let sql = statements.unlock
    let values: unknown[]
    if (useDbTime) {
      const anchor = lockAtLeastAnchor(current, acquired, clock)
      if (anchor.from === 'lockedAt') sql = statements.unlockFromLockedAt
      values = [Math.round(anchor.seconds * 1e6), current.name, owner]
    } else values = [s.appTime(Math.max(clock.now(), current.lockAtLeastUntil.getTime())), current.name, owner]
    const attempt = (): Promise<void> => client.query(sql, values).then(checkResult)
    let first: Promise<void>
    try {
      first = client.query(sql, values).then(checkResult)
    } catch (error) {
      first = Promise.reject(error)
    }
    return retryAfterFirst(first, attempt, isConcurrencyFailure)
  }
}
