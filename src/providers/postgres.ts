import { systemClock } from '../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { type DescribeSqlError, lockAtLeastAnchor, messageOf, type SqlAccessor, type SqlLockProviderOptions, sqlLockProvider } from '../support/sql/sql-lock-provider.ts'
import { type SqlTable, type SqlTableOptions, sqlTable, utcTimestamp } from '../support/sql/sql-table.ts'

/**
 * The part of a `pg` Pool (node-postgres 8) that this provider calls. We don't import `pg`: any
 * client with this `query` works. Pass a Pool, so that every lock statement runs on its own
 * connection, outside any transaction of yours.
 */
export interface PostgresQueryable {
  query(text: string, values: unknown[]): Promise<{ rowCount: number | null }>
}

/** Options of {@link postgresLockProvider}. */
export interface PostgresLockProviderOptions extends SqlLockProviderOptions {
  /** Your `pg` Pool. The provider never opens connections of its own. */
  client: PostgresQueryable
}

const PROVIDER = 'postgres'
// statement_timestamp(), not CURRENT_TIMESTAMP: the latter is frozen at the start of an enclosing
// transaction, which made Java ShedLock's jOOQ provider run tasks twice (its issue #3577).
const DB_NOW = `timezone('utc', statement_timestamp())`

/**
 * Locks in a PostgreSQL table in Java ShedLock's format (create it with {@link postgresSchema}).
 *
 * One `INSERT … ON CONFLICT DO UPDATE … WHERE lock_until <= now` per acquire attempt, one
 * `UPDATE` per release; unlock and extend only touch the row this acquisition holds. Extensible.
 *
 * ```ts
 * import pg from 'pg'
 * import { postgresLockProvider } from 'shedlock/postgres'
 * const provider = postgresLockProvider({ client: new pg.Pool({ connectionString }) })
 * ```
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function postgresLockProvider(options: PostgresLockProviderOptions): ExtensibleLockProvider {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError('postgres: pass your pg Pool as { client } (an object with query(text, values))')
  }
  const t = sqlTable(PROVIDER, options)
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const clock = options.clock ?? systemClock
  const useDbTime = options.useDbTime ?? true
  const run = async (text: string, values: unknown[]): Promise<number> => (await client.query(text, values)).rowCount ?? 0

  // Upsert-if-expired: a missing row is inserted, an expired one taken over, a held one left alone.
  const upsert = (untilSql: string, nowSql: string): string =>
    `INSERT INTO ${t.table} AS t (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}) VALUES ($1, ${untilSql}, ${nowSql}, $2) ` +
    `ON CONFLICT (${name}) DO UPDATE SET ${lockUntil} = EXCLUDED.${lockUntil}, ${lockedAt} = EXCLUDED.${lockedAt}, ${lockedBy} = EXCLUDED.${lockedBy} ` +
    `WHERE t.${lockUntil} <= EXCLUDED.${lockedAt}`

  const accessor: SqlAccessor = useDbTime
    ? {
        acquire: async (c, owner) =>
          (await run(upsert(`${DB_NOW} + make_interval(secs => $3)`, DB_NOW), [c.name, owner, c.lockAtMostFor / 1000])) > 0,
        extend: async (next, owner) =>
          (await run(
            `UPDATE ${t.table} SET ${lockUntil} = ${DB_NOW} + make_interval(secs => $3) WHERE ${name} = $1 AND ${lockedBy} = $2 AND ${lockUntil} > ${DB_NOW}`,
            [next.name, owner, next.lockAtMostFor / 1000],
          )) > 0,
        unlock: async (current, owner, acquired) => {
          const anchor = lockAtLeastAnchor(current, acquired, clock)
          const from = anchor.from === 'lockedAt' ? lockedAt : DB_NOW
          await run(`UPDATE ${t.table} SET ${lockUntil} = GREATEST(${from} + make_interval(secs => $3), ${DB_NOW}) WHERE ${name} = $1 AND ${lockedBy} = $2`, [
            current.name,
            owner,
            anchor.seconds,
          ])
        },
      }
    : {
        acquire: async (c, owner) =>
          (await run(upsert('$3::timestamp', '$4::timestamp'), [c.name, owner, utcTimestamp(c.lockAtMostUntil.getTime()), utcTimestamp(clock.now())])) > 0,
        extend: async (next, owner) =>
          (await run(`UPDATE ${t.table} SET ${lockUntil} = $3::timestamp WHERE ${name} = $1 AND ${lockedBy} = $2 AND ${lockUntil} > $4::timestamp`, [
            next.name,
            owner,
            utcTimestamp(next.lockAtMostUntil.getTime()),
            utcTimestamp(clock.now()),
          ])) > 0,
        unlock: async (current, owner) => {
          const until = Math.max(clock.now(), current.lockAtLeastUntil.getTime())
          await run(`UPDATE ${t.table} SET ${lockUntil} = $3::timestamp WHERE ${name} = $1 AND ${lockedBy} = $2`, [current.name, owner, utcTimestamp(until)])
        },
      }
  return sqlLockProvider(PROVIDER, accessor, options, describePostgresError(t))
}

/**
 * DDL for the lock table in PostgreSQL, the same as Java ShedLock's (`TIMESTAMP` columns hold UTC).
 * Idempotent (`IF NOT EXISTS`).
 */
export function postgresSchema(options: SqlTableOptions = {}): string {
  const { table, columns: c } = sqlTable(PROVIDER, options)
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    `  ${c.name} VARCHAR(64) NOT NULL,`,
    `  ${c.lockUntil} TIMESTAMP NOT NULL,`,
    `  ${c.lockedAt} TIMESTAMP NOT NULL,`,
    `  ${c.lockedBy} VARCHAR(255) NOT NULL,`,
    `  PRIMARY KEY (${c.name})`,
    ');',
  ].join('\n')
}

function describePostgresError(t: SqlTable): DescribeSqlError {
  return (error, action, lockName) => {
    const code = (error as { code?: unknown } | null)?.code
    const detail = messageOf(error)
    let advice: string
    switch (code) {
      case '42P01':
        advice = `table ${t.table} does not exist. Create it with:\n${postgresSchema({ tableName: t.table, columnNames: t.columns })}`
        break
      case '42703':
      case '42P10':
        advice = `table ${t.table} does not have the expected columns (${Object.values(t.columns).join(', ')}) with ${t.columns.name} as primary key (${detail}); fix the table or pass columnNames`
        break
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
        advice = `PostgreSQL is unreachable (${detail}); the task was not run. Check the server; the provider recovers by itself once it is back`
        break
      default:
        advice = detail
    }
    return new LockProviderError(`postgres: could not ${action} lock "${lockName}": ${advice}`, { cause: error, provider: PROVIDER, lockName })
  }
}
