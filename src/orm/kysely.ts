// shedlock/orm/kysely: a lock provider over a Kysely instance (PostgreSQL or MySQL dialect).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import { chooseDialect, type OrmLockProviderOptions, ormSqlLockProvider, transactionHandle } from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a `Kysely` instance that {@link kyselyLockProvider} calls; Kysely is not imported. */
export interface KyselyLike {
  readonly isTransaction: boolean
  withoutPlugins(): KyselyLike
  executeQuery(query: unknown): Promise<{ rows: unknown[]; numAffectedRows?: bigint; insertId?: bigint }>
  getExecutor(): { readonly adapter: object }
}

/**
 * Locks in Java ShedLock's table through your `Kysely` instance, with the PostgreSQL or MySQL
 * provider's statements (one per acquire and per release, database time by default), run as raw
 * compiled queries without your plugins. Each runs on a connection of its own from the dialect's
 * pool, outside any `db.transaction()` you have open.
 *
 * ```ts
 * import { kyselyLockProvider } from 'shedlock/orm/kysely'
 * const provider = kyselyLockProvider(db)
 * ```
 *
 * @throws LockConfigurationError for a `Transaction` (pass the root `Kysely`), and for a dialect
 *   other than PostgreSQL or MySQL when `dialect` is not given.
 */
export function kyselyLockProvider(db: KyselyLike, options: OrmLockProviderOptions = {}): ExtensibleLockProvider & InspectableLockProvider {
  if (!db || typeof db.executeQuery !== 'function' || typeof db.withoutPlugins !== 'function')
    throw new LockConfigurationError('kysely: pass your Kysely instance')
  // A Transaction runs everything on its one connection: it cannot escape.
  if (db.isTransaction) throw transactionHandle('kysely', 'a Transaction (the trx of db.transaction())', 'your root Kysely instance')
  const adapter = db.getExecutor().adapter.constructor.name
  const detected = adapter === 'PostgresAdapter' ? 'postgres' : adapter === 'MysqlAdapter' ? 'mysql' : undefined
  const dialect = chooseDialect('kysely', options, detected)
  // Plugins (CamelCasePlugin...) would rename the columns the providers read.
  const plain = db.withoutPlugins()
  let id = 0
  return ormSqlLockProvider(
    dialect,
    async (sql, values) => {
      // A CompiledQuery, as CompiledQuery.raw() makes it.
      const result = await plain.executeQuery({
        sql,
        parameters: values,
        query: { kind: 'RawNode', sqlFragments: [sql], parameters: [] },
        queryId: { queryId: `shedlock-${++id}` },
      })
      return {
        rows: result.rows as Record<string, unknown>[],
        ...(result.numAffectedRows === undefined ? {} : { affectedRows: Number(result.numAffectedRows) }),
        ...(result.insertId === undefined ? {} : { insertId: result.insertId }),
      }
    },
    options,
  )
}
