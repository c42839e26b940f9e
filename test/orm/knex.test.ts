import knexFactory, { type Knex } from 'knex'
import { knexLockProvider } from '../../src/orm/knex.ts'
import { MYSQL_URL, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { DEAD_MYSQL, DEAD_POSTGRES, firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

// The pool retries a dead database and logs each refusal: expected here.
const quiet = { warn: () => {}, error: () => {}, debug: () => {}, deprecate: () => {} }

for (const dialect of ['postgres', 'mysql'] as const) {
  let knex: Knex
  await ormTests(
    'knex',
    dialect,
    async () => {
      knex = knexFactory(
        dialect === 'postgres'
          ? { client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 8 } }
          : { client: 'mysql2', connection: MYSQL_URL, pool: { min: 0, max: 8 } },
      )
      const dead_: ReturnType<typeof knexFactory>[] = []
      const rowsOf = (reply: unknown): Record<string, unknown>[] =>
        dialect === 'postgres'
          ? (reply as { rows: Record<string, unknown>[] }).rows
          : (reply as Record<string, unknown>[][])[0]!
      return {
        provider: (tableName, fencingTokens) => knexLockProvider(knex, { tableName, fencingTokens }),
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
        fromHandle: {
          escapes: false,
          provider: (handle, tableName) => knexLockProvider(handle as never, { tableName }),
        },
        unreachable: (tableName) => {
          const dead = knexFactory({
            client: dialect === 'postgres' ? 'pg' : 'mysql2',
            connection: dialect === 'postgres' ? DEAD_POSTGRES : DEAD_MYSQL,
            acquireConnectionTimeout: 2_000,
            log: quiet,
          })
          dead_.push(dead)
          return knexLockProvider(dead, { tableName })
        },
        close: async () => {
          await Promise.all(dead_.map((dead) => dead.destroy()))
          await knex.destroy()
        },
      }
    },
    {
      deadStore: true,
      boundHandles: [
        {
          what: 'the trx of await knex.transaction() (no handler)',
          escapes: false,
          inTransaction: async (body) => {
            const trx = await knex.transaction()
            try {
              await body(trx)
            } finally {
              await trx.rollback()
            }
          },
          provider: (handle, tableName) => knexLockProvider(handle as Knex.Transaction, { tableName }),
        },
        {
          what: 'a nested trx (a savepoint of trx.transaction())',
          escapes: false,
          inTransaction: (body) =>
            knex
              .transaction(async (trx) => {
                await trx.transaction(async (nested) => {
                  await body(nested)
                  throw new Error('roll back')
                })
              })
              .catch((error: unknown) => {
                if ((error as Error).message !== 'roll back') throw error
              }),
          provider: (handle, tableName) => knexLockProvider(handle as Knex.Transaction, { tableName }),
        },
      ],
    },
  )
}

serializableRace('knex', async () => {
  const knex = knexFactory({
    client: 'pg',
    connection: { connectionString: POSTGRES_URL, options: SERIALIZABLE },
    pool: { min: 0, max: 12 },
  })
  return { provider: (tableName) => knexLockProvider(knex, { tableName }), close: () => knex.destroy() }
})
