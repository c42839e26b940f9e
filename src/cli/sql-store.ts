import type { LockProvider } from '../core/lock-provider.ts'
import type { SqlTable } from '../support/sql/sql-table.ts'
import { CliError } from './command.ts'
import type { Check, ClockReading, LockRecord, LockSnapshot, Store } from './store.ts'

/** A column of the lock table as the database's catalog describes it. */
export interface SqlColumn {
  readonly name: string
  /** The catalog's type name, lower case. */
  readonly type: string
}

/**
 * What one SQL database contributes to a {@link Store}. Statements use `?` placeholders; a
 * dialect with other placeholders rewrites them in `query` and `execute`.
 */
export interface SqlDialect {
  readonly kind: string
  readonly where: string
  /** Whose clock `nowMs` reads, for list's header. */
  readonly clock: string
  readonly table: SqlTable
  /** Rows of a `SELECT`. */
  query(sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** Rows matched by an `UPDATE` or `DELETE`, or 0 for DDL. */
  execute(sql: string, params: readonly unknown[]): Promise<number>
  /** The database's now, in the lock columns' format: what the provider compares `lock_until` with. */
  readonly dbNow: string
  /** An expression of the database's now as epoch milliseconds (a number). */
  readonly nowMs: string
  /** An expression of a timestamp column as epoch milliseconds (a number), reading the stored UTC value. */
  epochMs(column: string): string
  /** An expression of a timestamp column as text, exactly as stored, for equality checks. */
  text(column: string): string
  tableExists(): Promise<boolean>
  /** The table's columns, in catalog order. */
  columns(): Promise<SqlColumn[]>
  /** The primary key's columns, in key order; empty when there is none. */
  primaryKey(): Promise<string[]>
  /** Type names accepted for each kind of column; anything else is a warning. */
  readonly expectedTypes: { readonly name: readonly string[]; readonly time: readonly string[]; readonly lockedBy: readonly string[] }
  /** The DDL of `shedlock schema` for this table. */
  schema(): string
  /** The `shedlock init` command line that creates the table, for advice. */
  readonly initCommand: string
  provider(): LockProvider
  version(): Promise<string>
  readClock(): Promise<ClockReading | string>
  readonly clockDependence: string
  close(): Promise<void>
}

/** The {@link Store} over a SQL dialect: every statement reads Java ShedLock's table as the SQL providers write it. */
export function sqlStore(dialect: SqlDialect): Store {
  const { table: t } = dialect
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const readNow = async (): Promise<number> => Math.round(Number((await dialect.query(`SELECT ${dialect.nowMs} AS now_ms`, []))[0]?.now_ms))
  const select =
    `SELECT ${name} AS name, ${lockedBy} AS locked_by, ${dialect.epochMs(lockedAt)} AS locked_at_ms, ` +
    `${dialect.epochMs(lockUntil)} AS lock_until_ms, ${dialect.text(lockUntil)} AS lock_until_text FROM ${t.table}`
  const toRecord = (row: Record<string, unknown>): LockRecord => ({
    name: String(row.name),
    lockedBy: row.locked_by === null || row.locked_by === undefined ? undefined : String(row.locked_by),
    lockedAt: millis(row.locked_at_ms),
    lockUntil: millis(row.lock_until_ms),
    token: { lockedBy: row.locked_by, lockUntil: row.lock_until_text },
  })
  const { clock } = dialect
  // A failed read of a missing table says how to create it, rather than quoting the driver.
  const reading = async <T>(read: () => Promise<T>): Promise<T> => {
    try {
      return await read()
    } catch (error) {
      if (await dialect.tableExists().catch(() => true)) throw error
      throw new CliError(`table ${t.table} does not exist; create it with: ${dialect.initCommand}`, { cause: error })
    }
  }

  return {
    kind: dialect.kind,
    where: dialect.where,
    extensible: true,
    provider: () => dialect.provider(),
    list: (): Promise<LockSnapshot<LockRecord[]>> =>
      reading(async () => {
        const now = await readNow()
        const rows = await dialect.query(`${select} ORDER BY ${name}`, [])
        return { now, clock, value: rows.map(toRecord) }
      }),
    find: (lockName): Promise<LockSnapshot<LockRecord | undefined>> =>
      reading(async () => {
        const now = await readNow()
        const row = (await dialect.query(`${select} WHERE ${name} = ?`, [lockName]))[0]
        return { now, clock, value: row && toRecord(row) }
      }),
    async release(record) {
      const token = record.token as { lockedBy: unknown; lockUntil: unknown }
      // The row stays, as the providers leave it; lock_until moves to the database's now, and only
      // if the row still holds what was shown (same holder, same expiry, still held).
      const changed = await dialect.execute(
        `UPDATE ${t.table} SET ${lockUntil} = ${dialect.dbNow} WHERE ${name} = ? AND ${lockedBy} = ? AND ${dialect.text(lockUntil)} = ? AND ${lockUntil} > ${dialect.dbNow}`,
        [record.name, token.lockedBy, token.lockUntil],
      )
      return changed > 0
    },
    async init() {
      if (await dialect.tableExists()) return [`table ${t.table} already exists: nothing to do (shedlock doctor checks its columns)`]
      await dialect.execute(dialect.schema(), [])
      return [`created table ${t.table}`]
    },
    ping: () => dialect.version(),
    async structure(): Promise<Check[]> {
      if (!(await dialect.tableExists())) {
        return [{ status: 'fail', label: `table ${t.table}`, detail: `does not exist; create it with: ${dialect.initCommand}` }]
      }
      const columns = await dialect.columns()
      const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]))
      const expected = Object.values(t.columns)
      const missing = expected.filter((c) => !byName.has(c.toLowerCase()))
      if (missing.length > 0) {
        return [
          {
            status: 'fail',
            label: `table ${t.table}`,
            detail: `lacks the column${missing.length === 1 ? '' : 's'} ${missing.join(', ')} (it has ${columns.map((c) => c.name).join(', ') || 'none'}); shedlock needs ${expected.join(', ')}, see: shedlock schema`,
          },
        ]
      }
      const checks: Check[] = []
      const key = (await dialect.primaryKey()).map((c) => c.toLowerCase())
      const keyOk = key.length === 1 && key[0] === name.toLowerCase()
      checks.push({
        status: keyOk ? 'ok' : 'fail',
        label: `table ${t.table}`,
        detail: keyOk
          ? `columns ${expected.map((c) => `${c} ${byName.get(c.toLowerCase())!.type}`).join(', ')}; primary key (${name})`
          : `the primary key is ${key.length === 0 ? 'missing' : `(${key.join(', ')})`}, but must be (${name}) alone: the lock upsert finds the row by it`,
      })
      const wrongTypes = (
        [
          [name, dialect.expectedTypes.name],
          [lockUntil, dialect.expectedTypes.time],
          [lockedAt, dialect.expectedTypes.time],
          [lockedBy, dialect.expectedTypes.lockedBy],
        ] as const
      ).filter(([column, types]) => !types.includes(byName.get(column.toLowerCase())!.type))
      if (wrongTypes.length > 0) {
        checks.push({
          status: 'warn',
          label: 'column types',
          detail: `${wrongTypes.map(([column, types]) => `${column} is ${byName.get(column.toLowerCase())!.type}, expected ${types.join(' or ')}`).join('; ')} (see: shedlock schema)`,
        })
      }
      return checks
    },
    async remove(lockName) {
      await dialect.execute(`DELETE FROM ${t.table} WHERE ${name} = ?`, [lockName])
    },
    readClock: () => dialect.readClock(),
    clockDependence: dialect.clockDependence,
    close: () => dialect.close(),
  }
}

/** A number (or numeric string) of milliseconds, rounded; `undefined` for SQL NULL. */
function millis(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined
  const ms = Math.round(Number(value))
  return Number.isFinite(ms) ? ms : undefined
}
