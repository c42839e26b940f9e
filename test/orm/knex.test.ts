import knexFactory from 'knex'
import { knexLockProvider } from '../../src/orm/knex.ts'
import { MYSQL_URL, POSTGRES_URL } from '../support/sql-pools.ts'
import { firstValue, ormTests } from './support.ts'

for (const dialect of ['postgres', 'mysql'] as const) {
  await ormTests('knex', dialect, async () => {
    const knex = knexFactory(dialect === 'postgres' ? { client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 8 } } : { client: 'mysql2', connection: MYSQL_URL, pool: { min: 0, max: 8 } })
    const rowsOf = (reply: unknown): Record<string, unknown>[] => (dialect === 'postgres' ? (reply as { rows: Record<string, unknown>[] }).rows : (reply as Record<string, unknown>[][])[0]!)
    return {
      provider: (tableName) => knexLockProvider(knex, { tableName }),
      transaction: (body) =>
        knex.transaction((trx) =>
          body({
            handle: trx,
            read: async (text) => firstValue(rowsOf(await trx.raw(text))),
            write: async (text) => {
              await trx.raw(text)
            },
          }),
        ),
      fromHandle: { escapes: false, provider: (handle, tableName) => knexLockProvider(handle as never, { tableName }) },
      close: () => knex.destroy(),
    }
  })
}
