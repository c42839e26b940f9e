import type { LockInspector } from '../../core/lock-inspector.ts'
import { sqlLockInspector } from '../../support/sql/sql-inspector.ts'
import { type SqlTableOptions, sqlTable } from '../../support/sql/sql-table.ts'
import {
  ANSWER_AT_ONCE,
  describeSpannerError,
  inTransaction,
  isSpannerDatabase,
  missingDatabase,
  PROVIDER,
  type SpannerDatabase,
  type SpannerStatement,
} from './format.ts'

/** Options of {@link spannerLockInspector}: the provider's database and table options. */
export interface SpannerLockInspectorOptions extends SqlTableOptions {
  /** Your `@google-cloud/spanner` `Database` (the provider's). */
  database: SpannerDatabase
  /** How long a force-release or `removeExpired()` may retry aborted transactions, in milliseconds. @default 10000 */
  timeoutMs?: number
}

/** Spanner's now, as the provider compares `lock_until` with it. */
export const DB_NOW = 'CURRENT_TIMESTAMP()'

/**
 * A statement with `?` placeholders (shared with the other SQL dialects) as Spanner takes it:
 * named `@p1`, `@p2`…; whole numbers and bigints typed INT64; a `null` written as `NULL`, since
 * Spanner refuses an untyped null parameter (INVALID_ARGUMENT, with no message).
 */
export function spannerStatement(sql: string, values: readonly unknown[]): SpannerStatement {
  let n = 0
  const params: Record<string, unknown> = {}
  const types: Record<string, string> = {}
  const text = sql.replace(/\?/g, () => {
    const value = values[n++]
    if (value === null || value === undefined) return 'NULL'
    const key = `p${n}`
    params[key] = value
    if (typeof value === 'number' && Number.isInteger(value)) types[key] = 'int64'
    else if (typeof value === 'bigint') {
      params[key] = value.toString()
      types[key] = 'int64'
    }
    return `@${key}`
  })
  return { sql: text, params, types, gaxOptions: ANSWER_AT_ONCE }
}

/** Runs `sql` in a read-write transaction (DML and DDL-free), resolving to the rows it changed. */
export function spannerExecute(database: SpannerDatabase, timeout: number) {
  return (sql: string, values: readonly unknown[]): Promise<number> =>
    inTransaction(database, timeout, async (tx) => {
      const [count] = await tx.runUpdate(spannerStatement(sql, values))
      await tx.commit()
      return Number(count ?? 0)
    })
}

/** Rows of a `SELECT` (a strong single-use read), as plain objects. */
export function spannerQuery(database: SpannerDatabase) {
  return async (sql: string, values: readonly unknown[]): Promise<Record<string, unknown>[]> =>
    ((await database.run({ ...spannerStatement(sql, values), json: true })) as [Record<string, unknown>[]])[0]
}

/**
 * Reads and force-releases the locks of a Spanner lock table, in the provider's (and Java
 * ShedLock's) format: for dashboards, health endpoints and operators. Reads are strong
 * single-use queries; times are read on Spanner's clock (`CURRENT_TIMESTAMP()`), the one the
 * provider decides expiry on by default. A force-release (one DML `UPDATE` in a read-write
 * transaction) sets `lock_until` to now and `locked_by` to `"released"`, and keeps the row, so the
 * holder can no longer touch it; given a record, only while the row holds the acquisition read
 * (its `locked_by` and `locked_at`; extensions move only `lock_until`).
 *
 * ```ts
 * import { spannerLockInspector } from 'shedlock/spanner'
 * const inspector = spannerLockInspector({ database })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing database or table or column names that are not plain identifiers.
 */
export function spannerLockInspector(options: SpannerLockInspectorOptions): LockInspector {
  const { database } = options ?? {}
  if (!isSpannerDatabase(database)) throw missingDatabase()
  const table = sqlTable(PROVIDER, options)
  return sqlLockInspector({
    provider: PROVIDER,
    clock: "the Spanner server's clock (CURRENT_TIMESTAMP())",
    table,
    query: spannerQuery(database),
    execute: spannerExecute(database, options.timeoutMs ?? 10_000),
    dbNow: () => DB_NOW,
    nowMs: () => `UNIX_MILLIS(${DB_NOW})`,
    epochMs: (column) => `UNIX_MILLIS(${column})`,
    // Full precision, in UTC: the text a release compares with, exactly as the row holds it.
    text: (column) => `FORMAT_TIMESTAMP('%Y-%m-%dT%H:%M:%E*SZ', ${column}, 'UTC')`,
    describe: describeSpannerError(table),
  })
}
