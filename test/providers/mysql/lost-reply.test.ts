import mysql from 'mysql2/promise'
import { afterAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { mysqlLockProvider, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'
import { ReplyCutter } from '../../support/sql/reply-cutter.ts'

// An acquire whose reply is lost after the server committed it (the provider's timeout while the
// reply never comes, or a reset link) is given back on a fresh connection; and on MariaDB an
// acquire that meets a row another transaction is still writing answers "not acquired" within
// innodb_lock_wait_timeout's 1 s, freeing its connection, rather than waiting 50 s for that commit.

const db = await mysqlPoolOrSkip(2)
const table = uniqueTable('shedlock_my_lost')
if (db) await db.query(mysqlSchema({ tableName: table, fencingTokens: true }))
afterAll(async () => {
  await db?.query(`DROP TABLE IF EXISTS ${table}`)
  await db?.end()
})

const NOW = 'UTC_TIMESTAMP(3)'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether the row of `name` is held now, on the server's clock. */
const held = async (name: string): Promise<boolean> =>
  ((await db!.query(`SELECT 1 AS x FROM ${table} WHERE name = ? AND lock_until > ${NOW}`, [name]))[0] as unknown[])
    .length === 1

describe.skipIf(!db)('mysql: a lost reply, a row being written', () => {
  for (const cut of ['timeout', 'reset'] as const) {
    it(`an acquire committed on the server whose reply is lost (${cut === 'reset' ? 'the connection reset after the commit' : "the provider's timeout while the reply never comes"}) is given back on a fresh connection`, async () => {
      const proxy = await ReplyCutter.start(Number(new URL(MYSQL_URL).port || 3306))
      const url = new URL(MYSQL_URL)
      url.host = `127.0.0.1:${proxy.port}`
      const pool = mysql.createPool({ uri: url.toString(), connectionLimit: 2 })
      try {
        const provider = mysqlLockProvider({ client: pool, tableName: table, fencingTokens: true, timeout: '1500ms' })
        const name = `lost-${cut}`
        // The first acquire reads the columns; one connection open, which the cut then breaks.
        await (await provider.lock(lockConfiguration({ name: `${name}-warm`, lockAtMostFor: '1m' })))!.unlock()
        if (cut === 'reset') proxy.resetAtNextReply()
        else proxy.dropReplies()
        const error = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        const [rows] = await db!.query(`SELECT locked_by FROM ${table} WHERE name = ?`, [name])
        expect(rows).toHaveLength(1)
        const until = Date.now() + 3000
        while ((await held(name)) && Date.now() < until) await sleep(100)
        expect(await held(name)).toBe(false)
        const other = mysqlLockProvider({ client: db!, tableName: table, fencingTokens: true })
        expect(await other.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeDefined()
      } finally {
        await proxy.close()
        await pool.end().catch(() => {})
      }
    }, 20_000)
  }

  it('while another transaction writes the row (its commit waiting), an acquire on MariaDB answers "not acquired" within about a second and frees its connection', async () => {
    const [[version]] = (await db!.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]]
    if (!/mariadb/i.test(version.v)) return
    const name = 'being-written'
    const provider = mysqlLockProvider({ client: db!, tableName: table, fencingTokens: true })
    await (await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })))!.unlock()
    const a = await mysql.createConnection({ uri: MYSQL_URL })
    const b = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 })
    try {
      await a.query('BEGIN')
      await a.query(`SELECT name FROM ${table} WHERE name = ? FOR UPDATE`, [name])
      const bProvider = mysqlLockProvider({ client: b, tableName: table, fencingTokens: true, timeout: '5s' })
      const started = Date.now()
      const outcome = await bProvider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })).then(
        (lock) => ({ lock }),
        (error: unknown) => ({ error }),
      )
      expect(outcome).toEqual({ lock: undefined })
      expect(Date.now() - started).toBeLessThan(2500)
      const ping = await Promise.race([b.query('SELECT 1 AS one'), sleep(1000).then(() => 'busy')])
      expect(ping).not.toBe('busy')
    } finally {
      await a.query('ROLLBACK').catch(() => {})
      await a.end()
      await b.end()
    }
  }, 20_000)
})
