// shedlock/orm/sequelize: a lock provider over a Sequelize instance (postgres or mysql dialect).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import {
  chooseDialect,
  dollarNumbers,
  type OrmLockProviderOptions,
  ormSqlLockProvider,
  transactionHandle,
} from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a `Sequelize` instance that {@link sequelizeLockProvider} calls; Sequelize is not imported. */
export interface SequelizeLike {
  query(sql: string, options: { bind: unknown[]; transaction: null; raw: true; logging?: false }): Promise<unknown>
  getDialect(): string
}

/**
 * Locks in Java ShedLock's table through your `Sequelize` instance, with the PostgreSQL or MySQL
 * provider's statements (one `sequelize.query` per acquire and per release, database time by
 * default). Each runs with `transaction: null`, so even with `Sequelize.useCLS()` it never joins
 * the transaction of the calling code: it runs on a pooled connection of its own and commits at
 * once.
 *
 * ```ts
 * import { sequelizeLockProvider } from 'shedlock/orm/sequelize'
 * const provider = sequelizeLockProvider(sequelize)
 * ```
 *
 * @throws LockConfigurationError for a `Transaction` or `{ transaction }` in the options (pass
 *   the `Sequelize` instance, with no transaction), and for dialects other than postgres and mysql.
 */
export function sequelizeLockProvider(
  sequelize: SequelizeLike,
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  const handle = sequelize as unknown as { sequelize?: unknown; commit?: unknown; rollback?: unknown } | undefined
  if (handle && typeof handle.commit === 'function' && typeof handle.rollback === 'function' && handle.sequelize)
    throw transactionHandle('sequelize', 'a Transaction', 'your Sequelize instance (transaction.sequelize)')
  if (!sequelize || typeof sequelize.query !== 'function' || typeof sequelize.getDialect !== 'function')
    throw new LockConfigurationError('sequelize: pass your Sequelize instance')
  // Typed out, but a JavaScript caller may try it: the statements would ignore it, silently.
  if (options && 'transaction' in options) {
    throw new LockConfigurationError(
      'sequelize: got { transaction } in the options; a lock must never join a transaction (invisible to other nodes until it commits, gone if it rolls back). Leave it out: the provider runs each lock statement with transaction: null, on a pooled connection of its own',
    )
  }
  const name = sequelize.getDialect()
  // Sequelize's mariadb dialect runs the mariadb connector, whose replies are shaped otherwise.
  const dialect = chooseDialect(
    'sequelize',
    options,
    name === 'postgres' || name === 'mysql' ? name : `its ${name} dialect`,
  )
  return ormSqlLockProvider(
    dialect,
    async (sql, values, kind) => {
      // transaction: null, not undefined: undefined lets CLS put the caller's transaction in.
      const reply = (await sequelize.query(dialect === 'mysql' ? dollarNumbers(sql) : sql, {
        bind: values,
        transaction: null,
        raw: true,
        logging: false,
      })) as [unknown, unknown]
      if (dialect === 'postgres') {
        if (kind === 'rows') return { rows: reply[0] as Record<string, unknown>[] }
        // An INSERT answers [rows, rowCount]; an UPDATE [rows, the pg Result].
        return {
          affectedRows:
            typeof reply[1] === 'number' ? reply[1] : ((reply[1] as { rowCount?: number | null }).rowCount ?? 0),
        }
      }
      if (kind === 'rows') return { rows: reply[0] as Record<string, unknown>[] }
      // An INSERT answers [insertId, affectedRows]; an UPDATE [ResultSetHeader, ResultSetHeader].
      if (typeof reply[0] === 'number') return { insertId: reply[0], affectedRows: Number(reply[1]) }
      const { affectedRows, insertId } = reply[0] as { affectedRows: number; insertId: unknown }
      return { affectedRows, insertId }
    },
    options,
  )
}
