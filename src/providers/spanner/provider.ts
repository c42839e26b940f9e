import { systemClock } from '../../core/clock.ts'
import { parseDuration } from '../../core/duration.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { FencingFloor, parseFencingToken } from '../../support/fencing.ts'
import {
  DEFAULT_SQL_TIMEOUT,
  lockAtLeastAnchor,
  type SqlAccessor,
  type SqlLockProviderOptions,
  type SqlTableLimits,
  sqlLockProvider,
} from '../../support/sql/sql-lock-provider.ts'
import { type SqlTable, sqlTable } from '../../support/sql/sql-table.ts'
import {
  ANSWER_AT_ONCE,
  describeSpannerError,
  inTransaction,
  isSpannerDatabase,
  missingDatabase,
  msOf,
  nanosOf,
  PROVIDER,
  type SpannerDatabase,
  type SpannerTransaction,
} from './format.ts'
import { spannerLockInspector } from './inspector.ts'

/** Options of {@link spannerLockProvider}. */
export interface SpannerLockProviderOptions extends SqlLockProviderOptions {
  /** Your `@google-cloud/spanner` `Database` (`spanner.instance(i).database(d)`). The provider opens nothing of its own. */
  database: SpannerDatabase
}

/** One lock row as a transaction read it, with the database's now. */
interface Row {
  /** Spanner's `CURRENT_TIMESTAMP()` in the transaction, in nanoseconds. */
  readonly dbNow: bigint
  /** Absent: no row. */
  readonly lockUntil: bigint | undefined
  readonly lockedAt: bigint | undefined
  readonly lockedBy: string | undefined
  readonly fencingToken: bigint | undefined
}

/**
 * Locks as rows of a Cloud Spanner table in Java ShedLock's format (create it with
 * {@link spannerSchema} or `shedlock init`), through your `@google-cloud/spanner` `Database`, so
 * Java and Node services share one table: one read-write transaction per acquire, extend and
 * release, run again after an abort until `timeout`. Extensible; Spanner's `CURRENT_TIMESTAMP()`
 * decides expiry unless `useDbTime: false`.
 *
 * ```ts
 * import { Spanner } from '@google-cloud/spanner'
 * import { spannerLockProvider } from 'shedlock/spanner'
 * const database = new Spanner({ projectId: 'my-project' }).instance('my-instance').database('my-db')
 * const provider = spannerLockProvider({ database })
 * ```
 *
 * A name longer than the `name` column rejects with `LockConfigurationError` before anything is
 * written. See docs/providers/spanner.md.
 *
 * @throws LockConfigurationError for a missing database, table or column names that are not
 *   plain identifiers, or a bad `timeout`.
 */
export function spannerLockProvider(
  options: SpannerLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { database } = options ?? {}
  if (!isSpannerDatabase(database)) throw missingDatabase()
  const t = sqlTable(PROVIDER, options)
  const clock = options.clock ?? systemClock
  const floor = new FencingFloor(clock)
  const useDbTime = options.useDbTime ?? true
  // The client's retries of aborted transactions stop when the provider's timeout does.
  const timeout = parseDuration(options.timeout ?? DEFAULT_SQL_TIMEOUT)
  const rows = spannerRows(database, t, timeout)
  // The now that decides expiry, in nanoseconds: Spanner's, or this process's.
  const nowOf = (row: Row): bigint => (useDbTime ? row.dbNow : BigInt(clock.now()) * 1_000_000n)
  const at = (nanos: bigint, plusMs: number): Date => new Date(msOf(nanos) + plusMs)

  const accessor: SqlAccessor = {
    readLimits: () => readLimits(database, t),
    acquire: (c, owner) =>
      rows.transaction(c.name, (row, write) => {
        const now = nowOf(row)
        if (row.lockUntil !== undefined && row.lockUntil > now) return false
        const values: Record<string, unknown> = {
          [t.columns.lockUntil]: at(now, c.lockAtMostFor),
          [t.columns.lockedAt]: at(now, 0),
          [t.columns.lockedBy]: owner,
        }
        let token: bigint | undefined
        if (t.fencing) {
          // The row's count plus one; a row without one (new, or only ever Java's) starts from the
          // transaction's time in µs, above every token this provider has seen.
          token = floor.saw((row.fencingToken ?? floor.at(now / 1000n)) + 1n)
          values[t.fencingColumn] = token.toString()
        }
        write(row.lockUntil === undefined ? 'insert' : 'update', values)
        return token ?? true
      }),
    extend: (next, owner) =>
      rows.transaction(next.name, (row, write) => {
        const now = nowOf(row)
        if (row.lockedBy !== owner || row.lockUntil === undefined || row.lockUntil <= now) return false
        write('update', { [t.columns.lockUntil]: at(now, next.lockAtMostFor) })
        return true
      }),
    unlock: async (current, owner, acquired) => {
      await rows.transaction(current.name, (row, write) => {
        if (row.lockedBy !== owner) return false
        write('update', { [t.columns.lockUntil]: releasedUntil(row, current, acquired) })
        return true
      })
    },
  }

  /** `max(now, lockAtLeastUntil)`: from the row's `locked_at` while unextended (Spanner's clock), else from now. */
  const releasedUntil = (row: Row, current: LockConfiguration, acquired: LockConfiguration): Date => {
    if (!useDbTime) return new Date(Math.max(clock.now(), current.lockAtLeastUntil.getTime()))
    const anchor = lockAtLeastAnchor(current, acquired, clock)
    const from = anchor.from === 'lockedAt' && row.lockedAt !== undefined ? row.lockedAt : row.dbNow
    const until = msOf(from) + Math.round(anchor.seconds * 1000)
    return new Date(Math.max(msOf(row.dbNow), until))
  }

  const inspect = { database, tableName: t.table, columnNames: t.columns }
  return Object.assign(sqlLockProvider(PROVIDER, accessor, options, describeSpannerError(t)), {
    inspector: () => spannerLockInspector(inspect),
  })
}

type Write = (kind: 'insert' | 'update', values: Record<string, unknown>) => void

/**
 * Runs `decide` in a read-write transaction over the row of `name`: it reads the row (and the
 * database's now), may buffer one mutation with `write`, and the transaction commits when it did,
 * else rolls back. Resolves to what `decide` returned.
 */
function spannerRows(database: SpannerDatabase, t: SqlTable, timeout: number) {
  const c = t.columns
  const token = t.fencing ? `, CAST(t.${t.fencingColumn} AS STRING) AS fencing_token` : ''
  // A LEFT JOIN on a one-row table: the database's now comes back whether or not the row exists.
  const read =
    `SELECT CURRENT_TIMESTAMP() AS db_now, t.${c.lockUntil} AS lock_until, t.${c.lockedAt} AS locked_at, ` +
    `t.${c.lockedBy} AS locked_by${token} FROM UNNEST([1]) AS one LEFT JOIN ${t.table} AS t ON t.${c.name} = @name`
  return {
    transaction: <T>(name: string, decide: (row: Row, write: Write) => T | false): Promise<T | false> =>
      inTransaction(database, timeout, async (tx: SpannerTransaction) => {
        const [found] = (await tx.run({ sql: read, params: { name }, json: true, gaxOptions: ANSWER_AT_ONCE })) as [
          Record<string, unknown>[],
        ]
        const r = found[0] ?? {}
        const row: Row = {
          dbNow: nanosOf(r.db_now) ?? BigInt(Date.now()) * 1_000_000n,
          lockUntil: nanosOf(r.lock_until),
          lockedAt: nanosOf(r.locked_at),
          lockedBy: typeof r.locked_by === 'string' ? r.locked_by : undefined,
          fencingToken: parseFencingToken(r.fencing_token),
        }
        let written = false
        const result = decide(row, (kind, values) => {
          written = true
          tx[kind](t.table, { [c.name]: name, ...values })
        })
        if (written) await tx.commit()
        else await tx.rollback()
        return result
      }),
  }
}

/** The `name` column's declared length, as `STRING(64)` says it; `undefined` while the table is missing. */
async function readLimits(database: SpannerDatabase, t: SqlTable): Promise<SqlTableLimits | undefined> {
  const [rows] = (await database.run({
    sql: 'SELECT SPANNER_TYPE AS type FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = @schema AND TABLE_NAME = @table AND COLUMN_NAME = @column',
    params: { schema: t.schema ?? '', table: t.bareTable, column: t.columns.name },
    json: true,
    gaxOptions: ANSWER_AT_ONCE,
  })) as [Record<string, unknown>[]]
  const type = rows[0]?.type
  if (typeof type !== 'string') return undefined
  const length = /^STRING\((\d+)\)$/i.exec(type)?.[1]
  return length === undefined
    ? {}
    : { maxNameLength: Number(length), nameColumn: `column ${t.columns.name} of ${t.table}, ${type}` }
}
