import { sql } from 'drizzle-orm'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import mysql from 'mysql2'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../src/index.ts'
import { drizzleLockProvider } from '../../src/orm/drizzle.ts'
import { MYSQL_URL, POSTGRES_URL } from '../support/sql-pools.ts'
import { DEAD_POSTGRES, firstValue, ormTests, SERIALIZABLE, serializableRace } from './support.ts'

await ormTests(
  'drizzle',
  'postgres',
  async () => {
    const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 })
    const db = pgDrizzle(pool)
    const dead_: pg.Pool[] = []
    return {
      provider: (tableName) => drizzleLockProvider(db, { tableName }),
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
      fromHandle: { escapes: false, provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }) },
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
  { deadStore: true },
)

await ormTests('drizzle', 'mysql', async () => {
  // The callback pool, as drizzle-orm/mysql2's docs make it; the adapter uses its promise().
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 8 })
  const db = mysqlDrizzle(pool)
  return {
    provider: (tableName) => drizzleLockProvider(db, { tableName }),
    transaction: (body) =>
      db.transaction((tx) =>
        body({
          handle: tx,
          read: async (text) => firstValue((await tx.execute(sql.raw(text)))[0] as unknown as Record<string, unknown>[]),
          write: async (text) => {
            await tx.execute(sql.raw(text))
          },
        }),
      ),
    fromHandle: { escapes: false, provider: (handle, tableName) => drizzleLockProvider(handle as never, { tableName }) },
    close: () => pool.promise().end(),
  }
})

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
