import assert from 'node:assert/strict'
import { hostname } from 'node:os'
import mysqlCallback from 'mysql2'
import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import {
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  type LockProvider,
  lockConfiguration,
} from '../../../src/index.ts'
import { type MysqlClient, mysqlLockProvider, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { createMysqlLockProvider } from '../../../src/providers/mysql/provider.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

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

/**
 * A pool whose every connection runs `init` first. mysql2 queues commands per connection, and a
 * new connection is announced before it serves anything, so no statement of the pool runs before
 * it. (mysql2's `timezone` option does not set the session's time zone: it only converts Dates.)
 */
async function connectWith(init: string, options: mysql.PoolOptions = {}): Promise<mysql.Pool> {
  const p = await connect(options)
  p.on('connection', (connection) => {
    connection.query(init)
  })
  // The connection that answered connect()'s probe predates the listener: replace it.
  const idle = await p.getConnection()
  idle.destroy()
  return p
}
/** Ends a pool before the file ends: the server's connections are shared with other test files. */
async function dispose(p: mysql.Pool): Promise<void> {
  pools.splice(pools.indexOf(p), 1)
  await p.end()
}
/** A pool whose sessions are in time zone `zone` (e.g. `+05:00`). */
const zonedPool = (zone: string, options: mysql.PoolOptions = {}): Promise<mysql.Pool> =>
  connectWith(`SET time_zone = '${zone}'`, options)

const NOW = 'UTC_TIMESTAMP(3)'
// The server's insertId for a held upsert; the provider's internal constant, repeated here to check the wire.
const MARK = 1_518_500_249
// Java ShedLock's README DDL for MySQL.
const javaSchema = (table: string): string =>
  `CREATE TABLE ${table} (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))`

describe.skipIf(!pool)('mysql', () => {
  const db = pool!
  const tables: string[] = []
  const newTable = async (
    options: { columnNames?: Record<string, string>; fencingTokens?: boolean } = {},
  ): Promise<string> => {
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
    (
      await client.query<mysql.RowDataPacket[]>(`SELECT 1 FROM ${table} WHERE name = ? AND lock_until > ${NOW}`, [name])
    )[0].length === 1
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

  const variants: {
    title: string
    useDbTime: boolean
    flags?: string[]
    java?: boolean
    zone?: string
    fencing?: boolean
  }[] = [
    { title: 'database time', useDbTime: true },
    { title: 'database time, fencing tokens', useDbTime: true, fencing: true },
    {
      title: 'app time, fencing tokens, pool without CLIENT_FOUND_ROWS',
      useDbTime: false,
      flags: ['-FOUND_ROWS'],
      fencing: true,
    },
    { title: 'database time, pool without CLIENT_FOUND_ROWS', useDbTime: true, flags: ['-FOUND_ROWS'] },
    { title: 'app time', useDbTime: false },
    { title: "database time, Java ShedLock's TIMESTAMP(3) table", useDbTime: true, java: true },
    // isLocked reads as Java ShedLock does: lock_until > UTC_TIMESTAMP(3), from a UTC session.
    {
      title: "database time, Java ShedLock's TIMESTAMP(3) table, sessions at +05:00",
      useDbTime: true,
      java: true,
      zone: '+05:00',
    },
    {
      title: "app time, Java ShedLock's TIMESTAMP(3) table, sessions at +05:00",
      useDbTime: false,
      java: true,
      zone: '+05:00',
    },
  ]
  for (const { title, useDbTime, flags, java, zone, fencing = false } of variants) {
    describe(title, () => {
      let table = ''
      let client: mysql.Pool = db
      beforeAll(async () => {
        table = java ? await newJavaTable() : await newTable({ fencingTokens: fencing })
        if (flags) client = await connect({ flags })
        if (zone) client = await zonedPool(zone, { connectionLimit: 8 })
      })
      registerSuite(
        lockProviderSuite({
          // A mysql2 promise Pool, passed with no cast: it is a MysqlClient.
          provider: () => mysqlLockProvider({ client, tableName: table, useDbTime, fencingTokens: fencing }),
          isLocked: (name) => isLocked(table, name),
          deleteRecord: async (name) => {
            await db.query(`DELETE FROM ${table} WHERE name = ?`, [name])
          },
          unreachableProvider: () => mysqlLockProvider({ client: deadPool(), tableName: table, useDbTime }),
          extensible: true,
          slots: { inspector: true, paired: true },
          maxNameLength: 64,
          fencing,
          // A held row is told by the LAST_INSERT_ID marker, with and without CLIENT_FOUND_ROWS: race it.
          contention: { rounds: 20 },
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
          const lock = await mysqlLockProvider({ client: shifted, tableName: table, useDbTime }).lock(
            lockConfiguration({ name, lockAtMostFor: '1h' }),
          )
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
        const [rows] = await db.query<mysql.RowDataPacket[]>(
          `SELECT locked_by FROM ${table} WHERE name = 'java-held' AND lock_until > ${NOW}`,
        )
        expect(rows[0]?.locked_by).toBe('java-host')
      })
    }

    it('decides expiry on the database clock: an app clock an hour ahead cannot take a held lock', async () => {
      const table = await newTable()
      const name = 'skewed'
      const honest = await mysqlLockProvider({ client: db, tableName: table }).lock(
        lockConfiguration({ name, lockAtMostFor: '10m' }),
      )
      assert.ok(honest)
      const ahead = { now: () => Date.now() + 3_600_000 }
      expect(
        await mysqlLockProvider({ client: db, tableName: table, clock: ahead }).lock(
          lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }),
        ),
      ).toBeUndefined()
      // With app time the skewed node believes the lock expired: the risk the README states.
      expect(
        await mysqlLockProvider({ client: db, tableName: table, clock: ahead, useDbTime: false }).lock(
          lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }),
        ),
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
        expect(
          (
            await db.query<mysql.RowDataPacket[]>(
              `SELECT owner FROM ${table} WHERE lock_name = ? AND until_ts > ${NOW}`,
              [name],
            )
          )[0],
        ).toHaveLength(1)
        expect(await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
        const extended = await lock.extend('2m', 0)
        assert.ok(extended)
        await extended.unlock()
        expect(
          (
            await db.query<mysql.RowDataPacket[]>(
              `SELECT owner FROM ${table} WHERE lock_name = ? AND until_ts > ${NOW}`,
              [name],
            )
          )[0],
        ).toHaveLength(0)
      }
    })

    it('commits lock writes on their own, outside a transaction the caller has open', async () => {
      const table = await newTable()
      const connection = await db.getConnection()
      try {
        await connection.query('START TRANSACTION')
        await connection.query(`INSERT INTO ${table} VALUES ('other-row', ${NOW}, ${NOW}, 'tx')`)
        const lock = await mysqlLockProvider({ client: db, tableName: table }).lock(
          lockConfiguration({ name: 'outside-tx', lockAtMostFor: '1m' }),
        )
        assert.ok(lock)
        await connection.query('ROLLBACK')
      } finally {
        connection.release()
      }
      expect(await isLocked(table, 'outside-tx')).toBe(true)
      expect(
        (await db.query<mysql.RowDataPacket[]>(`SELECT 1 FROM ${table} WHERE name = 'other-row'`))[0],
      ).toHaveLength(0)
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
      const counting: MysqlClient = {
        query: (sql, values) => {
          queries++
          return db.query(sql, values) as unknown as ReturnType<MysqlClient['query']>
        },
      }
      const provider = mysqlLockProvider({ client: counting, tableName: table })
      const held = await provider.lock(lockConfiguration({ name: 'report', lockAtMostFor: '1m' }))
      assert.ok(held)
      const before = queries
      const error = await provider
        .lock(lockConfiguration({ name: 'report ', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
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
        const lock = await provider.lock(
          lockConfiguration({ name: 'same-instant', lockAtMostFor: '1m', createdAt: new Date(at) }),
        )
        assert.ok(lock)
        // The frozen clock makes both extensions write the same lock_until: the second changes nothing.
        const once = await lock.extend('2m', 0)
        assert.ok(once)
        const twice = await once.extend('2m', 0)
        assert.ok(twice, 'an extension that wrote an unchanged value was reported as lost')
        await twice.unlock()
      })
    }
  })

  // The mode of the ORM clients that report only a row count (Prisma over the mariadb connector):
  // a client that drops insertId, with the found-rows count (the mariadb connector's default) and
  // the changed-rows count.
  describe('count-only acquire (UPDATE an expired row, else INSERT)', () => {
    const countOnly = (client: mysql.Pool): MysqlClient => ({
      async query(sql: string, values: unknown[]): Promise<[unknown, unknown]> {
        const [result, fields] = await client.query(sql, values)
        return [
          Array.isArray(result) ? result : { affectedRows: (result as mysql.ResultSetHeader).affectedRows },
          fields,
        ]
      },
    })
    for (const flags of [undefined, ['-FOUND_ROWS']]) {
      const label = flags ? 'changed-rows count' : 'found-rows count'
      for (const useDbTime of [true, false]) {
        describe(`${label}, ${useDbTime ? 'database' : 'app'} time`, () => {
          let table = ''
          let client: MysqlClient = countOnly(db)
          beforeAll(async () => {
            table = await newTable()
            if (flags) client = countOnly(await connect({ flags }))
          })
          registerSuite(
            lockProviderSuite({
              provider: () => createMysqlLockProvider({ client, tableName: table, useDbTime }, 'countOnly'),
              isLocked: (name) => isLocked(table, name),
              deleteRecord: async (name) => {
                await db.query(`DELETE FROM ${table} WHERE name = ?`, [name])
              },
              unreachableProvider: () =>
                createMysqlLockProvider({ client: deadPool(), tableName: table, useDbTime }, 'countOnly'),
              extensible: true,
              slots: { inspector: true },
              maxNameLength: 64,
              // Half the races on a new row (INSERT), half on a released or expired one (UPDATE).
              contention: { rounds: 20 },
            }),
          )
        })
      }

      it(`${label}: extending twice to the same instant still reports the lock as extended, and a lost lock as lost`, async () => {
        const table = await newTable()
        const client = countOnly(flags ? await connect({ connectionLimit: 2, flags }) : db)
        const at = Date.now()
        const clock = { now: () => at }
        const provider = createMysqlLockProvider({ client, tableName: table, useDbTime: false, clock }, 'countOnly')
        const lock = await provider.lock(
          lockConfiguration({ name: 'same-instant', lockAtMostFor: '1m', createdAt: new Date(at) }),
        )
        assert.ok(lock)
        // The frozen clock makes both extensions write the same lock_until: the second changes nothing.
        const once = await lock.extend('2m', 0)
        assert.ok(once)
        const twice = await once.extend('2m', 0)
        assert.ok(twice, 'an extension that wrote an unchanged value was reported as lost')
        await db.query(`UPDATE ${table} SET locked_by = 'another node' WHERE name = 'same-instant'`)
        expect(await twice.extend('2m', 0)).toBeUndefined()
      })
    }

    it('a held row costs two statements, a free or expired one one; the plain provider always sends one', async () => {
      const table = await newTable()
      const sent: string[] = []
      const counting = (client: MysqlClient): MysqlClient => ({
        query: (sql, values) => {
          // MariaDB's acquires start with their lock wait (SET STATEMENT ... FOR): counted by the statement's own verb.
          if (!/information_schema/.test(sql)) sent.push(sql.replace(/^SET STATEMENT .*? FOR /, '').split(' ')[0]!)
          return client.query(sql, values)
        },
      })
      const provider = createMysqlLockProvider({ client: counting(countOnly(db)), tableName: table }, 'countOnly')
      const first = await provider.lock(lockConfiguration({ name: 'n', lockAtMostFor: '1m' }))
      assert.ok(first)
      expect(sent.splice(0)).toEqual(['UPDATE', 'INSERT'])
      expect(await provider.lock(lockConfiguration({ name: 'n', lockAtMostFor: '1m' }))).toBeUndefined()
      expect(sent.splice(0)).toEqual(['UPDATE', 'INSERT'])
      await first.unlock()
      expect(sent.splice(0)).toEqual(['UPDATE'])
      const again = await provider.lock(lockConfiguration({ name: 'n', lockAtMostFor: '1m' }))
      assert.ok(again)
      expect(sent.splice(0)).toEqual(['UPDATE'])
      await again.unlock()
      sent.length = 0
      const plain = mysqlLockProvider({ client: counting(db), tableName: table })
      const lock = await plain.lock(lockConfiguration({ name: 'n', lockAtMostFor: '1m' }))
      assert.ok(lock)
      expect(await plain.lock(lockConfiguration({ name: 'n', lockAtMostFor: '1m' }))).toBeUndefined()
      expect(sent).toEqual(['INSERT', 'INSERT'])
      await lock.unlock()
    })
  })

  describe('concurrency failures', () => {
    const deadlock = (): Error =>
      Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), {
        code: 'ER_LOCK_DEADLOCK',
        errno: 1213,
      })
    const ok = (affectedRows: number, insertId = 0): [unknown, unknown] => [{ affectedRows, insertId }, undefined]
    // A client that fails the first `failures` statements matching `pattern`, then answers `reply`.
    const flaky = (pattern: RegExp, failures: number, error: () => Error): MysqlClient & { calls: string[] } => {
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
      for (const error of [
        deadlock,
        () => Object.assign(new Error('Lock wait timeout exceeded'), { code: 'ER_LOCK_WAIT_TIMEOUT', errno: 1205 }),
      ]) {
        const client = flaky(/^INSERT/, 1, error)
        expect(
          await mysqlLockProvider({ client, columnType: 'datetime' }).lock(
            lockConfiguration({ name: 'contended', lockAtMostFor: '1m' }),
          ),
        ).toBeUndefined()
        expect(client.calls).toHaveLength(1)
      }
    })

    it('unlock and extend retry a deadlock up to 5 times, then reject with LockProviderError', async () => {
      const client = flaky(/^UPDATE/, 5, deadlock)
      // columnType: no information_schema query to answer.
      const lock = await mysqlLockProvider({ client, columnType: 'datetime' }).lock(
        lockConfiguration({ name: 'retried', lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      const extended = await lock.extend('1m', 0)
      assert.ok(extended)
      expect(client.calls.filter((sql) => sql.startsWith('UPDATE'))).toHaveLength(6)

      const stubborn = flaky(/^UPDATE/, 6, deadlock)
      const held = await mysqlLockProvider({ client: stubborn, columnType: 'datetime' }).lock(
        lockConfiguration({ name: 'stubborn', lockAtMostFor: '1m' }),
      )
      assert.ok(held)
      const error = await held.unlock().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(
        /^mysql: could not release lock "stubborn": a deadlock or lock wait timeout .* persisted through 6 attempts .*the lock stays held until it expires/,
      )
      expect(stubborn.calls.filter((sql) => sql.startsWith('UPDATE'))).toHaveLength(6)
      // The failed unlock leaves the handle usable: the seventh statement succeeds.
      await held.unlock()
    })
  })

  // At REPEATABLE READ and SERIALIZABLE, contenders meet deadlocks and lock wait timeouts: 16 of
  // them race 25 rounds there, on both DDLs, and none may reject.
  describe('isolation levels: deadlocks and lock wait timeouts under contention', () => {
    for (const level of ['REPEATABLE READ', 'SERIALIZABLE']) {
      for (const java of [false, true]) {
        describe(`${level}, ${java ? "Java's TIMESTAMP(3) table" : 'mysqlSchema table'}`, () => {
          let table = ''
          let client: mysql.Pool = db
          beforeAll(async () => {
            table = java ? await newJavaTable() : await newTable()
            client = await connectWith(`SET SESSION TRANSACTION ISOLATION LEVEL ${level}`)
            expect((await client.query<mysql.RowDataPacket[]>('SELECT @@tx_isolation AS level'))[0][0]?.level).toBe(
              level.replace(' ', '-'),
            )
          })
          afterAll(() => dispose(client))
          registerSuite(
            lockProviderSuite({
              provider: () => mysqlLockProvider({ client, tableName: table }),
              isLocked: (name) => isLocked(table, name),
              extensible: true,
              contention: { rounds: 25 },
            }).filter((c) => c.group === 'contention'),
          )
        })
      }
    }
  })

  describe('sessions in different time zones', () => {
    // Java ShedLock's own check, from a UTC session: the only configuration in which Java itself is right.
    let utc: mysql.Pool
    let shifted: mysql.Pool
    beforeAll(async () => {
      utc = await zonedPool('+00:00', { connectionLimit: 4 })
      shifted = await zonedPool('+05:00', { connectionLimit: 4 })
      expect((await shifted.query<mysql.RowDataPacket[]>('SELECT @@session.time_zone AS zone'))[0][0]?.zone).toBe(
        '+05:00',
      )
    })
    const javaSeesHeld = async (table: string, name: string): Promise<boolean> => isLocked(table, name, utc)

    for (const java of [true, false]) {
      for (const useDbTime of [true, false]) {
        const ddl = java ? "Java's TIMESTAMP(3) table" : 'mysqlSchema DATETIME(3) table'
        const time = useDbTime ? 'database time' : 'app time'
        it(`${ddl}, ${time}: a lock held from one zone is refused to the other, both ways, and released for both`, async () => {
          const table = java ? await newJavaTable() : await newTable()
          const at = (client: mysql.Pool): LockProvider => mysqlLockProvider({ client, tableName: table, useDbTime })
          for (const [holder, other, label] of [
            [shifted, utc, '+05:00 holds, +00:00 asks'],
            [utc, shifted, '+00:00 holds, +05:00 asks'],
          ] as const) {
            const name = `zones-${label.slice(0, 6)}`
            const lock = await at(holder).lock(lockConfiguration({ name, lockAtMostFor: '10m' }))
            assert.ok(lock, `${label}: the holder did not get a free lock`)
            expect(
              await at(other).lock(lockConfiguration({ name, lockAtMostFor: '10m' })),
              `${label}: the other zone took a held lock`,
            ).toBeUndefined()
            expect(await javaSeesHeld(table, name), `${label}: Java's check reads the held lock as free`).toBe(true)
            // Within lockAtMostFor: lock_until is about 10 minutes ahead, on the true clock.
            const [rows] = await utc.query<mysql.RowDataPacket[]>(
              `SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(3), lock_until) AS left_s FROM ${table} WHERE name = ?`,
              [name],
            )
            expect(Number(rows[0]?.left_s), `${label}: lock_until is off by the zone offset`).toBeGreaterThan(590)
            expect(Number(rows[0]?.left_s)).toBeLessThanOrEqual(600)
            const extended = await (lock as ExtensibleLock).extend('20m', 0)
            assert.ok(extended, `${label}: the holder could not extend its lock`)
            expect(
              await at(other).lock(lockConfiguration({ name, lockAtMostFor: '10m' })),
              `${label}: the other zone took an extended lock`,
            ).toBeUndefined()
            await extended.unlock()
            expect(await javaSeesHeld(table, name), `${label}: Java's check reads a released lock as held`).toBe(false)
            const next = await at(other).lock(lockConfiguration({ name, lockAtMostFor: '10m' }))
            assert.ok(next, `${label}: the other zone could not take a released lock`)
            await next.unlock()
          }
        })

        it(`${ddl}, ${time}: lockAtLeastFor set from one zone holds the lock for the other`, async () => {
          const table = java ? await newJavaTable() : await newTable()
          const name = 'zones-at-least'
          const lock = await mysqlLockProvider({ client: shifted, tableName: table, useDbTime }).lock(
            lockConfiguration({ name, lockAtMostFor: '10m', lockAtLeastFor: '5m' }),
          )
          assert.ok(lock)
          await lock.unlock()
          expect(
            await mysqlLockProvider({ client: utc, tableName: table, useDbTime }).lock(
              lockConfiguration({ name, lockAtMostFor: '10m' }),
            ),
          ).toBeUndefined()
          expect(await javaSeesHeld(table, name)).toBe(true)
        })
      }
    }

    it('a lock Java ShedLock wrote from a UTC session into its TIMESTAMP(3) table is respected from +05:00, and an expired one taken over', async () => {
      const table = await newJavaTable()
      await utc.query(
        `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ('java-held', TIMESTAMPADD(MINUTE, 10, UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), 'java-host'), ` +
          `('java-expired', TIMESTAMPADD(MINUTE, -10, UTC_TIMESTAMP(3)), TIMESTAMPADD(MINUTE, -20, UTC_TIMESTAMP(3)), 'java-host')`,
      )
      for (const useDbTime of [true, false]) {
        const provider = mysqlLockProvider({ client: shifted, tableName: table, useDbTime })
        expect(await provider.lock(lockConfiguration({ name: 'java-held', lockAtMostFor: '1m' }))).toBeUndefined()
      }
      const lock = await mysqlLockProvider({ client: shifted, tableName: table }).lock(
        lockConfiguration({ name: 'java-expired', lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      expect(await javaSeesHeld(table, 'java-expired')).toBe(true)
      await lock.unlock()
    })

    it('columnType skips the read of the table; a wrong columnType is refused', async () => {
      const table = await newJavaTable()
      let queries = 0
      const counting: MysqlClient = {
        query: (sql, values) => {
          queries++
          return shifted.query(sql, values) as unknown as ReturnType<MysqlClient['query']>
        },
      }
      const lock = await mysqlLockProvider({ client: counting, tableName: table, columnType: 'timestamp' }).lock(
        lockConfiguration({ name: 'given', lockAtMostFor: '10m' }),
      )
      assert.ok(lock)
      expect(queries).toBe(1)
      expect(
        await mysqlLockProvider({ client: utc, tableName: table }).lock(
          lockConfiguration({ name: 'given', lockAtMostFor: '10m' }),
        ),
      ).toBeUndefined()
      await lock.unlock()
      expect(queries).toBe(2)
      expect(() => mysqlLockProvider({ client: db, columnType: 'TIMESTAMP' as never })).toThrow(
        /columnType must be 'datetime' or 'timestamp'/,
      )
      expect(() => mysqlLockProvider({ client: db, maxNameLength: 100 })).toThrow(
        /maxNameLength applies only with columnType/,
      )
      expect(() => mysqlLockProvider({ client: db, columnType: 'datetime', maxNameLength: 0 })).toThrow(
        /maxNameLength must be a positive whole number/,
      )
    })

    it('a TIMESTAMP(3) table refuses a lockAtMostUntil after 2038-01-19T03:14:07.999Z with LockConfigurationError before the acquire or extend statement; DATETIME(3) takes it', async () => {
      const javaTable = await newJavaTable()
      const statements: string[] = []
      const counting: MysqlClient = {
        query: (sql, values) => {
          statements.push(sql)
          return utc.query(sql, values) as unknown as ReturnType<MysqlClient['query']>
        },
      }
      const tooFar = Date.UTC(2038, 0, 19, 3, 14, 8) - Date.now()
      for (const useDbTime of [true, false]) {
        const provider = mysqlLockProvider({ client: counting, tableName: javaTable, useDbTime })
        statements.length = 0
        const error = await provider
          .lock(lockConfiguration({ name: `far-${useDbTime}`, lockAtMostFor: tooFar }))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockConfigurationError)
        expect((error as Error).message).toMatch(
          /^Lock "far-(true|false)": lockAtMostUntil 2038-01-19T03:14:08\.\d{3}Z is later than mysql can hold \(a TIMESTAMP column ends at 2038-01-19T03:14:07\.999Z/,
        )
        // Only the read of the column types went out.
        expect(statements).toEqual([expect.stringMatching(/information_schema/)])
        const lock = await provider.lock(lockConfiguration({ name: `far-${useDbTime}`, lockAtMostFor: '1m' }))
        assert.ok(lock)
        const inserts = statements.length
        await expect((lock as ExtensibleLock).extend(tooFar, 0)).rejects.toThrow(LockConfigurationError)
        expect(statements).toHaveLength(inserts)
        // The refused extension left the handle usable.
        await lock.unlock()
      }
      const given = mysqlLockProvider({ client: counting, tableName: javaTable, columnType: 'timestamp' })
      statements.length = 0
      await expect(given.lock(lockConfiguration({ name: 'far-given', lockAtMostFor: tooFar }))).rejects.toThrow(
        LockConfigurationError,
      )
      expect(statements).toEqual([])
      const datetimeTable = await newTable()
      const lock = await mysqlLockProvider({ client: utc, tableName: datetimeTable }).lock(
        lockConfiguration({ name: 'far', lockAtMostFor: tooFar }),
      )
      assert.ok(lock, 'a DATETIME(3) table refused a deadline after 2038')
      await lock.unlock()
    })
  })

  describe('name length', () => {
    it('reads the name column once, in one query, then sends one statement per acquire attempt', async () => {
      const table = await newTable()
      const statements: string[] = []
      const counting: MysqlClient = {
        query: (sql, values) => {
          statements.push(sql)
          return db.query(sql, values) as unknown as ReturnType<MysqlClient['query']>
        },
      }
      const provider = mysqlLockProvider({ client: counting, tableName: table })
      const results = await Promise.all(
        Array.from({ length: 8 }, () => provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))),
      )
      expect(statements.filter((sql) => sql.includes('information_schema'))).toHaveLength(1)
      expect(statements).toHaveLength(9)
      await results.find((lock) => lock)!.unlock()
      const before = statements.length
      await (await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' })))!.unlock()
      expect(statements.slice(before)).toEqual([
        expect.stringMatching(/^(SET STATEMENT innodb_lock_wait_timeout = 1 FOR )?INSERT/),
        expect.stringMatching(/^UPDATE/),
      ])
    })

    it('without strict mode, a name one character too long is refused, not truncated into the lock of its first 64 characters', async () => {
      const table = await newTable()
      const lax = await connectWith("SET SESSION sql_mode = ''", { connectionLimit: 2 })
      onTestFinished(() => dispose(lax))
      const provider = mysqlLockProvider({ client: lax, tableName: table })
      const prefix = `lax-${'p'.repeat(60)}`
      const held = await provider.lock(lockConfiguration({ name: prefix, lockAtMostFor: '1m' }))
      assert.ok(held)
      const error = await provider
        .lock(lockConfiguration({ name: `${prefix}-other`, lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain(
        `is 70 characters, and mysql (column name of ${table}, varchar(64)) holds at most 64`,
      )
      const [rows] = await db.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${table}`)
      expect(Number(rows[0]?.n)).toBe(1)
      await held.unlock()
    })

    it("reads the width of a schema-qualified table's own name column, in characters", async () => {
      const table = `${database}.${uniqueTable('narrow')}`
      tables.push(table)
      await db.query(
        `CREATE TABLE ${table} (lock_name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, lock_until DATETIME(3) NOT NULL, locked_at DATETIME(3) NOT NULL, locked_by VARCHAR(255) NOT NULL)`,
      )
      const provider = mysqlLockProvider({ client: db, tableName: table, columnNames: { name: 'lock_name' } })
      const fits = [...'é日😀'.repeat(7)].slice(0, 20).join('')
      await (await provider.lock(lockConfiguration({ name: fits, lockAtMostFor: '1m' })))!.unlock()
      await expect(provider.lock(lockConfiguration({ name: `${fits}x`, lockAtMostFor: '1m' }))).rejects.toThrow(
        /is 21 characters, and mysql \(column lock_name of \S+, varchar\(20\)\) holds at most 20/,
      )
    })

    it('a missing table is not remembered: once it is created, the next acquire reads its types', async () => {
      const table = uniqueTable('shedlock_my_late')
      tables.push(table)
      const provider = mysqlLockProvider({ client: db, tableName: table })
      await expect(provider.lock(lockConfiguration({ name: 'early', lockAtMostFor: '1m' }))).rejects.toThrow(
        /does not exist/,
      )
      await db.query(javaSchema(table))
      const lock = await provider.lock(lockConfiguration({ name: 'late', lockAtMostFor: '1m' }))
      assert.ok(lock)
      await lock.unlock()
      await expect(provider.lock(lockConfiguration({ name: 'x'.repeat(65), lockAtMostFor: '1m' }))).rejects.toThrow(
        LockConfigurationError,
      )
      await expect(
        provider.lock(lockConfiguration({ name: 'far', lockAtMostFor: Date.UTC(2039, 0, 1) - Date.now() })),
      ).rejects.toThrow(/TIMESTAMP column ends/)
    })
  })

  describe('mysql2 callback API', () => {
    it('a callback pool or connection from "mysql2" is refused when the provider is created, before any statement, with the fix', async () => {
      const table = await newTable()
      const callbackPool = mysqlCallback.createPool({ uri: url, connectionLimit: 2 })
      const callbackConnection = mysqlCallback.createConnection({ uri: url })
      try {
        for (const client of [callbackPool, callbackConnection]) {
          expect(() => mysqlLockProvider({ client: client as never, tableName: table })).toThrow(LockConfigurationError)
          expect(() => mysqlLockProvider({ client: client as never, tableName: table })).toThrow(
            /callback-API pool or connection .*pass client\.promise\(\), or a pool from "mysql2\/promise"/,
          )
        }
        // A callback PoolCluster namespace has no promise(), but its query takes a callback.
        const cluster = mysqlCallback.createPoolCluster()
        cluster.add('main', { uri: url })
        expect(() => mysqlLockProvider({ client: cluster.of('*') as never, tableName: table })).toThrow(
          /query takes 3 parameters.*mysql2\/promise/,
        )
        cluster.end()
        expect((await db.query<mysql.RowDataPacket[]>(`SELECT 1 FROM ${table}`))[0]).toHaveLength(0)
        // Their promise wrappers are what the provider wants.
        for (const client of [callbackPool.promise(), callbackConnection.promise()]) {
          const lock = await mysqlLockProvider({ client, tableName: table }).lock(
            lockConfiguration({ name: 'promised', lockAtMostFor: '1m' }),
          )
          assert.ok(lock)
          await lock.unlock()
          expect(await isLocked(table, 'promised')).toBe(false)
        }
      } finally {
        await callbackPool.promise().end()
        await callbackConnection.promise().end()
      }
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
      // A client whose promise resolves to something that is not [result, fields]: the first
      // lock() reads the table before it writes, so nothing is written.
      const sent: string[] = []
      const callbackStyle = {
        query: async (sql: string) => {
          sent.push(sql)
          return {} as never
        },
      }
      const error = await mysqlLockProvider({ client: callbackStyle })
        .lock(lockConfiguration({ name: 'wrong-client', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('mysql2/promise')
      expect(sent).toEqual([expect.stringMatching(/^SELECT .* FROM information_schema\.COLUMNS/)])
    })

    it('a missing table rejects with LockProviderError that names the lock and gives the DDL', async () => {
      const provider = mysqlLockProvider({ client: db, tableName: 'shedlock_missing_table' })
      const error = await provider
        .lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as LockProviderError).provider).toBe('mysql')
      expect((error as LockProviderError).cause).toMatchObject({ errno: 1146 })
      expect((error as Error).message).toContain('mysql: could not acquire lock "needs-table"')
      expect((error as Error).message).toContain('CREATE TABLE IF NOT EXISTS shedlock_missing_table')
    })

    it('a table with other columns rejects with advice about columnNames', async () => {
      const table = await newTable()
      const provider = mysqlLockProvider({ client: db, tableName: table, columnNames: { lockedBy: 'owner' } })
      const error = await provider
        .lock(lockConfiguration({ name: 'columns', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(/does not have the expected columns .*pass columnNames/)
    })

    it('an unreachable server rejects with a message that says the task was not run', async () => {
      const error = await mysqlLockProvider({ client: deadPool() })
        .lock(lockConfiguration({ name: 'dead', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(
        /^mysql: could not acquire lock "dead": MySQL is unreachable .*the task was not run/,
      )
    })

    it('keeps credentials of a connection URL out of error messages', async () => {
      const client: MysqlClient = {
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
