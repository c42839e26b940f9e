// requireSemiSync and read-only servers, against the shared MariaDB (no replica, semi-sync off).
// The same options against a real primary and semi-synchronous replica: test/ha (npm run test:ha).
import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { mysqlLockProvider, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await mysqlPoolOrSkip(4)
const config = (name: string) => lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: 0 })

describe.runIf(pool)('mysql: replication', () => {
  const db = pool!
  const table = uniqueTable('shedlock_my_repl')
  const pools: mysql.Pool[] = []
  beforeAll(async () => {
    await db.query(mysqlSchema({ tableName: table }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    for (const p of pools) await p.end()
    await db.end()
  })

  it('requireSemiSync refuses a server whose semi-sync is off, naming why, and writes nothing', async () => {
    const provider = mysqlLockProvider({ client: db, tableName: table, requireSemiSync: true })
    const error = await provider.lock(config('semi-sync-required')).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toMatch(
      /^mysql: could not acquire lock "semi-sync-required": requireSemiSync is on, but (semi-synchronous replication is off \(Rpl_semi_sync_master_status OFF|the server has no semi-synchronous replication).*; nothing was written; the task was not run$/,
    )
    const [rows] = await db.query(`SELECT 1 FROM ${table} WHERE name = ?`, ['semi-sync-required'])
    expect(rows).toHaveLength(0)
    const lock = await mysqlLockProvider({ client: db, tableName: table }).lock(config('semi-sync-required'))
    expect(lock).toBeDefined()
    await lock!.unlock()
  })

  it('requireSemiSync with fencingTokens: an acquisition given back because semi-sync fell back keeps the row and its count, so later tokens still increase', async () => {
    const fenced = uniqueTable('shedlock_my_repl_fence')
    await db.query(mysqlSchema({ tableName: fenced, fencingTokens: true }))
    try {
      // The shared MariaDB has no replica: the semi-sync status the provider reads around each
      // acquisition is answered here, ON throughout, with one commit that went unacknowledged
      // (Rpl_semi_sync_master_no_tx 0 -> 1) around the acquisition that falls back. Every lock
      // statement goes to the real table.
      let noTx = 0
      let fallBack = false
      const client = {
        query: async (sql: string, values: unknown[]) => {
          if (!sql.startsWith('SHOW GLOBAL STATUS')) return db.query(sql, values)
          const status = [
            { Variable_name: 'Rpl_semi_sync_master_status', Value: 'ON' },
            { Variable_name: 'Rpl_semi_sync_master_no_tx', Value: String(noTx) },
          ]
          if (fallBack) noTx += 1
          return [status, []]
        },
      } as unknown as mysql.Pool
      const provider = mysqlLockProvider({ client, tableName: fenced, requireSemiSync: true, fencingTokens: true })
      const tokens: bigint[] = []
      for (let i = 0; i < 3; i++) {
        const lock = await provider.lock(config('semi-sync-fenced'))
        tokens.push(lock!.fencingToken!)
        await lock!.unlock()
      }
      fallBack = true
      const error = await provider.lock(config('semi-sync-fenced')).catch((e: unknown) => e)
      fallBack = false
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(/a commit went unacknowledged meanwhile .*; the lock was given back/)
      // Given back: free, and the row is still there with the count of the acquisition given back.
      const [rows] = await db.query(
        `SELECT fencing_token, lock_until <= UTC_TIMESTAMP(3) AS free FROM ${fenced} WHERE name = ?`,
        ['semi-sync-fenced'],
      )
      expect(rows).toEqual([{ fencing_token: expect.anything(), free: 1 }])
      const givenBack = BigInt((rows as { fencing_token: string | number }[])[0]!.fencing_token)
      expect(givenBack).toBe(tokens[2]! + 1n)
      for (let i = 0; i < 2; i++) {
        const lock = await provider.lock(config('semi-sync-fenced'))
        tokens.push(lock!.fencingToken!)
        await lock!.unlock()
      }
      expect(tokens[3]! > givenBack).toBe(true)
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!, `token ${i}: ${tokens}`).toBe(true)
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${fenced}`)
    }
  })

  it('requireSemiSync must be a boolean', () => {
    expect(() => mysqlLockProvider({ client: db, requireSemiSync: 1 as never })).toThrow(LockConfigurationError)
  })

  it('a read-only session rejects with a LockProviderError that says the server is read-only', async () => {
    const readOnly = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 })
    pools.push(readOnly)
    readOnly.pool.on('connection', (connection) => connection.query('SET SESSION TRANSACTION READ ONLY'))
    const error = await mysqlLockProvider({ client: readOnly, tableName: table })
      .lock(config('read-only'))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toMatch(
      /could not acquire lock "read-only": the server is read-only \(.*READ ONLY.*\): a replica, or a primary that was demoted; the task was not run/,
    )
  })
})
