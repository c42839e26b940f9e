import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { type DescribeStoreError, storeGuard } from '../store-errors.ts'
import type { SqlTable } from './sql-table.ts'
import { byName } from '../inspection.ts'

/**
 * What one SQL database contributes to {@link sqlLockInspector}: how to run a statement and how to
 * read and write its lock columns. Statements use `?` placeholders; a dialect with others rewrites
 * them in `query` and `execute`.
 */
export interface SqlInspectorDialect {
  /** The provider's name, e.g. `postgres`. */
  readonly provider: string
  /** Whose clock `nowMs` reads, e.g. "the PostgreSQL server's clock". */
  readonly clock: string
  readonly table: SqlTable
  /** Rows of a `SELECT`. */
  query(sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** Rows changed by an `UPDATE` or `DELETE`. */
  execute(sql: string, params: readonly unknown[]): Promise<number>
  /** An expression of the now the provider compares `lock_until` with, in the lock columns' format. */
  dbNow(): Promise<string> | string
  /**
   * Optional: the `lock_until` a force-release writes, from the expression of now. Default: now
   * itself. A store whose now has microseconds truncates it to the millisecond: an app-time node
   * compares with its millisecond clock, and would find the lock held for the rest of the
   * millisecond of the release.
   */
  releasedUntil?(now: string): string
  /** An expression of that now as epoch milliseconds (a number). */
  nowMs(): Promise<string> | string
  /** An expression of a lock timestamp column as epoch milliseconds (a number). */
  epochMs(column: string): Promise<string> | string
  /** An expression of a timestamp column as text, exactly as stored, for an equality check. */
  text(column: string): string
  /** Turns a driver error into the `LockProviderError` the caller gets. */
  readonly describe: DescribeStoreError
}

/**
 * The value a force-release writes into `locked_by`: another owner than the holder's, so that the
 * holder's owner-checked release, extension or `lockAtLeastFor` can no longer touch the row (the
 * operator wins), Java ShedLock's (`locked_by = hostname`) included. Short, to fit any column.
 */
export const RELEASED_BY = 'released'

/**
 * The {@link LockInspector} of Java ShedLock's lock table, for the SQL providers: one `SELECT` per
 * read, one `UPDATE` per release. A force-release sets `lock_until` to the database's now and
 * `locked_by` to {@link RELEASED_BY}, and keeps the row, as the providers keep released rows.
 * Given a record, the `UPDATE` also matches the `locked_by` and `locked_at` read (the text of
 * `locked_at` as stored): the acquisition read, however often its holder extended it since.
 *
 * `removeExpired(selection)` is one `DELETE` of every row of the table whose name starts with
 * `selection.prefix` (no prefix: every row of the table, whichever task or node wrote it, Java
 * ShedLock's included) and whose `lock_until` is not after the database's now: free locks and
 * released ones alike; held rows are never touched. The executor calls it with the prefix
 * `"<task>@"` to drop a task's expired slot records. A deleted row's fencing token is not lost
 * to the resource's check: the name's next acquisition starts its token above the floor (the
 * database clock in milliseconds times 1000), above every token the row had, unless the database
 * clock went back by more than the time since (docs/fencing.md).
 */
export function sqlLockInspector(dialect: SqlInspectorDialect): LockInspector {
  const { table: t } = dialect
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const guard = storeGuard(dialect.describe)
  // The acquisition a record was read from: its holder and when it was taken, as stored. An
  // extension moves only lock_until, so release(record) still finds them after renewals, and a
  // new acquisition writes both (Java ShedLock's locked_by is the bare host name: locked_at tells
  // a re-acquisition by the same host).
  const readAs = new WeakMap<LockRecord, { lockedBy: unknown; lockedAt: unknown }>()

  const select = async (): Promise<string> =>
    `SELECT ${await dialect.nowMs()} AS now_ms, ${name} AS name, ${lockedBy} AS locked_by, ${await dialect.epochMs(lockedAt)} AS locked_at_ms, ` +
    `${await dialect.epochMs(lockUntil)} AS lock_until_ms, ${dialect.text(lockedAt)} AS locked_at_text FROM ${t.table}`
  const nowOf = async (rows: Record<string, unknown>[]): Promise<number> =>
    millis(rows[0]?.now_ms) ??
    millis((await dialect.query(`SELECT ${await dialect.nowMs()} AS now_ms`, []))[0]?.now_ms) ??
    Date.now()
  const toRecord = (row: Record<string, unknown>, now: number): LockRecord => {
    const until = millis(row.lock_until_ms)
    const at = millis(row.locked_at_ms)
    const record: LockRecord = Object.freeze({
      name: String(row.name),
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: at === undefined ? undefined : new Date(at),
      lockedBy: row.locked_by === null || row.locked_by === undefined ? undefined : String(row.locked_by),
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, { lockedBy: row.locked_by, lockedAt: row.locked_at_text })
    return record
  }

  // An exact prefix match in every dialect (LIKE would need escaping, and is case-insensitive in
  // SQLite); lengths in characters, as SQL counts them.
  const selected = (selection: LockSelection | undefined): { where: string; params: unknown[] } => {
    const prefix = selection?.prefix
    if (prefix === undefined || prefix === '') return { where: '', params: [] }
    return { where: `substr(${name}, 1, ${[...prefix].length}) = ?`, params: [prefix] }
  }

  return {
    name: dialect.provider,
    clock: dialect.clock,
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const { where, params } = selected(selection)
        const rows = await dialect.query(`${await select()}${where ? ` WHERE ${where}` : ''}`, params)
        const now = await nowOf(rows)
        return { now: new Date(now), locks: rows.map((row) => toRecord(row, now)).sort(byName) }
      }),
    get: (lockName) =>
      guard('inspect', lockName, async () => {
        const rows = await dialect.query(`${await select()} WHERE ${name} = ?`, [lockName])
        const row = rows[0]
        return row && toRecord(row, await nowOf(rows))
      }),
    release: (lock) => {
      const lockName = typeof lock === 'string' ? lock : lock.name
      return guard('release', lockName, async () => {
        const now = await dialect.dbNow()
        const expected = typeof lock === 'string' ? undefined : readAs.get(lock)
        // Only a held row; given a record, only the acquisition it was read from (same holder,
        // same locked_at), whatever its lock_until is now.
        const same = expected
          ? [equalTo(lockedBy, expected.lockedBy), equalTo(dialect.text(lockedAt), expected.lockedAt)]
          : []
        const where = [`${name} = ?`, `${lockUntil} > ${now}`, ...same.map(([sql]) => sql)].join(' AND ')
        const params = [lockName, ...same.flatMap(([, param]) => param)]
        return (
          (await dialect.execute(
            `UPDATE ${t.table} SET ${lockUntil} = ${dialect.releasedUntil?.(now) ?? now}, ${lockedBy} = '${RELEASED_BY}' WHERE ${where}`,
            params,
          )) > 0
        )
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        const { where, params } = selected(selection)
        return dialect.execute(
          `DELETE FROM ${t.table} WHERE ${lockUntil} <= ${await dialect.dbNow()}${where ? ` AND ${where}` : ''}`,
          params,
        )
      }),
  }
}

/** A condition that `expression` equals `value` as read, and its parameters: `IS NULL` for SQL NULL, which `=` never matches. */
function equalTo(expression: string, value: unknown): [string, unknown[]] {
  return value === null || value === undefined ? [`${expression} IS NULL`, []] : [`${expression} = ?`, [value]]
}

/** A number (or numeric string) of milliseconds, rounded; `undefined` for SQL NULL. */
function millis(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined
  const ms = Math.round(Number(value))
  return Number.isFinite(ms) ? ms : undefined
}
