import { setTimeout as sleep } from 'node:timers/promises'
import { LockConfigurationError } from '../../core/errors.ts'
import {
  missingFencingColumn,
  type SqlTable,
  type SqlTableOptions,
  sqlTable,
  tableOptions,
} from '../../support/sql/sql-table.ts'
import { type DescribeStoreError, messageOf, outcomeOf, storeError } from '../../support/store-errors.ts'

// Java ShedLock's table in Cloud Spanner (GoogleSQL dialect): its DDL, the client surface the
// provider calls, and what Spanner's errors mean. The provider, inspector, ledger and CLI read it here.

export const PROVIDER = 'spanner'

/** A query or DML statement as `@google-cloud/spanner` takes it: named parameters `@p1`, `@p2`… */
export interface SpannerStatement {
  sql: string
  params?: Record<string, unknown>
  /** Parameter types, for values the client cannot type itself (an INT64, a NULL). */
  types?: Record<string, string>
  /** Call options of the client (see {@link ANSWER_AT_ONCE}). */
  gaxOptions?: Record<string, unknown>
}

/**
 * The call options of every statement shedlock sends: no retries of the result stream by
 * `retry-request` (gax), which answers any error, a missing table included, only after two more
 * attempts 2 and 5 seconds apart, so 7 s late. The client still resumes a stream that broke
 * (UNAVAILABLE) by itself, and the provider's `timeout` bounds each operation.
 */
export const ANSWER_AT_ONCE: Record<string, unknown> = Object.freeze({
  retryRequestOptions: Object.freeze({ retries: 0, noResponseRetries: 0 }),
})

/** The part of a `@google-cloud/spanner` read-write `Transaction` that shedlock calls. */
export interface SpannerTransaction {
  run(query: SpannerStatement & { json: true }): Promise<unknown[]>
  runUpdate(query: SpannerStatement): Promise<unknown[]>
  insert(table: string, row: Record<string, unknown>): void
  update(table: string, row: Record<string, unknown>): void
  commit(): Promise<unknown>
  rollback(): Promise<unknown>
  /** Gives the session back to the pool (idempotent: a commit or rollback has already done it). */
  end(): void
}

/**
 * The part of a `@google-cloud/spanner` `Database` (8.x) that shedlock calls: pass
 * `new Spanner({ projectId }).instance(instanceId).database(databaseId)`.
 */
export interface SpannerDatabase {
  run(query: SpannerStatement & { json: true }): Promise<unknown[]>
  getTransaction(): Promise<[SpannerTransaction]>
}

/** Whether `value` has the `Database` methods shedlock calls. */
export function isSpannerDatabase(value: unknown): value is SpannerDatabase {
  const database = value as Partial<SpannerDatabase> | null | undefined
  return typeof database?.run === 'function' && typeof database.getTransaction === 'function'
}

/** The error for a missing or wrong `database` option. */
export function missingDatabase(): LockConfigurationError {
  return new LockConfigurationError(
    'spanner: pass your @google-cloud/spanner Database as { database } (spanner.instance(id).database(id))',
  )
}

/**
 * Runs `body` in a read-write transaction, again while Spanner aborts it, until `timeoutMs` has
 * passed. Spanner aborts a transaction that lost a lock conflict and asks the client to retry it
 * (the emulator aborts every transaction that overlaps another). The client's own
 * `runTransactionAsync` waits 2, 4, 8… seconds between attempts unless the server suggests a
 * delay, longer than most locks are held; here attempts are 10 ms apart at first, doubling to at
 * most 200 ms, with jitter. `body` must commit or roll back.
 */
export async function inTransaction<T>(
  database: SpannerDatabase,
  timeoutMs: number,
  body: (transaction: SpannerTransaction) => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (let attempt = 0; ; attempt++) {
    const [transaction] = await database.getTransaction()
    try {
      return await body(transaction)
    } catch (error) {
      if (grpcCode(error) !== ABORTED) {
        // A transaction left open holds its locks until Spanner times it out (on the emulator, every transaction).
        await transaction.rollback().catch(() => {})
        throw error
      }
      if (Date.now() >= deadline) throw error
    } finally {
      transaction.end()
    }
    const pause = Math.min(200, 10 * 2 ** attempt) * (0.5 + Math.random())
    await sleep(Math.min(pause, Math.max(0, deadline - Date.now())))
  }
}

const ABORTED = 10

/** The name column's length in Java ShedLock's DDL (`STRING(64)`). */
export const NAME_LENGTH = 64

/**
 * DDL for the lock table in Spanner's GoogleSQL dialect, the same as Java ShedLock's
 * (`STRING(64)` name, `TIMESTAMP` times, `STRING(255)` locked_by, primary key `name`). Idempotent
 * (`IF NOT EXISTS`). With `fencingTokens: true`, also the nullable `fencing_token INT64` column
 * (for an existing table: {@link spannerFencingColumnDdl}). Run it with
 * `database.updateSchema(ddl)` or `gcloud spanner databases ddl update --ddl=…` (without the `;`).
 */
export function spannerSchema(options: SqlTableOptions = {}): string {
  const { table, columns: c, fencing, fencingColumn } = sqlTable(PROVIDER, options)
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    `  ${c.name} STRING(${NAME_LENGTH}) NOT NULL,`,
    `  ${c.lockUntil} TIMESTAMP NOT NULL,`,
    `  ${c.lockedAt} TIMESTAMP NOT NULL,`,
    `  ${c.lockedBy} STRING(255) NOT NULL,`,
    ...(fencing ? [`  ${fencingColumn} INT64,`] : []),
    `) PRIMARY KEY (${c.name});`,
  ].join('\n')
}

/**
 * The DDL that adds the fencing token column to an existing lock table, for `fencingTokens:
 * true`: `ALTER TABLE shedlock ADD COLUMN fencing_token INT64;` (nullable; Java ShedLock's
 * mutations leave it alone).
 */
export function spannerFencingColumnDdl(options: SqlTableOptions = {}): string {
  return fencingDdl(sqlTable(PROVIDER, options))
}

function fencingDdl(t: SqlTable): string {
  return `ALTER TABLE ${t.table} ADD COLUMN ${t.fencingColumn} INT64;`
}

/** The gRPC status code of a Spanner error, or `undefined`. */
export function grpcCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'number' ? code : undefined
}

/** Whether Spanner says the table is missing (a query names it, or a mutation writes to it). */
export function isMissingTable(error: unknown, table: string): boolean {
  const message = messageOf(error)
  const bare = table.split('.').at(-1)!
  return (
    (grpcCode(error) === 3 || grpcCode(error) === 5) &&
    new RegExp(`Table not found: \`?(?:\\w+\\.)?${bare}\\b`, 'i').test(message)
  )
}

/** The first line of Spanner's message (later lines repeat the statement with a caret under the error). */
function detailOf(error: unknown): string {
  return messageOf(error).split('\n')[0]!
}

// Spanner's words for a column the table lacks: in a query (`t.x`, `x`) and in a mutation.
const MISSING_COLUMN = /Name (\w+) not found inside|Unrecognized name: (\w+)|Column not found in table [\w.]+: (\w+)/i

/** What a Spanner error means for the lock and what to do about it. */
export function describeSpannerError(t: SqlTable): DescribeStoreError {
  return (error, action, lockName) => {
    const code = grpcCode(error)
    const detail = detailOf(error)
    const column = MISSING_COLUMN.exec(detail)?.slice(1).find(Boolean)
    if (t.fencing && column?.toLowerCase() === t.fencingColumn.toLowerCase()) {
      return storeError(PROVIDER, action, lockName, missingFencingColumn(t, fencingDdl(t)), error)
    }
    let advice: string
    if (isMissingTable(error, t.table)) {
      advice = `table ${t.table} does not exist. Create it (shedlock init, or database.updateSchema) with:\n${spannerSchema(tableOptions(t))}`
    } else if (column !== undefined) {
      advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
    } else if (/Database not found|Instance not found/i.test(detail)) {
      advice = `${detail}; check the project, instance and database the client was built for`
    } else if (code === 9 && /exceeds the maximum size/i.test(detail)) {
      advice = `the name is too long for the ${t.columns.name} column (${detail}); use a shorter lock name or widen the column`
    } else if (/Database is closed|client has already been closed/i.test(detail)) {
      advice = `the Database was closed (${detail}); build the provider on an open one`
    } else if (code === 10) {
      advice = `Spanner kept aborting the transaction (contention on the row) until the timeout (${detail}); ${outcomeOf(action)}`
    } else if (code === 14 || code === 4) {
      advice = `Spanner is unreachable (${detail}); ${outcomeOf(action)}. Check the endpoint and the network (SPANNER_EMULATOR_HOST for the emulator); the provider recovers by itself once it is back`
    } else if (code === 7 || code === 16) {
      advice = `Spanner refused the credentials (${detail}); the service account needs roles/spanner.databaseUser on the database`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}

/** A Spanner `TIMESTAMP` as read with `json: true` (a `PreciseDate`, or a Date), in nanoseconds since the epoch. */
export function nanosOf(value: unknown): bigint | undefined {
  if (value === null || value === undefined) return undefined
  const precise = value as { getFullTime?: () => unknown }
  if (typeof precise.getFullTime === 'function') return BigInt(precise.getFullTime() as bigint | string)
  if (value instanceof Date) return BigInt(value.getTime()) * 1_000_000n
  if (typeof value === 'string') {
    const ms = Date.parse(value)
    return Number.isNaN(ms) ? undefined : BigInt(ms) * 1_000_000n
  }
  return undefined
}

/** Nanoseconds since the epoch as whole milliseconds (rounded down). */
export function msOf(nanos: bigint): number {
  return Number(nanos / 1_000_000n)
}
