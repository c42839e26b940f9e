// shedlock/orm/knex: a lock provider over a Knex instance (pg, mysql or mysql2 client).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import {
  chooseDialect,
  type OrmLockProviderOptions,
  ormSqlLockProvider,
  questionMarks,
  transactionHandle,
} from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a Knex instance that {@link knexLockProvider} calls; Knex is not imported. */
export interface KnexLike {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>
  /** `true` on the `trx` of `knex.transaction()`. */
  readonly isTransaction?: boolean
  readonly client?: { readonly dialect?: unknown }
}

/**
 * Locks in Java ShedLock's table through your Knex instance, with the PostgreSQL or MySQL
 * provider's statements (one `knex.raw` per acquire and per release, database time by default).
 * Each runs on a connection of its own from Knex's pool, outside any transaction you have open.
 *
 * ```ts
 * import { knexLockProvider } from 'shedlock/orm/knex'
 * const provider = knexLockProvider(knex)
 * ```
 *
 * @throws LockConfigurationError for a transaction (`trx`: pass the root `knex`), and for clients
 *   other than pg, mysql and mysql2 when `dialect` is not given.
 */
export function knexLockProvider(
  knex: KnexLike,
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  if (!knex || typeof knex.raw !== 'function')
    throw new LockConfigurationError('knex: pass your knex instance (what knex({ client, connection }) returned)')
  // A trx is bound to its one connection.
  if (knex.isTransaction)
    throw transactionHandle('knex', 'a transaction (the trx of knex.transaction())', 'your root knex instance')
  const client = knex.client?.dialect
  const detected =
    client === 'postgresql'
      ? 'postgres'
      : client === 'mysql' || client === 'mysql2'
        ? 'mysql'
        : typeof client === 'string'
          ? client
          : undefined
  const dialect = chooseDialect('knex', options, detected)
  return ormSqlLockProvider(
    dialect,
    async (sql, values) => {
      // Knex binds with ?, also on PostgreSQL, where it numbers them itself.
      const statement = dialect === 'postgres' ? questionMarks(sql, values) : { sql, values }
      const reply = (await knex.raw(statement.sql, statement.values)) as unknown
      if (dialect === 'postgres') {
        const { rows, rowCount } = reply as { rows: Record<string, unknown>[]; rowCount: number | null }
        return { rows, affectedRows: rowCount ?? 0 }
      }
      // mysql2: [rows, fields] or [ResultSetHeader, undefined].
      const result = (reply as unknown[])[0]
      if (Array.isArray(result)) return { rows: result as Record<string, unknown>[] }
      const { affectedRows, insertId } = result as { affectedRows: number; insertId: unknown }
      return { affectedRows, insertId }
    },
    options,
  )
}
