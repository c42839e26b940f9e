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
 * Locks in Java ShedLock's table (see `postgresSchema` of `shedlock/postgres`) through your Prisma
 * Client: the PostgreSQL provider's statements, one `$executeRawUnsafe` per acquire and per
 * release, database time by default. Each statement runs on a connection of its own from the
 * client's pool, outside any `$transaction` you have open, and commits at once.
 *
 * PostgreSQL only for now: on MySQL/MariaDB Prisma reports a changed-row count and no insert id,
 * which cannot tell a held lock from a new one; use `mysqlLockProvider` of `shedlock/mysql` with a
 * mysql2 pool there.
 *
 * ```ts
 * import { prismaLockProvider } from 'shedlock/orm/prisma'
 * const provider = prismaLockProvider(prisma)
 * ```
 *
 * @throws LockConfigurationError for the `tx` client of an interactive transaction (pass the root
 *   client), for a client that is not on PostgreSQL, and for the table options the PostgreSQL
 *   provider refuses.
 */
export function prismaLockProvider(prisma: PrismaClientLike, options: OrmLockProviderOptions = {}): ExtensibleLockProvider & InspectableLockProvider {
  if (!prisma || typeof prisma.$executeRawUnsafe !== 'function' || typeof prisma.$queryRawUnsafe !== 'function') {
    throw new LockConfigurationError('prisma: pass your PrismaClient (an object with $executeRawUnsafe and $queryRawUnsafe)')
  }
  // The tx client of an interactive transaction has no $disconnect; it cannot reach the pool
  // outside its transaction.
  if (typeof prisma.$disconnect !== 'function') throw transactionHandle('prisma', 'the tx client of a $transaction', 'your root PrismaClient')
  const provider = (prisma as { _activeProvider?: unknown })._activeProvider
  const detected = provider === 'postgresql' ? 'postgres' : provider === 'mysql' ? 'mysql' : typeof provider === 'string' ? provider : undefined
  const dialect = chooseDialect('prisma', options, detected)
  if (dialect === 'mysql') {
    throw new LockConfigurationError(
      'prisma: MySQL and MariaDB are not supported (Prisma reports only a changed-row count, which cannot tell a held lock from a new one); use mysqlLockProvider from shedlock/mysql with a mysql2 pool',
    )
  }
  return ormSqlLockProvider(
    dialect,
    async (sql, values, kind) =>
      kind === 'rows' ? { rows: (await prisma.$queryRawUnsafe(sql, ...values)) as Record<string, unknown>[] } : { affectedRows: await prisma.$executeRawUnsafe(sql, ...values) },
    options,
  )
}
