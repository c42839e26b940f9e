import { PrismaMariaDb } from '@prisma/adapter-mariadb'
import { PrismaPg } from '@prisma/adapter-pg'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError, lockConfiguration } from '../../src/index.ts'
import { prismaLockProvider } from '../../src/orm/prisma.ts'
import { mysqlSchema } from '../../src/providers/mysql/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { MYSQL_URL, mysqlPoolOrSkip, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { prismaClientClass } from './prisma-client.ts'
import { type BoundHandle, DEAD_MYSQL, DEAD_POSTGRES, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

type Tx = {
  $queryRawUnsafe(sql: string): Promise<Record<string, unknown>[]>
  $executeRawUnsafe(sql: string): Promise<number>
}

// The tx client of an extended client's interactive transaction, and of one nested in it.
const prismaHandles = (
  client: () => { $extends(extension: object): { $transaction<T>(body: (tx: never) => Promise<T>): Promise<T> } },
): BoundHandle[] => {
  const inTransaction = (nest: boolean) => async (body: (handle: unknown) => Promise<void>) => {
    await client()
      .$extends({})
      .$transaction(async (tx: Tx & { $transaction?<T>(body: (tx: never) => Promise<T>): Promise<T> }) => {
        await tx.$queryRawUnsafe('SELECT 1')
        await (nest ? tx.$transaction!((inner: never) => body(inner)) : body(tx))
        throw new Error('roll back')
      })
      .catch((error: unknown) => {
        if ((error as Error).message !== 'roll back') throw error
      })
  }
  const provider = (handle: unknown, tableName: string) => prismaLockProvider(handle as never, { tableName })
  return [
    {
      what: 'the tx client of an extended client ($extends) in $transaction',
      escapes: false,
      inTransaction: inTransaction(false),
      provider,
    },
    {
      what: 'the tx client of a $transaction nested in another',
      escapes: false,
      inTransaction: inTransaction(true),
      provider,
    },
  ]
}

let pgPrisma: InstanceType<ReturnType<typeof prismaClientClass>>
await ormTests(
  'prisma',
  'postgres',
  async () => {
    const PrismaClient = prismaClientClass('postgresql')
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: POSTGRES_URL, max: 8 }) })
    pgPrisma = prisma
    const dead_: InstanceType<typeof PrismaClient>[] = []
    return {
      provider: (tableName, fencingTokens) => prismaLockProvider(prisma, { tableName, fencingTokens }),
      transaction: (body) =>
        prisma.$transaction(
          (tx: Tx) =>
            body({
              handle: tx,
              read: async (sql) => Number(Object.values((await tx.$queryRawUnsafe(sql))[0]!)[0]),
              write: async (sql) => {
                await tx.$executeRawUnsafe(sql)
              },
            }) as never,
        ),
      fromHandle: {
        escapes: false,
        provider: (handle, tableName) => prismaLockProvider(handle as never, { tableName }),
      },
      unreachable: (tableName) => {
        const dead = new PrismaClient({
          adapter: new PrismaPg({ connectionString: DEAD_POSTGRES, connectionTimeoutMillis: 2_000 }),
        })
        dead_.push(dead)
        return prismaLockProvider(dead, { tableName })
      },
      close: async () => {
        await Promise.all(dead_.map((dead) => dead.$disconnect()))
        await prisma.$disconnect()
      },
    }
  },
  { deadStore: true, boundHandles: prismaHandles(() => pgPrisma) },
)

// The mariadb connector counts found rows (an unchanged row counts 1, like an insert) and Prisma
// reports no insert id: the provider acquires with count-only statements (MysqlAcquireMode).
const mariadbUrl = (url: string): string => url.replace(/^mysql:/, 'mariadb:')
let mysqlPrisma: InstanceType<ReturnType<typeof prismaClientClass>>
await ormTests(
  'prisma',
  'mysql',
  async () => {
    const PrismaClient = prismaClientClass('mysql')
    const prisma = new PrismaClient({ adapter: new PrismaMariaDb(`${mariadbUrl(MYSQL_URL)}?connectionLimit=8`) })
    mysqlPrisma = prisma
    const dead_: InstanceType<typeof PrismaClient>[] = []
    return {
      provider: (tableName, fencingTokens) => prismaLockProvider(prisma, { tableName, fencingTokens }),
      transaction: (body) =>
        prisma.$transaction(
          (tx: Tx) =>
            body({
              handle: tx,
              read: async (sql) => Number(Object.values((await tx.$queryRawUnsafe(sql))[0]!)[0]),
              write: async (sql) => {
                await tx.$executeRawUnsafe(sql)
              },
            }) as never,
        ),
      fromHandle: {
        escapes: false,
        provider: (handle, tableName) => prismaLockProvider(handle as never, { tableName }),
      },
      unreachable: (tableName) => {
        const dead = new PrismaClient({
          adapter: new PrismaMariaDb(`${mariadbUrl(DEAD_MYSQL)}?connectTimeout=2000&acquireTimeout=3000`),
        })
        dead_.push(dead)
        return prismaLockProvider(dead, { tableName })
      },
      close: async () => {
        await Promise.all(dead_.map((dead) => dead.$disconnect()))
        await prisma.$disconnect()
      },
    }
  },
  { deadStore: true, boundHandles: prismaHandles(() => mysqlPrisma) },
)

// The suite above runs on the connector's default found-rows count; with foundRows: false an
// unchanged row counts 0, which the provider must not read as a lost lock.
const mysqlPool = await mysqlPoolOrSkip(1)
describe.skipIf(!mysqlPool)('prisma on mysql, foundRows: false', () => {
  it('a held lock is refused, and an extension to the same lock_until is reported as extended', async () => {
    const url = new URL(MYSQL_URL)
    const PrismaClient = prismaClientClass('mysql')
    const config = {
      host: url.hostname,
      port: Number(url.port || 3306),
      user: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password) || undefined,
      database: url.pathname.slice(1),
      foundRows: false,
      connectionLimit: 4,
    }
    const prisma = new PrismaClient({ adapter: new PrismaMariaDb(config) })
    const tableName = uniqueTable('shedlock_orm_prisma_changed')
    try {
      await mysqlPool!.query(mysqlSchema({ tableName }))
      await mysqlPool!.query(`INSERT INTO ${tableName} VALUES ('x', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), 'x')`)
      expect(await prisma.$executeRawUnsafe(`UPDATE ${tableName} SET locked_by = locked_by`)).toBe(0) // changed rows, not found rows
      const at = Date.now()
      const provider = prismaLockProvider(prisma, { tableName, useDbTime: false, clock: { now: () => at } })
      const configuration = lockConfiguration({ name: 'same-instant', lockAtMostFor: '1m', createdAt: new Date(at) })
      const lock = await provider.lock(configuration)
      expect(lock).toBeDefined()
      expect(await provider.lock(configuration)).toBeUndefined()
      const once = await lock!.extend('2m', 0)
      const twice = await once!.extend('2m', 0)
      expect(twice, 'an extension that wrote an unchanged value was reported as lost').toBeDefined()
      await twice!.unlock()
    } finally {
      await mysqlPool!.query(`DROP TABLE IF EXISTS ${tableName}`)
      await mysqlPool!.end()
      await prisma.$disconnect()
    }
  })
})

describe('prismaLockProvider', () => {
  it('refuses what is not a root Prisma Client on PostgreSQL or MySQL, naming the fix', () => {
    const fake = {
      $executeRawUnsafe: async () => 0,
      $queryRawUnsafe: async () => [],
      $disconnect: async () => {},
      _activeProvider: 'mysql',
    }
    expect(() => prismaLockProvider({ ...fake, _activeProvider: 'sqlserver' } as never)).toThrow(LockConfigurationError)
    expect(() => prismaLockProvider({ ...fake, $disconnect: undefined })).toThrow(/root PrismaClient/)
    expect(() => prismaLockProvider({} as never)).toThrow(/PrismaClient/)
  })
})

// Prisma wraps driver errors (P2010, the SQLSTATE in meta.driverAdapterError): the adapter hands the provider the driver's code.
serializableRace('prisma', async () => {
  const prisma = new (prismaClientClass('postgresql'))({
    adapter: new PrismaPg({ connectionString: POSTGRES_URL, max: 12, options: SERIALIZABLE }),
  })
  return { provider: (tableName) => prismaLockProvider(prisma, { tableName }), close: () => prisma.$disconnect() }
})
