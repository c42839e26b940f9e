import { AsyncLocalStorage } from 'node:async_hooks'
import { QueryTypes, Sequelize, type Transaction } from 'sequelize'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../src/index.ts'
import { sequelizeLockProvider } from '../../src/orm/sequelize.ts'
import { MYSQL_URL, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { DEAD_MYSQL, DEAD_POSTGRES, firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

// Continuation-local storage, as cls-hooked gives it: with it, every query inside
// sequelize.transaction(callback) joins that transaction unless told otherwise, the hazard the
// adapter must escape.
const storage = new AsyncLocalStorage<Map<string, unknown>>()
Sequelize.useCLS({
  run: (fn: (context: Map<string, unknown>) => unknown) => {
    const context = new Map<string, unknown>()
    return storage.run(context, () => fn(context))
  },
  bind: <F>(fn: F) => fn,
  get: (key: string) => storage.getStore()?.get(key),
  set: (key: string, value: unknown) => storage.getStore()?.set(key, value),
} as never)

for (const dialect of ['postgres', 'mysql'] as const) {
  let sequelize: Sequelize
  await ormTests(
    'sequelize',
    dialect,
    async () => {
      sequelize = new Sequelize(dialect === 'postgres' ? POSTGRES_URL : MYSQL_URL, { logging: false, pool: { max: 8 } })
      const dead_: Sequelize[] = []
      return {
        provider: (tableName, fencingTokens) => sequelizeLockProvider(sequelize, { tableName, fencingTokens }),
        transaction: (body) =>
          sequelize.transaction((transaction: Transaction) =>
            body({
              handle: transaction,
              // No { transaction }: CLS puts it in.
              read: async (text) => firstValue(await sequelize.query(text, { type: QueryTypes.SELECT })),
              write: async (text) => {
                await sequelize.query(text)
              },
            }),
          ),
        // The same root instance, called inside the CLS transaction.
        fromHandle: {
          escapes: true,
          provider: (_handle, tableName) => sequelizeLockProvider(sequelize, { tableName }),
        },
        unreachable: (tableName) => {
          const dead = new Sequelize(dialect === 'postgres' ? DEAD_POSTGRES : DEAD_MYSQL, {
            logging: false,
            pool: { acquire: 2_000 },
          })
          dead_.push(dead)
          return sequelizeLockProvider(dead, { tableName })
        },
        close: async () => {
          await Promise.all(dead_.map((dead) => dead.close()))
          await sequelize.close()
        },
      }
    },
    {
      deadStore: true,
      boundHandles: [
        {
          // Unmanaged: the caller commits or rolls back.
          what: 'a Transaction (of sequelize.transaction())',
          escapes: false,
          inTransaction: async (body) => {
            const transaction = await sequelize.transaction()
            try {
              await body(transaction)
            } finally {
              await transaction.rollback()
            }
          },
          provider: (handle, tableName) => sequelizeLockProvider(handle as never, { tableName }),
        },
        {
          what: 'the Sequelize instance, inside a CLS-managed transaction',
          escapes: true,
          inTransaction: async (body) => {
            await sequelize
              .transaction(async () => {
                await sequelize.query('SELECT 1')
                await body(sequelize)
                throw new Error('roll back')
              })
              .catch((error: unknown) => {
                if ((error as Error).message !== 'roll back') throw error
              })
          },
          provider: (handle, tableName) => sequelizeLockProvider(handle as Sequelize, { tableName }),
        },
      ],
    },
  )
}

describe('sequelizeLockProvider', () => {
  it('refuses { transaction } in the options, naming the fix', () => {
    const sequelize = new Sequelize(POSTGRES_URL, { logging: false })
    expect(() => sequelizeLockProvider(sequelize, { transaction: {} } as never)).toThrow(LockConfigurationError)
    expect(() => sequelizeLockProvider(sequelize, { transaction: null } as never)).toThrow(/Leave it out/)
  })
})

// Sequelize wraps driver errors (the pg error is its parent): the adapter hands the provider the driver's code.
serializableRace('sequelize', async () => {
  const sequelize = new Sequelize(POSTGRES_URL, {
    logging: false,
    pool: { max: 12 },
    dialectOptions: { options: SERIALIZABLE },
  })
  return { provider: (tableName) => sequelizeLockProvider(sequelize, { tableName }), close: () => sequelize.close() }
})
