// shedlock/orm/typeorm: a lock provider over a TypeORM DataSource (postgres, mysql or mariadb).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import { chooseDialect, type OrmLockProviderOptions, ormSqlLockProvider } from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a TypeORM query runner that {@link typeormLockProvider} calls. */
export interface TypeormQueryRunnerLike {
  query(
    sql: string,
    parameters: unknown[],
    useStructuredResult: true,
  ): Promise<{ records: unknown[]; affected?: number | null; raw: unknown }>
  release(): Promise<void>
}

/** The part of a TypeORM `DataSource` that {@link typeormLockProvider} calls; TypeORM is not imported. */
export interface TypeormDataSourceLike {
  createQueryRunner(mode?: 'master' | 'slave'): TypeormQueryRunnerLike
  readonly options: { readonly type: string }
}

/**
 * Locks in Java ShedLock's table through your TypeORM `DataSource`, with the PostgreSQL or MySQL
 * provider's statements (one per acquire and per release, database time by default). Each runs on
 * a query runner of its own, a pooled connection outside any transaction, released at once.
 *
 * An `EntityManager` or a `QueryRunner` is accepted too, those of a transaction included: the
 * provider uses their `DataSource`, never their query runner, so a lock taken inside
 * `dataSource.transaction()` or after `queryRunner.startTransaction()` is committed on its own
 * (visible to other nodes at once, kept if the transaction rolls back).
 *
 * ```ts
 * import { typeormLockProvider } from 'shedlock/orm/typeorm'
 * const provider = typeormLockProvider(dataSource)
 * ```
 *
 * @throws LockConfigurationError for a `type` other than postgres, mysql, mariadb or
 *   aurora-mysql when `dialect` is not given.
 */
export function typeormLockProvider(
  dataSource:
    | TypeormDataSourceLike
    | { readonly dataSource: TypeormDataSourceLike }
    | { readonly connection: TypeormDataSourceLike },
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  // An EntityManager or a QueryRunner (in a transaction or not) escapes to its DataSource.
  const manager = dataSource as { dataSource?: TypeormDataSourceLike; connection?: TypeormDataSourceLike } | undefined
  const source =
    dataSource && typeof (dataSource as TypeormDataSourceLike).createQueryRunner === 'function'
      ? (dataSource as TypeormDataSourceLike)
      : (manager?.dataSource ?? manager?.connection)
  if (!source || typeof source.createQueryRunner !== 'function')
    throw new LockConfigurationError('typeorm: pass your DataSource (or an EntityManager or QueryRunner of it)')
  const type = source.options?.type
  const detected =
    type === 'postgres'
      ? 'postgres'
      : type === 'mysql' || type === 'mariadb' || type === 'aurora-mysql'
        ? 'mysql'
        : type
  const dialect = chooseDialect('typeorm', options, detected)
  return ormSqlLockProvider(
    dialect,
    async (sql, values, kind) => {
      const runner = source.createQueryRunner('master')
      try {
        const { records, affected, raw } = await runner.query(sql, values, true)
        if (kind === 'rows') return { rows: records as Record<string, unknown>[] }
        // mysql2: raw is the ResultSetHeader, with the insertId the MySQL provider reads.
        const header =
          dialect === 'mysql' ? (raw as { affectedRows?: number; insertId?: unknown } | undefined) : undefined
        return { affectedRows: header?.affectedRows ?? affected ?? 0, insertId: header?.insertId }
      } finally {
        await runner.release()
      }
    },
    options,
  )
}
