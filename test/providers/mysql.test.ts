import assert from 'node:assert/strict'
import { hostname } from 'node:os'
import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../src/index.ts'
import { type MysqlQueryable, mysqlLockProvider, mysqlSchema } from '../../src/providers/mysql.ts'
import { lockProviderSuite } from '../../src/testing/index.ts'
import { connectOrSkip, uniqueTable } from '../support/backends.ts'
import { registerSuite } from '../support/register-suite.ts'

const url = process.env.SHEDLOCK_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const database = decodeURIComponent(new URL(url).pathname.slice(1)) || 'test'
const pools: mysql.Pool[] = []

async function connect(options: mysql.PoolOptions = {}): Promise<mysql.Pool> {
  const p = mysql.createPool({ uri: url, connectionLimit: 16, ...options })
  try {
    await p.query('SELECT 1')
  } catch (error) {
    await p.end()
    throw error
  }
  pools.push(p)
  return p
}

const pool = await connectOrSkip('mysql', '127.0.0.1:3306 (SHEDLOCK_MYSQL_URL)', () => connect())

const NOW = 'UTC_TIMESTAMP(3)'
// The server's insertId for a held upsert; the provider's internal constant, repeated here to check the wire.
const MARK = 1_518_500_249
// Java ShedLock's README DDL for MySQL.
const javaSchema = (table: string): string =>
  `CREATE TABLE ${table} (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))`

describe.skipIf(!pool)('mysql', () => {
  const db = pool!
  const tables: string[] = []
  const newTable = async (options: { columnNames?: Record<string, string> } = {}): Promise<string> => {
    const table = uniqueTable('shedlock_my')
    tables.push(table)
    await db.query(mysqlSchema({ tableName: table, ...options }))
    return table
  }
  const newJavaTable = async (): Promise<string> => {
    const table = uniqueTable('shedlock_my_java')
    tables.push(table)
    await db.query(javaSchema(table))
    return table
  }
  const isLocked = async (table: string, name: string, client: mysql.Pool = db): Promise<boolean> =>
    (await client.query<mysql.RowDataPacket[]>(`SELECT 1 FROM ${table} WHERE name = ? AND lock_until > ${NOW}`, [name]))[0].length === 1
  const deadPools: mysql.Pool[] = []
  const deadPool = (): mysql.Pool => {
    const p = mysql.createPool({ uri: 'mysql://root@127.0.0.1:1/test', connectTimeout: 2000, connectionLimit: 1 })
    deadPools.push(p)
    return p
  }
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    for (const p of [...pools, ...deadPools]) await p.end()
  })

  const variants: { title: string; useDbTime: boolean; flags?: string[]; java?: boolean }[] = [
    { title: 'database time', useDbTime: true },
    { title: 'database time, pool without CLIENT_FOUND_ROWS', useDbTime: true, flags: ['-FOUND_ROWS'] },
    { title: 'app time', useDbTime: false },
    { title: "database time, Java ShedLock's TIMESTAMP(3) table", useDbTime: true, java: true },
  ]
  for (const { title, useDbTime, flags, java } of variants) {
    describe(title, () => {
      let table = ''
      let client: mysql.Pool = db
      beforeAll(async () => {
        table = java ? await newJavaTable() : await newTable()
        if (flags) client = await connect({ flags })
      })
      registerSuite(
        lockProviderSuite({
          // A mysql2 promise Pool, passed with no cast: it is a MysqlQueryable.
          provider: () => mysqlLockProvider({ client, tableName: table, useDbTime }),
          isLocked: (name) => isLocked(table, name),
          deleteRecord: async (name) => {
            await db.query(`DELETE FROM ${table} WHERE name = ?`, [name])
          },
          unreachableProvider: () => mysqlLockProvider({ client: deadPool(), tableName: table, useDbTime }),
          extensible: true,
          maxNameLength: 64,
        }),
      )
    })
  }

  describe('storage format', () => {
    it('writes UTC timestamps and a locked_by that starts with the host name, whatever the process and session time zones', async () => {
      const table = await newTable()
      // One connection, so that the session time zone set here applies to the provider's statements.
      const shifted = await connect({ connectionLimit: 1 })
      await shifted.query("SET time_zone = '+05:00'")
      const previous = process.env.TZ
      process.env.TZ = 'America/Los_Angeles'
      try {
        for (const useDbTime of [true, false]) {
          const name = `format-${useDbTime}`
          const lock = await mysqlLockProvider({ client: shifted, tableName: table, useDbTime }).lock(lockConfiguration({ name, lockAtMostFor: '1h' }))
          assert.ok(lock)
          const [rows] = await db.query<mysql.RowDataPacket[]>(
            `SELECT locked_by, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', lock_until) DIV 1000 AS until_ms, ` +
              `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', locked_at) DIV 1000 AS at_ms FROM ${table} WHERE name = ?`,
            [name],
          )
          const row = rows[0] as { locked_by: string; until_ms: number | string; at_ms: number | string }
          expect(row.locked_by.startsWith(`${hostname()}:${process.pid}:`)).toBe(true)
          expect(Math.abs(Number(row.at_ms) - Date.now())).toBeLessThan(5_000)
          expect(Number(row.until_ms) - Number(row.at_ms)).toBeGreaterThan(3_600_000 - 5_000)
          expect(Number(row.until_ms) - Number(row.at_ms)).toBeLessThan(3_600_000 + 5_000)
          await lock.unlock()
          expect(await isLocked(table, name)).toBe(false)
        }
      } finally {
        if (previous === undefined) delete process.env.TZ
        else process.env.TZ = previous
      }
    })

    for (const java of [false, true]) {
      it(`respects a lock written by Java ShedLock and takes over an expired one (${java ? "Java's TIMESTAMP(3) table" : 'mysqlSchema table'})`, async () => {
        const table = java ? await newJavaTable() : await newTable()
        await db.query(
          `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ('java-held', TIMESTAMPADD(HOUR, 1, ${NOW}), ${NOW}, 'java-host'), ` +
            `('java-expired', TIMESTAMPADD(DAY, -1, ${NOW}), TIMESTAMPADD(DAY, -1, ${NOW}), 'java-host')`,
        )
        for (const useDbTime of [true, false]) {
          const provider = mysqlLockProvider({ client: db, tableName: table, useDbTime })
          expect(await provider.lock(lockConfiguration({ name: 'java-held', lockAtMostFor: '1m' }))).toBeUndefined()
        }
        const provider = mysqlLockProvider({ client: db, tableName: table })
        const lock = await provider.lock(lockConfiguration({ name: 'java-expired', lockAtMostFor: '1m' }))
        assert.ok(lock)
        expect(await isLocked(table, 'java-expired')).toBe(true)
        const extended = await lock.extend('2m', 0)
        assert.ok(extended)
        await extended.unlock()
        expect(await isLocked(table, 'java-expired')).toBe(false)
        const [rows] = await db.query<mysql.RowDataPacket[]>(`SELECT locked_by FROM ${table} WHERE name = 'java-held' AND lock_until > ${NOW}`)
        expect(rows[0]?.locked_by).toBe('java-host')
      })
    }

    it('decides expiry on the database clock: an app clock an hour ahead cannot take a held lock', async () => {
      const table = await newTable()
      const name = 'skewed'
      const honest = await mysqlLockProvider({ client: db, tableName: table }).lock(lockConfiguration({ name, lockAtMostFor: '10m' }))
      assert.ok(honest)
      const ahead = { now: () => Date.now() + 3_600_000 }
      expect(await mysqlLockProvider({ client: db, tableName: table, clock: ahead }).lock(lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }))).toBeUndefined()
      // With app time the skewed node believes the lock expired: the risk the README states.
      expect(
        await mysqlLockProvider({ client: db, tableName: table, clock: ahead, useDbTime: false }).lock(lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) })),
      ).toBeDefined()
    })

    it('works with a schema-qualified table and custom column names', async () => {
      const table = `${database}.${uniqueTable('locks')}`
      tables.push(table)
      const columnNames = { name: 'lock_name', lockUntil: 'until_ts', lockedAt: 'at_ts', lockedBy: 'owner' }
      await db.query(mysqlSchema({ tableName: table, columnNames }))
      for (const useDbTime of [true, false]) {
        const provider = mysqlLockProvider({ client: db, tableName: table, columnNames, useDbTime })
        const name = `custom-${useDbTime}`
        const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
        assert.ok(lock)
        expect((await db.query<mysql.RowDataPacket[]>(`SELECT owner FROM ${table} WHERE lock_name = ? AND until_ts > ${NOW}`, [name]))[0]).toHaveLength(1)
        expect(await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
        const extended = await lock.extend('2m', 0)
        assert.ok(extended)
        await extended.unlock()
        expect((await db.query<mysql.RowDataPacket[]>(`SELECT owner FROM ${table} WHERE lock_name = ? AND until_ts > ${NOW}`, [name]))[0]).toHaveLength(0)
      }
    })

    it('commits lock writes on their own, outside a transaction the caller has open', async () => {
      const table = await newTable()
      const connection = await db.getConnection()
      try {
        await connection.query('START TRANSACTION')
        await connection.query(`INSERT INTO ${table} VALUES ('other-row', ${NOW}, ${NOW}, 'tx')`)
        const lock = await mysqlLockProvider({ client: db, tableName: table }).lock(lockConfiguration({ name: 'outside-tx', lockAtMostFor: '1m' }))
        assert.ok(lock)
        await connection.query('ROLLBACK')
      } finally {
        connection.release()
      }
      expect(await isLocked(table, 'outside-tx')).toBe(true)
      expect((await db.query<mysql.RowDataPacket[]>(`SELECT 1 FROM ${table} WHERE name = 'other-row'`))[0]).toHaveLength(0)
    })

    it('stores "Report" and "report" as two locks (mysqlSchema compares names exactly)', async () => {
      const table = await newTable()
      const provider = mysqlLockProvider({ client: db, tableName: table })
      const upper = await provider.lock(lockConfiguration({ name: 'Report', lockAtMostFor: '1m' }))
      const lower = await provider.lock(lockConfiguration({ name: 'report', lockAtMostFor: '1m' }))
      assert.ok(upper)
      assert.ok(lower, '"report" was taken for the same lock as "Report"')
      await upper.unlock()
      expect(await isLocked(table, 'Report')).toBe(false)
      expect(await isLocked(table, 'report')).toBe(true)
      await lower.unlock()
    })

    it('refuses a name ending with a space before any query: PAD SPACE would make it the row of the name without it', async () => {
      const table = await newTable()
      let queries = 0
      const counting: MysqlQueryable = {
        query: (sql, values) => {
          queries++
          return db.query(sql, values) as unknown as ReturnType<MysqlQueryable['query']>
        },
      }
      const provider = mysqlLockProvider({ client: counting, tableName: table })
      const held = await provider.lock(lockConfiguration({ name: 'report', lockAtMostFor: '1m' }))
      assert.ok(held)
      const before = queries
      const error = await provider.lock(lockConfiguration({ name: 'report ', lockAtMostFor: '1m' })).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain('"report "')
      expect((error as Error).message).toContain('remove the trailing space')
      expect(queries).toBe(before)
      // Inner and leading spaces compare as written.
      const inner = await provider.lock(lockConfiguration({ name: ' re port', lockAtMostFor: '1m' }))
      assert.ok(inner, '" re port" was taken for the same lock as "report"')
      await inner.unlock()
      await held.unlock()
      expect(await isLocked(table, 'report')).toBe(false)
    })
  })

  describe('success detection (CLIENT_FOUND_ROWS and the LAST_INSERT_ID marker)', () => {
    for (const flags of [undefined, ['-FOUND_ROWS']]) {
      const label = flags ? 'pool without CLIENT_FOUND_ROWS' : 'default pool'

      it(`${label}: the server reports the marker as insertId only for a held row, on a reused connection`, async () => {
        const table = await newTable()
        // One connection: every statement below runs on the same session.
        const single = await connect({ connectionLimit: 1, ...(flags ? { flags } : {}) })
        const sql =
          `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES (?, TIMESTAMPADD(MICROSECOND, ?, ${NOW}), ${NOW}, ?) ` +
          `ON DUPLICATE KEY UPDATE locked_by = IF(lock_until <= ${NOW}, ?, IF(LAST_INSERT_ID(${MARK}) = ${MARK}, locked_by, locked_by)), ` +
          `locked_at = IF(lock_until <= ${NOW}, ${NOW}, locked_at), lock_until = IF(lock_until <= ${NOW}, TIMESTAMPADD(MICROSECOND, ?, ${NOW}), lock_until)`
        const upsert = async (name: string, owner: string): Promise<[number, number]> => {
          const [result] = await single.query<mysql.ResultSetHeader>(sql, [name, 60_000_000, owner, owner, 60_000_000])
          return [result.affectedRows, Number(result.insertId)]
        }
        const heldRows = flags ? 0 : 1
        expect(await upsert('a', 'o1')).toEqual([1, 0]) // inserted
        expect(await upsert('a', 'o2')).toEqual([heldRows, MARK]) // held
        expect(await upsert('b', 'o3')).toEqual([1, 0]) // inserted, right after a held attempt on this session
        await single.query(`UPDATE ${table} SET lock_until = TIMESTAMPADD(SECOND, -1, ${NOW}) WHERE name = 'a'`)
        expect(await upsert('a', 'o4')).toEqual([2, 0]) // expired row taken over
        expect(await upsert('a', 'o5')).toEqual([heldRows, MARK])
        // The session keeps MARK as LAST_INSERT_ID(), but the next statement's insertId is its own.
        expect((await single.query<mysql.RowDataPacket[]>('SELECT LAST_INSERT_ID() AS id'))[0][0]?.id).toBe(MARK)
        expect(await upsert('c', 'o6')).toEqual([1, 0])
      })

      it(`${label}: after a held attempt, the next acquire on the same connection is not mistaken for held`, async () => {
        const table = await newTable()
        const single = await connect({ connectionLimit: 1, ...(flags ? { flags } : {}) })
        for (const useDbTime of [true, false]) {
          const provider = mysqlLockProvider({ client: single, tableName: table, useDbTime })
          const [held, free] = [`held-${useDbTime}`, `free-${useDbTime}`]
          const first = await provider.lock(lockConfiguration({ name: held, lockAtMostFor: '1m' }))
          assert.ok(first)
          expect(await provider.lock(lockConfiguration({ name: held, lockAtMostFor: '1m' }))).toBeUndefined()
          const second = await provider.lock(lockConfiguration({ name: free, lockAtMostFor: '1m' }))
          assert.ok(second, 'an acquire right after a held attempt on the same connection was read as held')
          expect(await provider.lock(lockConfiguration({ name: free, lockAtMostFor: '1m' }))).toBeUndefined()
          await second.unlock()
          await first.unlock()
        }
      })

      it(`${label}: extending twice to the same instant still reports the lock as extended`, async () => {
        const table = await newTable()
        const client = await connect({ connectionLimit: 2, ...(flags ? { flags } : {}) })
        const at = Date.now()
        const clock = { now: () => at }
        const provider = mysqlLockProvider({ client, tableName: table, useDbTime: false, clock })
        const lock = await provider.lock(lockConfiguration({ name: 'same-instant', lockAtMostFor: '1m', createdAt: new Date(at) }))
        assert.ok(lock)
        // The frozen clock makes both extensions write the same lock_until: the second changes nothing.
        const once = await lock.extend('2m', 0)
        assert.ok(once)
        const twice = await once.extend('2m', 0)
        assert.ok(twice, 'an extension that wrote an unchanged value was reported as lost')
        await twice.unlock()
      })

      it(`${label}: of 16 contenders racing on an absent row exactly one wins, 20 times`, { timeout: 60_000 }, async () => {
        const table = await newTable()
        const client = flags ? await connect({ flags }) : db
        const nodes = [mysqlLockProvider({ client, tableName: table }), mysqlLockProvider({ client, tableName: table })]
        for (let round = 0; round < 20; round++) {
          const name = `race-${round}`
          const results = await Promise.all(Array.from({ length: 16 }, (_, i) => nodes[i % 2]!.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))))
          const winners = results.filter((lock) => lock !== undefined)
          expect(winners.length, `round ${round}: ${winners.length} winners`).toBe(1)
          await winners[0]!.unlock()
        }
      })
    }
  })

  describe('concurrency failures', () => {
    const deadlock = (): Error => Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 })
    const ok = (affectedRows: number, insertId = 0): [unknown, unknown] => [{ affectedRows, insertId }, undefined]
    // A client that fails the first `failures` statements matching `pattern`, then answers `reply`.
    const flaky = (pattern: RegExp, failures: number, error: () => Error): MysqlQueryable & { calls: string[] } => {
      const calls: string[] = []
      let left = failures
      return {
        calls,
        query: async (sql) => {
          calls.push(sql)
          if (pattern.test(sql) && left-- > 0) throw error()
          return ok(1)
        },
      }
    }

    it('a deadlock or lock wait timeout on acquire means another contender has the row: not acquired', async () => {
      for (const error of [deadlock, () => Object.assign(new Error('Lock wait timeout exceeded'), { code: 'ER_LOCK_WAIT_TIMEOUT', errno: 1205 })]) {
        const client = flaky(/^INSERT/, 1, error)
        expect(await mysqlLockProvider({ client }).lock(lockConfiguration({ name: 'contended', lockAtMostFor: '1m' }))).toBeUndefined()
        expect(client.calls).toHaveLength(1)
      }
    })

    it('unlock and extend retry a deadlock up to 3 times, then reject with LockProviderError', async () => {
      const client = flaky(/^UPDATE/, 3, deadlock)
      const lock = await mysqlLockProvider({ client }).lock(lockConfiguration({ name: 'retried', lockAtMostFor: '1m' }))
      assert.ok(lock)
      const extended = await lock.extend('1m', 0)
      assert.ok(extended)
      expect(client.calls.filter((sql) => sql.startsWith('UPDATE'))).toHaveLength(4)

      const stubborn = flaky(/^UPDATE/, 4, deadlock)
      const held = await mysqlLockProvider({ client: stubborn }).lock(lockConfiguration({ name: 'stubborn', lockAtMostFor: '1m' }))
      assert.ok(held)
      const error = await held.unlock().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('could not release lock "stubborn"')
      expect(stubborn.calls.filter((sql) => sql.startsWith('UPDATE'))).toHaveLength(4)
      // The failed unlock leaves the handle usable: the fifth statement succeeds.
      await held.unlock()
    })
  })

  describe('bad input', () => {
    it('rejects table and column names that are not plain identifiers before any query', () => {
      const client = {
        query: () => {
          throw new Error('no query may run')
        },
      }
      for (const tableName of ['shedlock; DROP TABLE users', 'a.b.c', '`quoted`', '"quoted"', '', 'x'.repeat(64)]) {
        expect(() => mysqlLockProvider({ client, tableName })).toThrow(LockConfigurationError)
      }
      expect(() => mysqlLockProvider({ client, columnNames: { lockedBy: 'by--' } })).toThrow(/columnNames.lockedBy/)
      expect(() => mysqlLockProvider({ client, columnNames: { name: 'name`, x' } })).toThrow(LockConfigurationError)
      expect(() => mysqlSchema({ tableName: 'x y' })).toThrow(LockConfigurationError)
    })

    it('rejects a missing client, and a client that does not answer like mysql2/promise', async () => {
      expect(() => mysqlLockProvider({} as never)).toThrow(LockConfigurationError)
      expect(() => mysqlLockProvider({ client: { query: 'no' } } as never)).toThrow(/mysql2 promise Pool/)
      // A callback-style pool resolves to something that is not [result, fields].
      const callbackStyle = { query: async () => ({}) as never }
      const error = await mysqlLockProvider({ client: callbackStyle })
        .lock(lockConfiguration({ name: 'wrong-client', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('mysql2/promise')
    })

    it('a missing table rejects with LockProviderError that names the lock and gives the DDL', async () => {
      const provider = mysqlLockProvider({ client: db, tableName: 'shedlock_missing_table' })
      const error = await provider.lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' })).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as LockProviderError).provider).toBe('mysql')
      expect((error as LockProviderError).cause).toMatchObject({ errno: 1146 })
      expect((error as Error).message).toContain('mysql: could not acquire lock "needs-table"')
      expect((error as Error).message).toContain('CREATE TABLE IF NOT EXISTS shedlock_missing_table')
    })

    it('a table with other columns rejects with advice about columnNames', async () => {
      const table = await newTable()
      const provider = mysqlLockProvider({ client: db, tableName: table, columnNames: { lockedBy: 'owner' } })
      const error = await provider.lock(lockConfiguration({ name: 'columns', lockAtMostFor: '1m' })).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(/does not have the expected columns .*pass columnNames/)
    })

    it('an unreachable server rejects with a message that says the task was not run', async () => {
      const error = await mysqlLockProvider({ client: deadPool() })
        .lock(lockConfiguration({ name: 'dead', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(/^mysql: could not acquire lock "dead": MySQL is unreachable .*the task was not run/)
    })

    it('keeps credentials of a connection URL out of error messages', async () => {
      const client: MysqlQueryable = {
        query: async () => {
          throw new Error('cannot connect to mysql://admin:s3cret@db.internal:3306/app')
        },
      }
      const error = await mysqlLockProvider({ client })
        .lock(lockConfiguration({ name: 'secret', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).not.toContain('s3cret')
      expect((error as Error).message).toContain('admin:***@db.internal')
    })
  })
})
