import { type Clock, systemClock } from '../../core/clock.ts'
import type { SqlAccessor } from './sql-accessor.ts'
import { fencingTokenOf, lockAtLeastAnchor } from './sql-statement-values.ts'
import { FencingFloor } from '../fencing.ts'
import { type SqlTable, utcTimestamp } from './sql-table.ts'

// SQLite's SQL for Java ShedLock's lock table, shared by the stores that speak it: a SQLite file
// (shedlock/sqlite) and Cloudflare D1 (shedlock/cloudflare-d1), which runs SQLite on Cloudflare's
// side. Times are UTC text, and "database time" is SQLite's `'now'`: the clock of the machine
// that runs SQLite. Each store says whose machine that is and runs the statements its own way.

/** SQLite's own datetime text, UTC, to the millisecond: `YYYY-MM-DD HH:MM:SS.SSS`, the format utcTimestamp() writes. */
export const FORMAT: string = `'%Y-%m-%d %H:%M:%f'`

/** The database's now, as the lock columns hold it. 'now' is the same for every use within one statement, so a statement compares against one instant. */
export const DB_NOW: string = `strftime(${FORMAT}, 'now')`

/** The database's now plus a modifier bound to the `?`, e.g. `+30.000 seconds`. */
export const DB_NOW_PLUS: string = `strftime(${FORMAT}, 'now', ?)`

/**
 * A time of the lock table (a column holding UTC text, or `'now'`) in epoch milliseconds, as a
 * REAL. julianday() parses the stored `YYYY-MM-DD HH:MM:SS.SSS` text (also without milliseconds,
 * or with a `T`) as UTC; 2440587.5 is the Julian day of the Unix epoch. NULL for text that is not
 * a time.
 */
export function epochMs(expression: string): string {
  return `((julianday(${expression}) - 2440587.5) * 86400000.0)`
}

/** The database's now in epoch milliseconds, on the clock of the machine that runs SQLite. */
export const DB_NOW_MS: string = epochMs(`'now'`)

/**
 * The first token of a row that has none: SQLite's now in whole milliseconds since the epoch,
 * times 1000 (as `fencingFloor()`), plus 1; above every token the name had before, unless the
 * clock went back by more than the time since (support/fencing.ts). SQLite's clock has no finer
 * grain, so a row deleted and taken again within the millisecond of its last token would repeat
 * it: the bound parameter, one more than the greatest token this accessor has seen, keeps the
 * tokens of one process increasing then (a delete and two acquisitions in a millisecond happen on
 * an embedded database: 1 CI run in 30).
 */
export const FENCING_FLOOR: string = `MAX(CAST(ROUND(${DB_NOW_MS}) AS INTEGER) * 1000 + 1, CAST(? AS INTEGER))`

/**
 * The DDL of the lock table: Java ShedLock's columns, with times as UTC text (which sorts as text
 * in time order), and with `fencingTokens` the nullable `fencing_token INTEGER` (SQLite's 64-bit
 * integer). Idempotent.
 */
export function sqliteLockTableDdl(t: SqlTable): string {
  const c = t.columns
  return [
    `CREATE TABLE IF NOT EXISTS ${t.table} (`,
    `  ${c.name} TEXT NOT NULL PRIMARY KEY,`,
    `  ${c.lockUntil} TEXT NOT NULL,`,
    `  ${c.lockedAt} TEXT NOT NULL,`,
    `  ${c.lockedBy} TEXT NOT NULL${t.fencing ? ',' : ''}`,
    ...(t.fencing ? [`  ${t.fencingColumn} INTEGER NULL`] : []),
    ');',
  ].join('\n')
}

/** One of the four statements of {@link sqliteAccessor}. */
export type SqliteStatementKind = 'acquire' | 'extend' | 'unlock' | 'unlockExtended'

/**
 * A statement of each kind, made by `prepare` on first use and kept: a kind's text never changes.
 * A `prepare` that throws (say, the table is not there yet) keeps nothing, so the next call tries
 * again.
 */
export function preparedOnce<S>(prepare: (sql: string) => S): (kind: SqliteStatementKind, sql: string) => S {
  const prepared = new Map<SqliteStatementKind, S>()
  return (kind, sql) => {
    let found = prepared.get(kind)
    if (!found) {
      found = prepare(sql)
      prepared.set(kind, found)
    }
    return found
  }
}

/**
 * Runs statement `kind` (its text is `sql`, the same text for every call of one kind, so it may
 * be prepared once) with `params` bound to its `?` in order; resolves to the rows it changed.
 */
export type RunSqliteStatement = (kind: SqliteStatementKind, sql: string, params: string[]) => Promise<number>

/** Like {@link RunSqliteStatement}, for a statement with `RETURNING`: resolves to its first row, `undefined` for none. */
export type FirstSqliteRow = (
  kind: SqliteStatementKind,
  sql: string,
  params: string[],
) => Promise<Record<string, unknown> | undefined>

/**
 * The provider's statements on SQLite: one upsert-if-expired per acquire (a missing row is
 * inserted, an expired one taken over, a held one left alone), one owner-checked `UPDATE` per
 * extend and per release. With `useDbTime`, every time is SQLite's `'now'` plus a modifier, and
 * `lockAtLeastFor` counts from `locked_at` (see `lockAtLeastAnchor`); without, times are
 * `clock`'s, bound as UTC text.
 *
 * With `t.fencing`, the upsert also sets the row's token (one more than the row's for a
 * takeover; {@link FENCING_FLOOR} for a row without one: new, recreated after a delete, or
 * inserted by Java ShedLock) and returns it, through `first`, which is then needed.
 */
export function sqliteAccessor(
  t: SqlTable,
  useDbTime: boolean,
  run: RunSqliteStatement,
  clock: Clock = systemClock,
  first?: FirstSqliteRow,
): SqlAccessor {
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const token = t.fencingColumn
  const upsert = (untilSql: string, nowSql: string): string =>
    `INSERT INTO ${t.table} (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}${t.fencing ? `, ${token}` : ''}) VALUES (?, ${untilSql}, ${nowSql}, ?${t.fencing ? `, ${FENCING_FLOOR}` : ''}) ` +
    `ON CONFLICT(${name}) DO UPDATE SET ${lockUntil} = excluded.${lockUntil}, ${lockedAt} = excluded.${lockedAt}, ${lockedBy} = excluded.${lockedBy}` +
    `${t.fencing ? `, ${token} = COALESCE(${token} + 1, excluded.${token})` : ''} ` +
    `WHERE ${lockUntil} <= excluded.${lockedAt}${t.fencing ? ` RETURNING ${token} AS fencing_token` : ''}`
  // The acquire: rows changed, or with fencing tokens the row the upsert returned.
  if (t.fencing && !first) throw new TypeError('sqliteAccessor: fencing tokens need first()')
  // A fresh row's floor is above every token this accessor has seen (FENCING_FLOOR).
  const floor = new FencingFloor(clock)
  const acquiring = async (sql: string, params: string[]): Promise<boolean | bigint> => {
    if (!t.fencing) return (await run('acquire', sql, params)) > 0
    // The floor's parameter comes last: the token is the upsert's last value.
    params.push(String(floor.aboveSeen()))
    const row = await first!('acquire', sql, params)
    return floor.saw(row === undefined ? false : fencingTokenOf(row.fencing_token))
  }

  if (useDbTime) {
    // Parameters are bound in the order the `?` appear in each text.
    const sql: Record<SqliteStatementKind, string> = {
      // (name, until modifier, owner[, floor])
      acquire: upsert(DB_NOW_PLUS, DB_NOW),
      // (until modifier, name, owner)
      extend: `UPDATE ${t.table} SET ${lockUntil} = ${DB_NOW_PLUS} WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ${DB_NOW}`,
      // (modifier from locked_at, name, owner)
      unlock: `UPDATE ${t.table} SET ${lockUntil} = MAX(strftime(${FORMAT}, ${lockedAt}, ?), ${DB_NOW}) WHERE ${name} = ? AND ${lockedBy} = ?`,
      // (modifier from now, name, owner)
      unlockExtended: `UPDATE ${t.table} SET ${lockUntil} = ${DB_NOW_PLUS} WHERE ${name} = ? AND ${lockedBy} = ?`,
    }
    return {
      acquire: (c, owner) => acquiring(sql.acquire, [c.name, secondsModifier(c.lockAtMostFor / 1000), owner]),
      extend: async (next, owner) =>
        (await run('extend', sql.extend, [secondsModifier(next.lockAtMostFor / 1000), next.name, owner])) > 0,
      unlock: async (current, owner, acquired) => {
        const anchor = lockAtLeastAnchor(current, acquired, clock)
        const kind = anchor.from === 'lockedAt' ? 'unlock' : 'unlockExtended'
        await run(kind, sql[kind], [secondsModifier(anchor.seconds), current.name, owner])
      },
    }
  }
  const sql = {
    // (name, until, now, owner[, floor])
    acquire: upsert('?', '?'),
    // (until, name, owner, now)
    extend: `UPDATE ${t.table} SET ${lockUntil} = ? WHERE ${name} = ? AND ${lockedBy} = ? AND ${lockUntil} > ?`,
    // (until, name, owner): with app time every release counts from this process's clock.
    unlock: `UPDATE ${t.table} SET ${lockUntil} = ? WHERE ${name} = ? AND ${lockedBy} = ?`,
  }
  return {
    acquire: (c, owner) =>
      acquiring(sql.acquire, [c.name, utcTimestamp(c.lockAtMostUntil.getTime()), utcTimestamp(clock.now()), owner]),
    extend: async (next, owner) =>
      (await run('extend', sql.extend, [
        utcTimestamp(next.lockAtMostUntil.getTime()),
        next.name,
        owner,
        utcTimestamp(clock.now()),
      ])) > 0,
    unlock: async (current, owner) => {
      const until = Math.max(clock.now(), current.lockAtLeastUntil.getTime())
      await run('unlock', sql.unlock, [utcTimestamp(until), current.name, owner])
    },
  }
}

/** A date modifier for strftime(), e.g. `+30.000 seconds`. */
function secondsModifier(seconds: number): string {
  return `+${Math.max(0, seconds).toFixed(3)} seconds`
}
