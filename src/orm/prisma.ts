// shedlock/orm/prisma: a lock provider over a Prisma Client (Prisma 7, driver adapters).
import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import { chooseDialect, type OrmLockProviderOptions, ormSqlLockProvider, transactionHandle } from './sql-client.ts'

export type { OrmDialect, OrmLockProviderOptions } from './sql-client.ts'

/** The part of a Prisma Client that {@link prismaLockProvider} calls; Prisma is not imported. */
export interface PrismaClientLike {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>
  /** Present on the root client, absent on the `tx` client of `$transaction(async (tx) => ...)`. */
  $disconnect?: unknown
}

/**
 * Locks in Java ShedLock's table (see `postgresSchema` of `shedlock/postgres`, `mysqlSchema` of
 * `shedlock/mysql`) through your Prisma Client on PostgreSQL (`@prisma/adapter-pg`) or MySQL and
 * MariaDB (`@prisma/adapter-mariadb`): the plain providers' statements, one `$executeRawUnsafe`
 * per acquire and per release, database time by default. Each statement runs on a connection of
 * its own from the client's pool, outside any `$transaction` you have open, and commits at once.
 *
 * On MySQL/MariaDB Prisma reports only a row count (no insert id), so an acquire is an `UPDATE`
 * that takes an expired row over and, when it found none, an `INSERT`: two statements the first
 * time a name is acquired and while it is held, one otherwise.
 *
 * ```ts
 * import { prismaLockProvider } from 'shedlock/orm/prisma'
 * const provider = prismaLockProvider(prisma)
 * ```
 *
 * @throws LockConfigurationError for the `tx` client of an interactive transaction (pass the root
 *   client), for a client on another database, and for the table options the provider refuses.
 */
export function prismaLockProvider(
  prisma: PrismaClientLike,
  options: OrmLockProviderOptions = {},
): ExtensibleLockProvider & InspectableLockProvider {
  if (!prisma || typeof prisma.$executeRawUnsafe !== 'function' || typeof prisma.$queryRawUnsafe !== 'function') {
    throw new LockConfigurationError(
      'prisma: pass your PrismaClient (an object with $executeRawUnsafe and $queryRawUnsafe)',
    )
  }
  // Prisma makes the tx client of an interactive transaction (of an extended client, or nested,
  // alike) without $connect, $disconnect, $on, $use and $extends (its itxClientDenyList); it
  // cannot reach the pool outside its transaction.
  if (typeof prisma.$disconnect !== 'function')
    throw transactionHandle('prisma', 'the tx client of a $transaction', 'your root PrismaClient')
  const provider = (prisma as { _activeProvider?: unknown })._activeProvider
  const detected =
    provider === 'postgresql'
      ? 'postgres'
      : provider === 'mysql'
        ? 'mysql'
        : typeof provider === 'string'
          ? provider
          : undefined
  const dialect = chooseDialect('prisma', options, detected)
  return ormSqlLockProvider(
    dialect,
    async (sql, values, kind) =>
      kind === 'rows'
        ? { rows: (await prisma.$queryRawUnsafe(sql, ...values)) as Record<string, unknown>[] }
        : { affectedRows: await prisma.$executeRawUnsafe(sql, ...values) },
    options,
    'countOnly',
  )
}
