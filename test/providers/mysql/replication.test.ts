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
