import {
  addFencingColumnDdl,
  lacksFencingColumn,
  missingFencingColumn,
  type SqlTable,
  type SqlTableOptions,
  sqlTable,
  tableOptions,
} from '../../support/sql/sql-table.ts'
import { sqliteLockTableDdl } from '../../support/sql/sqlite-dialect.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'

// The lock table in D1: SQLite's, in Java ShedLock's layout (support/sql/sqlite-dialect.ts holds
// its SQL, shared with shedlock/sqlite). Here: the D1 binding's shape, the DDL and what D1's
// errors mean.

/** The provider's name, as messages and diagnostics give it. */
export const PROVIDER = 'cloudflare-d1'

/** What `run()` of a D1 statement resolves to: only `meta.changes` is read. */
export interface D1RunResult {
  readonly meta: { readonly changes: number }
}

/** What `all()` of a D1 statement resolves to: only `results` is read. */
export interface D1RowsResult {
  readonly results: readonly unknown[]
}

/**
 * A D1 prepared statement, as {@link D1LockDatabase.prepare} returns it: `bind` returns a new
 * statement with the values bound to its `?` in order.
 */
export interface D1LockStatement {
  bind(...values: string[]): D1LockStatement
  run(): Promise<D1RunResult>
  all(): Promise<D1RowsResult>
}

/**
 * The part of a Cloudflare D1 binding (`env.DB`, a `D1Database`) that the provider and the
 * inspector call. We import no Workers types: pass the binding as it is, in a Worker or through
 * Miniflare's `getD1Database()`.
 */
export interface D1LockDatabase {
  prepare(query: string): D1LockStatement
}

/**
 * DDL for the lock table in D1: Java ShedLock's columns, with times as UTC text
 * `YYYY-MM-DD HH:MM:SS.SSS`, the table of `shedlock/sqlite`. Idempotent (`IF NOT EXISTS`): put it
 * in a D1 migration (`wrangler d1 migrations create`), or run it with `env.DB.exec()`. With
 * `fencingTokens: true`, also the nullable `fencing_token INTEGER` column (for an existing table:
 * {@link d1FencingColumnDdl}).
 *
 * ```ts
 * import { d1Schema } from 'shedlock/cloudflare-d1'
 * const ddl: string = d1Schema({ tableName: 'shedlock' })
 * ```
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function d1Schema(options: SqlTableOptions = {}): string {
  return sqliteLockTableDdl(sqlTable(PROVIDER, options))
}

/**
 * The `ALTER TABLE` that adds the fencing token column to an existing lock table, for
 * `fencingTokens: true`: `ALTER TABLE shedlock ADD COLUMN fencing_token INTEGER NULL;` (a D1
 * migration).
 */
export function d1FencingColumnDdl(options: SqlTableOptions = {}): string {
  return addFencingColumnDdl(sqlTable(PROVIDER, options), 'INTEGER')
}

/** The error for a `database` that is not a D1 binding. */
export const NOT_A_BINDING =
  'cloudflare-d1: pass your D1 binding as { database }, e.g. env.DB in a Worker (an object with prepare(sql))'

/**
 * What a D1 error means for the lock and what to do about it. D1 reports SQLite's errors as
 * `D1_ERROR: <SQLite's message>: SQLITE_ERROR`; anything else (a network failure between the
 * Worker and the database, an overloaded database) is passed on as D1 said it.
 */
export function describeD1Error(t: SqlTable): DescribeStoreError {
  return (error, action, lockName) => {
    const detail = redactUrlPasswords(messageOf(error))
    let advice: string
    if (/\bno such table\b/i.test(detail)) {
      advice = `table ${t.table} does not exist (${detail}). Create it, in a D1 migration or with env.DB.exec(), with:\n${d1Schema(tableOptions(t))}`
    } else if (lacksFencingColumn(t, detail)) {
      advice = missingFencingColumn(t, addFencingColumnDdl(t, 'INTEGER'))
    } else if (/\bno such column\b|\bhas no column named\b|ON CONFLICT clause does not match/i.test(detail)) {
      advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
    } else {
      advice = `${detail}; ${outcomeOf(action)}`
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}
