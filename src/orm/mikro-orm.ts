// shedlock/orm/mikro-orm: a lock provider over MikroORM 6 (@mikro-orm/postgresql or @mikro-orm/mysql).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import { chooseDialect, type OrmLockProviderOptions, ormSqlLockProvider, questionMarks } from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a MikroORM SQL `EntityManager` that {@link mikroOrmLockProvider} calls; MikroORM is not imported. */
export interface MikroOrmEntityManagerLike {
  getConnection(type?: 'read' | 'write'): {
    execute(sql: string, params: unknown[], method: 'all' | 'run'): Promise<unknown>
  }
  getPlatform(): object
}

/**
 * Locks in Java ShedLock's table through MikroORM, with the PostgreSQL or MySQL provider's
 * statements (one `execute` per acquire and per release, database time by default). Each runs on
 * the connection's pool without a transaction context, so on a pooled connection of its own, even
 * when the `EntityManager` given (a fork inside `em.transactional()` or after `em.begin()`) is in a
 * transaction.
 *
 * ```ts
 * import { mikroOrmLockProvider } from 'shedlock/orm/mikro-orm'
 * const provider = mikroOrmLockProvider(orm.em)
 * ```
 *
 * @throws LockConfigurationError for platforms other than PostgreSQL, MySQL and MariaDB when
 *   `dialect` is not given.
 */
export function mikroOrmLockProvider(
  em: MikroOrmEntityManagerLike | { readonly em: MikroOrmEntityManagerLike },
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  // The MikroORM instance itself is accepted too.
  const manager =
    em && typeof (em as MikroOrmEntityManagerLike).getConnection === 'function'
      ? (em as MikroOrmEntityManagerLike)
      : (em as { em?: MikroOrmEntityManagerLike } | undefined)?.em
  if (!manager || typeof manager.getConnection !== 'function')
    throw new LockConfigurationError('mikro-orm: pass your MikroORM instance or its em')
  const platform = manager.getPlatform().constructor.name
  const detected = platform === 'PostgreSqlPlatform' ? 'postgres' : platform === 'MySqlPlatform' ? 'mysql' : undefined
  const dialect = chooseDialect('mikro-orm', options, detected)
  return ormSqlLockProvider(
    dialect,
    async (sql, values, kind) => {
      // MikroORM 6 binds with ?, as knex does, also on PostgreSQL.
      const statement = dialect === 'postgres' ? questionMarks(sql, values) : { sql, values }
      // No transaction context is passed: the statement runs outside any transaction.
      const connection = manager.getConnection('write')
      if (kind === 'rows')
        return { rows: (await connection.execute(statement.sql, statement.values, 'all')) as Record<string, unknown>[] }
      const { affectedRows, insertId } = (await connection.execute(statement.sql, statement.values, 'run')) as {
        affectedRows: number
        insertId?: unknown
      }
      return { affectedRows, insertId }
    },
    options,
  )
}
