import { DataSource, type EntityManager, type QueryRunner } from 'typeorm'
import { typeormLockProvider } from '../../src/orm/typeorm.ts'
import { MYSQL_URL, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

for (const dialect of ['postgres', 'mysql'] as const) {
  let dataSource: DataSource
  // A QueryRunner holds one connection, on which the caller runs its transaction.
  const onQueryRunner = async (body: (runner: QueryRunner) => Promise<void>): Promise<void> => {
    const runner = dataSource.createQueryRunner()
    await runner.connect()
    await runner.startTransaction()
    try {
      await runner.query('SELECT 1')
      await body(runner)
    } finally {
      await runner.rollbackTransaction()
      await runner.release()
    }
  }
  await ormTests(
    'typeorm',
    dialect,
    async () => {
      dataSource = new DataSource(
        dialect === 'postgres'
          ? { type: 'postgres', url: POSTGRES_URL, poolSize: 8 }
          : { type: 'mysql', url: MYSQL_URL, poolSize: 8 },
      )
      await dataSource.initialize()
      return {
        provider: (tableName, fencingTokens) => typeormLockProvider(dataSource, { tableName, fencingTokens }),
        transaction: (body) =>
          dataSource.transaction((manager) =>
            body({
              handle: manager,
              read: async (text) => firstValue(await manager.query(text)),
              write: async (text) => {
                await manager.query(text)
              },
            }),
          ),
        // The EntityManager of a transaction: the adapter uses its DataSource.
        fromHandle: {
          escapes: true,
          provider: (handle, tableName) => typeormLockProvider(handle as never, { tableName }),
        },
        close: () => dataSource.destroy(),
      }
    },
    {
      // The adapter takes their DataSource's pool, never their connection.
      boundHandles: [
        {
          what: 'a QueryRunner in a transaction (queryRunner.startTransaction())',
          escapes: true,
          inTransaction: (body) => onQueryRunner(body),
          provider: (handle, tableName) => typeormLockProvider(handle as QueryRunner, { tableName }),
        },
        {
          what: 'the EntityManager of a QueryRunner in a transaction (queryRunner.manager)',
          escapes: true,
          inTransaction: (body) => onQueryRunner((runner) => body(runner.manager)),
          provider: (handle, tableName) => typeormLockProvider(handle as EntityManager, { tableName }),
        },
      ],
    },
  )
}

// TypeORM wraps driver errors in QueryFailedError.
serializableRace('typeorm', async () => {
  const dataSource = await new DataSource({
    type: 'postgres',
    url: POSTGRES_URL,
    poolSize: 12,
    extra: { options: SERIALIZABLE },
  }).initialize()
  return { provider: (tableName) => typeormLockProvider(dataSource, { tableName }), close: () => dataSource.destroy() }
})
