// shedlock/orm/kysely: a lock provider over a Kysely instance (PostgreSQL or MySQL dialect).
import { LockConfigurationError } from '../core/errors.ts'
import {
  type ExtensibleLockProvider,
  type InspectableLockProvider,
  lockPairOf,
  withLockPair,
} from '../core/lock-provider.ts'
import { chooseDialect, type OrmLockProviderOptions, ormSqlLockProvider, transactionHandle } from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a Kysely connection that {@link kyselyLockProvider} calls. */
export interface KyselyConnectionLike {
  executeQuery(query: unknown): Promise<{ rows: unknown[]; numAffectedRows?: bigint; insertId?: bigint }>
}

/** The part of a `Kysely` instance that {@link kyselyLockProvider} calls; Kysely is not imported. */
export interface KyselyLike {
  readonly isTransaction: boolean
  withoutPlugins(): KyselyLike
  getExecutor(): {
    readonly adapter: object
    provideConnection<T>(consumer: (connection: KyselyConnectionLike) => Promise<T>): Promise<T>
  }
}

/**
 * Locks in Java ShedLock's table through your `Kysely` instance, with the PostgreSQL or MySQL
 * provider's statements (one per acquire and per release, database time by default), run as raw
 * compiled queries without your plugins. Each runs on a connection of its own from the dialect's
 * pool, outside any `db.transaction()` you have open.
 *
 * A handle bound to one connection cannot reach the pool, so it is refused: a `Transaction`
 * (`db.transaction()`, `db.startTransaction()`) at once, the `db` of `db.connection().execute()`
 * by the first `lock()` (with `LockConfigurationError`, before anything is sent), since Kysely
 * shows the difference only when it hands out the connection.
 *
 * ```ts
 * import { kyselyLockProvider } from 'shedlock/orm/kysely'
 * const provider = kyselyLockProvider(db)
 * ```
 *
 * @throws LockConfigurationError for a `Transaction` (pass the root `Kysely`), and for a dialect
 *   other than PostgreSQL or MySQL when `dialect` is not given. `lock()` rejects with it for the
 *   `db` of `db.connection()`.
 */
export function kyselyLockProvider(
  db: KyselyLike,
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  if (!db || typeof db.getExecutor !== 'function' || typeof db.withoutPlugins !== 'function')
    throw new LockConfigurationError('kysely: pass your Kysely instance')
  // A Transaction runs everything on its one connection: it cannot escape.
  if (db.isTransaction)
    throw transactionHandle(
      'kysely',
      'a Transaction (the trx of db.transaction() or db.startTransaction())',
      'your root Kysely instance',
    )
  const adapter = db.getExecutor().adapter.constructor.name
  const detected = adapter === 'PostgresAdapter' ? 'postgres' : adapter === 'MysqlAdapter' ? 'mysql' : undefined
  const dialect = chooseDialect('kysely', options, detected)
  // Plugins (CamelCasePlugin...) would rename the columns the providers read.
  const executor = db.withoutPlugins().getExecutor()
  let id = 0
  const provider = ormSqlLockProvider(
    dialect,
    async (sql, values) => {
      // A CompiledQuery, as CompiledQuery.raw() makes it.
      const query = {
        sql,
        parameters: values,
        query: { kind: 'RawNode', sqlFragments: [sql], parameters: [] },
        queryId: { queryId: `shedlock-${++id}` },
      }
      // The db of db.connection() looks like the root Kysely; only its connection provider
      // differs, and it is private. The pool's provider awaits a pooled connection before it
      // calls back; that of one connection (SingleConnectionProvider) calls back before
      // provideConnection() returns, when the connection is idle, as it is unless a query of the
      // caller's runs on it at this moment. Whatever transaction is open there, the lock would join.
      let providing = true
      const reply = executor.provideConnection(async (connection) => {
        if (providing)
          throw transactionHandle(
            'kysely',
            'a Kysely bound to one connection (the db of db.connection().execute())',
            'your root Kysely instance',
          )
        return connection.executeQuery(query)
      })
      providing = false
      const result = await reply
      return {
        rows: result.rows as Record<string, unknown>[],
        ...(result.numAffectedRows === undefined ? {} : { affectedRows: Number(result.numAffectedRows) }),
        ...(result.insertId === undefined ? {} : { insertId: result.insertId }),
      }
    },
    options,
  )
  // The refusal comes out of a store call, which the provider wraps as LockProviderError: it is
  // a configuration error, and goes to the caller as one.
  const refused = (error: unknown): never => {
    const cause = (error as { cause?: unknown } | null)?.cause
    throw cause instanceof LockConfigurationError ? cause : error
  }
  const lock: typeof provider.lock = (configuration) => provider.lock(configuration).catch(refused)
  // The paired acquisition of slot runs is not copied by the spread: it gets the same mapping.
  const pair = lockPairOf(provider)
  const wrapped = { ...provider, lock }
  return pair ? withLockPair(wrapped, (first, second) => pair(first, second).catch(refused)) : wrapped
}
