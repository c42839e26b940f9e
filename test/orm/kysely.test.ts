import { CamelCasePlugin, Kysely, MysqlDialect, PostgresDialect, sql } from 'kysely'
import mysql from 'mysql2'
import pg from 'pg'
import { kyselyLockProvider } from '../../src/orm/kysely.ts'
import { MYSQL_URL, POSTGRES_URL } from '../helpers/sql-pools.ts'
import {
  type BoundHandle,
  DEAD_MYSQL,
  DEAD_POSTGRES,
  firstValue,
  ormTests,
  SERIALIZABLE,
  serializableRace,
} from './support.ts'

type Db = Kysely<Record<string, never>>

for (const dialect of ['postgres', 'mysql'] as const) {
  let db: Db
  await ormTests(
    'kysely',
    dialect,
    async () => {
      // CamelCasePlugin would rename the columns the provider reads: the adapter runs without plugins.
      db = new Kysely<Record<string, never>>({
        dialect:
          dialect === 'postgres'
            ? new PostgresDialect({ pool: new pg.Pool({ connectionString: POSTGRES_URL, max: 8 }) })
            : new MysqlDialect({ pool: mysql.createPool({ uri: MYSQL_URL, connectionLimit: 8 }) }),
        plugins: [new CamelCasePlugin()],
      })
      const dead_: Kysely<Record<string, never>>[] = []
      return {
        provider: (tableName, fencingTokens) => kyselyLockProvider(db, { tableName, fencingTokens }),
        transaction: (body) =>
          db.transaction().execute((trx) =>
            body({
              handle: trx,
              read: async (text) => firstValue((await sql.raw(text).execute(trx)).rows as Record<string, unknown>[]),
              write: async (text) => {
                await sql.raw(text).execute(trx)
              },
            }),
          ),
        fromHandle: {
          escapes: false,
          provider: (handle, tableName) => kyselyLockProvider(handle as never, { tableName }),
        },
        unreachable: (tableName) => {
          const dead = new Kysely<Record<string, never>>({
            dialect:
              dialect === 'postgres'
                ? new PostgresDialect({
                    pool: new pg.Pool({ connectionString: DEAD_POSTGRES, connectionTimeoutMillis: 2_000 }),
                  })
                : new MysqlDialect({ pool: mysql.createPool({ uri: DEAD_MYSQL, connectTimeout: 2_000 }) }),
          })
          dead_.push(dead)
          return kyselyLockProvider(dead, { tableName })
        },
        close: async () => {
          await Promise.all(dead_.map((dead) => dead.destroy()))
          await db.destroy()
        },
      }
    },
    {
      deadStore: true,
      boundHandles: [
        {
          // Looks like the root Kysely (isTransaction false); its statements go to the one connection.
          what: 'the db of db.connection().execute(), with a transaction begun on it',
          escapes: false,
          inTransaction: (body) =>
            db.connection().execute(async (connection) => {
              await sql.raw(dialect === 'postgres' ? 'BEGIN' : 'START TRANSACTION').execute(connection)
              try {
                await body(connection)
              } finally {
                await sql.raw('ROLLBACK').execute(connection)
              }
            }),
          provider: (handle, tableName) => kyselyLockProvider(handle as Db, { tableName }),
        },
        // db.startTransaction() came in kysely 0.28; scripts/oldest-drivers.sh runs this file on 0.26.
        ...(typeof Kysely.prototype.startTransaction !== 'function'
          ? []
          : ([
              {
                what: 'the ControlledTransaction of db.startTransaction()',
                escapes: false,
                inTransaction: async (body) => {
                  const trx = await db.startTransaction().execute()
                  try {
                    await body(trx)
                  } finally {
                    await trx.rollback().execute()
                  }
                },
                provider: (handle, tableName) => kyselyLockProvider(handle as Db, { tableName }),
              },
            ] satisfies BoundHandle[])),
      ],
    },
  )
}

serializableRace('kysely', async () => {
  const db = new Kysely<Record<string, never>>({
    dialect: new PostgresDialect({
      pool: new pg.Pool({ connectionString: POSTGRES_URL, max: 12, options: SERIALIZABLE }),
    }),
  })
  return { provider: (tableName) => kyselyLockProvider(db, { tableName }), close: () => db.destroy() }
})
