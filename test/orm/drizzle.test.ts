import { sql } from 'drizzle-orm'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import mysql from 'mysql2'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../src/index.ts'
import { drizzleLockProvider } from '../../src/orm/drizzle.ts'
import { MYSQL_URL, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { DEAD_POSTGRES, firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

let pgPool: pg.Pool
let pgDb: ReturnType<typeof pgDrizzle>
let mysqlPool: mysql.Pool
let mysqlDb: ReturnType<typeof mysqlDrizzle>
// Drizzle rolls a transaction back when its callback throws.
const rollBack = (): never => {
  throw new Error('roll back')
}
const rolledBack = (transaction: Promise<unknown>): Promise<void> =>
  transaction.then(
    () => undefined,
    (error: unknown) => {
      if ((error as Error).message !== 'roll back') throw error
    },
  )

await ormTests(
  'drizzle',
  'postgres',
  async () => {
    pgPool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 })
    const pool = pgPool
    pgDb = pgDrizzle(pool)
    const db = pgDb
    const dead_: pg.Pool[] = []
    return {
      provider: (tableName, fencingTokens) => drizzleLockProvider(db, { tableName, fencingTokens }),
      transaction: (body) =>
        db.transaction((tx) =>
          body({
            handle: tx,
            read: async (text) => firstValue((await tx.execute(sql.raw(text))).rows),
            write: async (text) => {
              await tx.execute(sql.raw(text))
            },
          }),
        ),
      fromHandle: {
        escapes: false,
        provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }),
      },
      unreachable: (tableName) => {
        const dead = new pg.Pool({ connectionString: DEAD_POSTGRES, connectionTimeoutMillis: 2_000 })
        dead_.push(dead)
        return drizzleLockProvider(pgDrizzle(dead), { tableName })
      },
      close: async () => {
        await Promise.all(dead_.map((dead) => dead.end()))
        await pool.end()
      },
    }
  },
  {
    deadStore: true,
    boundHandles: [
      {
        what: 'a nested tx (a savepoint of tx.transaction())',
        escapes: false,
        inTransaction: (body) =>
          rolledBack(pgDb.transaction((tx) => tx.transaction((nested) => body(nested).then(rollBack)))),
        provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }),
      },
      {
        what: 'a database over a PoolClient with a transaction begun on it',
        escapes: false,
        inTransaction: async (body) => {
          const client = await pgPool.connect()
          try {
            await client.query('BEGIN')
            await body(pgDrizzle({ client }))
            await client.query('ROLLBACK')
          } finally {
            client.release()
          }
        },
        provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }),
      },
    ],
  },
)

await ormTests(
  'drizzle',
  'mysql',
  async () => {
    // The callback pool, as drizzle-orm/mysql2's docs make it; the adapter uses its promise().
    mysqlPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 8 })
    const pool = mysqlPool
    mysqlDb = mysqlDrizzle(pool)
    const db = mysqlDb
    return {
      provider: (tableName, fencingTokens) => drizzleLockProvider(db, { tableName, fencingTokens }),
      transaction: (body) =>
        db.transaction((tx) =>
          body({
            handle: tx,
            read: async (text) =>
              firstValue((await tx.execute(sql.raw(text)))[0] as unknown as Record<string, unknown>[]),
            write: async (text) => {
              await tx.execute(sql.raw(text))
            },
          }),
        ),
      fromHandle: {
        escapes: false,
        provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }),
      },
      close: () => pool.promise().end(),
    }
  },
  {
    // Over its mysql2 pool: one compound statement per slot run on MariaDB.
    paired: true,
    boundHandles: [
      {
        what: 'a nested tx (a savepoint of tx.transaction())',
        escapes: false,
        inTransaction: (body) =>
          rolledBack(mysqlDb.transaction((tx) => tx.transaction((nested) => body(nested).then(rollBack)))),
        provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }),
      },
      {
        what: 'a database over a pooled mysql2 connection with a transaction begun on it',
        escapes: false,
        inTransaction: async (body) => {
          const connection = await mysqlPool.promise().getConnection()
          try {
            await connection.query('START TRANSACTION')
            await body(mysqlDrizzle({ client: connection }))
            await connection.query('ROLLBACK')
          } finally {
            connection.release()
          }
        },
        provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }),
      },
    ],
  },
)

describe('drizzleLockProvider', () => {
  it('refuses a database over a single connection, naming the fix', async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL })
    expect(() => drizzleLockProvider(pgDrizzle(client))).toThrow(LockConfigurationError)
    expect(() => drizzleLockProvider(pgDrizzle(client))).toThrow(/pg\.Pool/)
  })
})

serializableRace('drizzle', async () => {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 12, options: SERIALIZABLE })
  return { provider: (tableName) => drizzleLockProvider(pgDrizzle(pool), { tableName }), close: () => pool.end() }
})
