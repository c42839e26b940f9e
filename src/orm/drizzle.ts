// shedlock/orm/drizzle: a lock provider over a Drizzle database (node-postgres or mysql2).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import { mysqlLockProvider } from '../providers/mysql/provider.ts'
import { postgresLockProvider } from '../providers/postgres/provider.ts'
import { chooseDialect, type OrmLockProviderOptions, transactionHandle } from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a Drizzle database that {@link drizzleLockProvider} reads; Drizzle is not imported. */
export interface DrizzleDatabaseLike {
  /** The driver client given to `drizzle()`: a `pg` Pool or a mysql2 pool. Transactions (`tx`) have none. */
  $client?: unknown
  dialect?: unknown
}

const ONE_CONNECTION =
  'over a single connection (a pg Client, a PoolClient, a mysql2 connection), a lock would join the transaction open on it, invisible to other nodes until it commits and gone if it rolls back.'

/**
 * Locks in Java ShedLock's table through your Drizzle database: the PostgreSQL provider on a
 * `drizzle-orm/node-postgres` database, the MySQL provider on a `drizzle-orm/mysql2` one, over the
 * pool the database was made with (`db.$client`). Same statements, one per acquire and per
 * release, database time by default; each runs on a pooled connection of its own, outside any
 * `db.transaction()` you have open.
 *
 * ```ts
 * import { drizzleLockProvider } from 'shedlock/orm/drizzle'
 * const provider = drizzleLockProvider(db)
 * ```
 *
 * @throws LockConfigurationError for a transaction (`tx`, nested ones included: pass `db`), for a
 *   database over a single connection instead of a pool (a pg `Client` or `PoolClient`, a mysql2
 *   connection: the lock would join your transactions), and for other drivers.
 */
export function drizzleLockProvider(
  db: DrizzleDatabaseLike,
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  if (!db || typeof db !== 'object')
    throw new LockConfigurationError('drizzle: pass the database that drizzle() returned')
  const client = db.$client as Record<string, unknown> | undefined
  if (client === undefined) {
    if (typeof (db as { rollback?: unknown }).rollback === 'function')
      throw transactionHandle('drizzle', 'a transaction (the tx of db.transaction())', 'the db that drizzle() returned')
    throw new LockConfigurationError(
      'drizzle: the database has no $client; pass the database that drizzle() returned (drizzle-orm 0.34 or later)',
    )
  }
  const kind = (db.dialect as { constructor?: Record<symbol, unknown> } | undefined)?.constructor?.[
    Symbol.for('drizzle:entityKind')
  ]
  const detected =
    kind === 'PgDialect' ? 'postgres' : kind === 'MySqlDialect' ? 'mysql' : typeof kind === 'string' ? kind : undefined
  const dialect = chooseDialect('drizzle', options, detected)
  if (dialect === 'postgres') {
    // A pg Pool counts its clients; a single pg Client would run the lock inside your transactions.
    if (typeof client.query !== 'function' || typeof client.totalCount !== 'number') {
      throw new LockConfigurationError(
        `drizzle: db.$client is not a pg Pool; ${ONE_CONNECTION} Pass a database made with drizzle(new pg.Pool(...)) (or drizzle(connectionString)) instead`,
      )
    }
    return postgresLockProvider({ ...options, client: client as never })
  }
  // mysql2: a promise pool, or the callback pool behind promise().
  const pool =
    typeof client.promise === 'function' && typeof client.getConnection === 'function'
      ? (client.promise as () => Record<string, unknown>).call(client)
      : client
  if (typeof pool.query !== 'function' || typeof pool.getConnection !== 'function') {
    throw new LockConfigurationError(
      `drizzle: db.$client is not a mysql2 pool; ${ONE_CONNECTION} Pass a database made with drizzle(mysql.createPool(...)) instead`,
    )
  }
  return mysqlLockProvider({ ...options, client: pool as never })
}
