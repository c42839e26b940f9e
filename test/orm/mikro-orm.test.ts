import { MikroORM as MysqlOrm } from '@mikro-orm/mysql'
import { MikroORM as PostgresOrm, type SqlEntityManager } from '@mikro-orm/postgresql'
import { expect } from 'vitest'
import { mikroOrmLockProvider } from '../../src/orm/mikro-orm.ts'
import { MYSQL_URL, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

for (const dialect of ['postgres', 'mysql'] as const) {
  let fork: () => SqlEntityManager
  await ormTests(
    'mikro_orm',
    dialect,
    async () => {
      const config = {
        clientUrl: dialect === 'postgres' ? POSTGRES_URL : MYSQL_URL,
        entities: [],
        discovery: { warnWhenNoEntities: false },
        pool: { min: 0, max: 8 },
      }
      const orm = dialect === 'postgres' ? await PostgresOrm.init(config) : await MysqlOrm.init(config)
      fork = () => orm.em.fork()
      return {
        provider: (tableName, fencingTokens) => mikroOrmLockProvider(orm, { tableName, fencingTokens }),
        transaction: (body) =>
          orm.em.fork().transactional((em) =>
            body({
              handle: em,
              read: async (text) => firstValue(await em.execute(text)),
              write: async (text) => {
                await em.execute(text)
              },
            }),
          ),
        // A fork inside em.transactional(): its connection runs the lock without the transaction.
        fromHandle: {
          escapes: true,
          provider: (handle, tableName) => mikroOrmLockProvider(handle as never, { tableName }),
        },
        close: () => orm.close(),
      }
    },
    {
      boundHandles: [
        {
          // em.isInTransaction() is true: its own statements join the transaction, the lock's do not.
          what: 'a fork in a transaction of em.begin()',
          escapes: true,
          inTransaction: async (body) => {
            const em = fork()
            await em.begin()
            try {
              await em.execute('SELECT 1')
              expect(em.isInTransaction()).toBe(true)
              await body(em)
            } finally {
              await em.rollback()
            }
          },
          provider: (handle, tableName) => mikroOrmLockProvider(handle as SqlEntityManager, { tableName }),
        },
      ],
    },
  )
}

// MikroORM wraps driver errors in its DriverException classes.
serializableRace('mikro_orm', async () => {
  const orm = await PostgresOrm.init({
    clientUrl: POSTGRES_URL,
    entities: [],
    discovery: { warnWhenNoEntities: false },
    pool: { min: 0, max: 12 },
    driverOptions: { connection: { options: SERIALIZABLE } },
  })
  return { provider: (tableName) => mikroOrmLockProvider(orm, { tableName }), close: () => orm.close() }
})
