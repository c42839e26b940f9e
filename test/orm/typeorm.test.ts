import { DataSource } from 'typeorm'
import { typeormLockProvider } from '../../src/orm/typeorm.ts'
import { MYSQL_URL, POSTGRES_URL } from '../support/sql-pools.ts'
import { firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

for (const dialect of ['postgres', 'mysql'] as const) {
  await ormTests('typeorm', dialect, async () => {
    const dataSource = new DataSource(
      dialect === 'postgres' ? { type: 'postgres', url: POSTGRES_URL, poolSize: 8 } : { type: 'mysql', url: MYSQL_URL, poolSize: 8 },
    )
    await dataSource.initialize()
    return {
      provider: (tableName) => typeormLockProvider(dataSource, { tableName }),
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
      fromHandle: { escapes: true, provider: (handle, tableName) => typeormLockProvider(handle as never, { tableName }) },
      close: () => dataSource.destroy(),
    }
  })
}

// TypeORM wraps driver errors in QueryFailedError.
serializableRace('typeorm', async () => {
  const dataSource = await new DataSource({ type: 'postgres', url: POSTGRES_URL, poolSize: 12, extra: { options: SERIALIZABLE } }).initialize()
  return { provider: (tableName) => typeormLockProvider(dataSource, { tableName }), close: () => dataSource.destroy() }
})
