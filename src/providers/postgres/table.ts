import { runsTableName } from '../../support/sql/sql-run-ledger.ts'
import { CONCURRENCY_RETRIES } from '../../support/sql/concurrency-retry.ts'
import {
  addFencingColumnDdl,
  lacksFencingColumn,
  missingFencingColumn,
  type SqlTable,
  type SqlTableOptions,
  sqlTable,
  tableOptions,
} from '../../support/sql/sql-table.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'

// Java ShedLock's table in PostgreSQL: its DDL, the now the provider compares lock_until with, and
// what the database's errors mean. The provider, the inspector and the CLI read it from here.

export const PROVIDER = 'postgres'

// The statements are written with ? placeholders, shared with the other SQL dialects; pg wants
// $1, $2... Each is rewritten once: the ledger, inspector and admin send a small set of
// statements (a ledger batch of N rows is one more, per N), not a new one per call.
const NUMBERED = new Map<string, string>()
const MAX_NUMBERED = 512

/** `sql` with its `?` placeholders numbered `$1`, `$2`..., as pg takes them. */
export function numbered(sql: string): string {
  let out = NUMBERED.get(sql)
  if (out === undefined) {
    let n = 0
    out = sql.replace(/\?/g, () => `$${++n}`)
    // Statements with names or values inlined would grow it without end: start over then.
    if (NUMBERED.size >= MAX_NUMBERED) NUMBERED.clear()
    NUMBERED.set(sql, out)
  }
  return out
}

/**
 * The database's now, as `lock_until` holds it (UTC, `timestamp without time zone`).
 * statement_timestamp(), not CURRENT_TIMESTAMP: the latter is frozen at the start of an enclosing
 * transaction, which made Java ShedLock's jOOQ provider run tasks twice (its issue #3577).
 */
export const DB_NOW = `timezone('utc', statement_timestamp())`

/** The database's now in epoch milliseconds, as a float8 (pg returns a number, not a numeric string). */
export const DB_NOW_MS = `(extract(epoch FROM statement_timestamp()) * 1000)::float8`

/** A lock timestamp column in epoch milliseconds: extract() reads the stored value as UTC, which is what the provider writes. */
export function epochMs(column: string): string {
  return `(extract(epoch FROM ${column}) * 1000)::float8`
}

/**
 * DDL for the lock table in PostgreSQL, the same as Java ShedLock's (`TIMESTAMP` columns hold UTC).
 * Idempotent (`IF NOT EXISTS`). With `fencingTokens: true`, also the nullable `fencing_token
 * BIGINT` column (for an existing table: {@link postgresFencingColumnDdl}).
 */
export function postgresSchema(options: SqlTableOptions = {}): string {
  const { table, columns: c, fencing, fencingColumn } = sqlTable(PROVIDER, options)
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    `  ${c.name} VARCHAR(64) NOT NULL,`,
    `  ${c.lockUntil} TIMESTAMP NOT NULL,`,
    `  ${c.lockedAt} TIMESTAMP NOT NULL,`,
    `  ${c.lockedBy} VARCHAR(255) NOT NULL,`,
    ...(fencing ? [`  ${fencingColumn} BIGINT NULL,`] : []),
    `  PRIMARY KEY (${c.name})`,
    ');',
  ].join('\n')
}

/**
 * The `ALTER TABLE` that adds the fencing token column to an existing lock table, for
 * `fencingTokens: true`: `ALTER TABLE shedlock ADD COLUMN fencing_token BIGINT NULL;`.
 */
export function postgresFencingColumnDdl(options: SqlTableOptions = {}): string {
  return addFencingColumnDdl(sqlTable(PROVIDER, options))
}

/** What a PostgreSQL error means for the lock and what to do about it. */
export function describePostgresError(t: SqlTable): DescribeStoreError {
  return (error, action, lockName) => {
    const code = (error as { code?: unknown } | null)?.code
    const detail = redactUrlPasswords(messageOf(error))
    if (code === '42703' && lacksFencingColumn(t, detail))
      return storeError(PROVIDER, action, lockName, missingFencingColumn(t, addFencingColumnDdl(t)), error)
    let advice: string
    switch (code) {
      case '42P01':
        advice = `table ${t.table} does not exist. Create it with:\n${postgresSchema(tableOptions(t))}`
        break
      case '42703':
      case '42P10':
        advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
        break
      case '40001':
      case '40P01':
        advice = `${code === '40001' ? 'a serialization failure' : 'a deadlock'} with concurrent lock statements persisted through ${CONCURRENCY_RETRIES + 1} attempts (${detail}); ${outcomeOf(action)}`
        break
      case '25006':
        advice = `the server is read-only (${detail}): a standby, or a primary that was demoted; ${outcomeOf(action)}. Point the pool at the primary (after a failover, at the promoted standby)`
        break
      case '22P02': {
        // requireSynchronousStandby's check raises its message through a failing cast.
        const check = /shedlock requireSynchronousStandby: (.*)"/.exec(detail)?.[1]
        advice = check === undefined ? detail : `requireSynchronousStandby is on, but ${check}; ${outcomeOf(action)}`
        break
      }
      case '22001':
        advice = `the name is too long for the ${t.columns.name} column (${detail}); use a shorter lock name or widen the column`
        break
      case 'ECONNREFUSED':
      case 'ENOTFOUND':
      case 'ETIMEDOUT':
      case 'ECONNRESET':
      case '57P01':
      case '57P03':
      case '08006':
      case '08001':
        advice = `PostgreSQL is unreachable (${detail}); ${outcomeOf(action)}. Check the server; the provider recovers by itself once it is back`
        break
      default:
        advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}

/**
 * DDL of the run history's table in PostgreSQL (see `postgresRunLedger`): one row per run, kept
 * apart from the lock table. Idempotent.
 */
export function postgresRunsSchema(options: { tableName?: string } = {}): string {
  const table = runsTableName(PROVIDER, options.tableName)
  const bare = table.split('.').at(-1)!
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    '  id VARCHAR(36) NOT NULL PRIMARY KEY,',
    '  name VARCHAR(255) NOT NULL,',
    '  slot TIMESTAMP NULL,',
    '  node VARCHAR(255) NOT NULL,',
    '  started_at TIMESTAMP NOT NULL,',
    '  finished_at TIMESTAMP NULL,',
    '  outcome VARCHAR(16) NOT NULL,',
    '  duration_ms BIGINT NULL,',
    '  error_type VARCHAR(100) NULL,',
    '  error_message VARCHAR(500) NULL,',
    '  fencing_token BIGINT NULL,',
    '  next_fire_at TIMESTAMP NULL,',
    '  triggered_by VARCHAR(255) NULL',
    ');',
    `CREATE INDEX IF NOT EXISTS ${bare}_name_started ON ${table} (name, started_at);`,
  ].join('\n')
}
