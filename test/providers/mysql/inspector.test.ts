import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  type MysqlColumnType,
  type MysqlClient,
  mysqlLockInspector,
  mysqlLockProvider,
  mysqlSchema,
} from '../../../src/providers/mysql/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await mysqlPoolOrSkip(4)

// Java ShedLock's README DDL for MySQL: TIMESTAMP(3) columns, and the server's default collation.
const javaSchema = (table: string): string =>
  `CREATE TABLE ${table} (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))`

describe.skipIf(!pool)('mysqlLockInspector', () => {
  const db = pool!
  const pools: mysql.Pool[] = []
  const tables: string[] = []
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    for (const p of pools) await p.end()
    await db.end()
  })
  /** A pool whose every session runs `SET time_zone = zone` before anything else (mysql2's `timezone` option only converts Dates). */
  const zonedPool = (zone: string, options: mysql.PoolOptions = {}): mysql.Pool => {
    const p = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4, ...options })
    p.on('connection', (connection) => {
      connection.query(`SET time_zone = '${zone}'`)
    })
    pools.push(p)
    return p
  }
  const tableFor = (type: MysqlColumnType): { table: string; ddl: string } => {
    const table = uniqueTable(type === 'datetime' ? 'shedlock_my_inspect' : 'shedlock_my_inspect_java')
    tables.push(table)
    return { table, ddl: type === 'datetime' ? mysqlSchema({ tableName: table }) : javaSchema(table) }
  }
  const newTable = async (type: MysqlColumnType): Promise<string> => {
    const { table, ddl } = tableFor(type)
    await db.query(ddl)
    return table
  }
  const utc = zonedPool('+00:00')
  const plus5 = zonedPool('+05:00')
  const minus7 = zonedPool('-07:00')

  // Each table type, read from sessions in UTC and at +05:00, with locks taken by sessions at
  // -07:00 and in UTC, with database time and app time: the inspector must agree with the
  // provider, and with this host's clock, whatever the zones.
  for (const type of ['datetime', 'timestamp'] as const) {
    describe(
      type === 'datetime' ? 'DATETIME(3) table (mysqlSchema)' : 'TIMESTAMP(3) table (Java ShedLock’s DDL)',
      () => {
        const { table: tableName, ddl } = tableFor(type)
        beforeAll(async () => {
          await db.query(ddl)
        })
        for (const [reader, readerZone] of [
          [utc, '+00:00'],
          [plus5, '+05:00'],
        ] as const) {
          for (const [writer, writerZone] of [
            [minus7, '-07:00'],
            [utc, '+00:00'],
          ] as const) {
            for (const useDbTime of [true, false]) {
              describe(`read at ${readerZone}, locks taken at ${writerZone} with ${useDbTime ? 'database' : 'app'} time`, () => {
                registerInspectorSuite(
                  lockInspectorSuite({
                    provider: () => mysqlLockProvider({ client: writer, tableName, useDbTime }),
                    inspector: mysqlLockInspector({ client: reader, tableName }),
                  }),
                )
              })
            }
          }
        }
      },
    )
  }

  for (const type of ['datetime', 'timestamp'] as const) {
    it(`${type}: a force-release keeps the row, with lock_until now and locked_by "released"`, async () => {
      const table = await newTable(type)
      const inspector = mysqlLockInspector({ client: plus5, tableName: table })
      const lock = await mysqlLockProvider({ client: plus5, tableName: table }).lock(
        lockConfiguration({ name: 'job', lockAtMostFor: '1m', lockAtLeastFor: '30s' }),
      )
      expect(lock).toBeDefined()
      const before = Date.now()
      expect(await inspector.release('job')).toBe(true)
      // Read in a UTC session, where both column types show UTC.
      const [rows] = await utc.query<mysql.RowDataPacket[]>(
        `SELECT locked_by, lock_until <= UTC_TIMESTAMP(3) AS free, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', lock_until) DIV 1000 AS until_ms FROM ${table} WHERE name = 'job'`,
      )
      expect(rows).toEqual([{ locked_by: 'released', free: 1, until_ms: expect.any(Number) }])
      expect(Math.abs(Number(rows[0]!.until_ms) - before)).toBeLessThan(2_000)
      // The holder's release within its lockAtLeastFor finds another owner.
      await lock!.unlock()
      expect((await inspector.get('job'))?.held).toBe(false)
      expect((await inspector.get('job'))?.lockedBy).toBe('released')
    })
  }

  it('TIMESTAMP(3): a row Java ShedLock wrote from a UTC session reads as the same instants from a +05:00 session', async () => {
    const table = await newTable('timestamp')
    await utc.query(
      `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ('java-held', '2037-01-02 03:04:05.678', '2037-01-02 02:04:05.678', 'java-host'), ` +
        `('java-done', '2020-06-01 12:00:00.000', '2020-06-01 11:00:00.000', 'java-host')`,
    )
    for (const client of [plus5, utc, minus7]) {
      const inspector = mysqlLockInspector({ client, tableName: table })
      expect(await inspector.get('java-held')).toMatchObject({
        name: 'java-held',
        lockUntil: new Date('2037-01-02T03:04:05.678Z'),
        lockedAt: new Date('2037-01-02T02:04:05.678Z'),
        lockedBy: 'java-host',
        held: true,
      })
      expect(await inspector.get('java-done')).toMatchObject({
        lockUntil: new Date('2020-06-01T12:00:00.000Z'),
        held: false,
        remainingMs: 0,
      })
      const { now } = await inspector.list()
      expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(2_000)
    }
    // The provider at +05:00 agrees: held is held, expired is free.
    const provider = mysqlLockProvider({ client: plus5, tableName: table })
    expect(await provider.lock(lockConfiguration({ name: 'java-held', lockAtMostFor: '1m' }))).toBeUndefined()
    expect(await provider.lock(lockConfiguration({ name: 'java-done', lockAtMostFor: '1m' }))).toBeDefined()
    // A record read at +05:00 releases from there: the check of its state does not depend on the zone.
    const inspector = mysqlLockInspector({ client: plus5, tableName: table })
    const record = (await inspector.get('java-held'))!
    expect(await inspector.release(record)).toBe(true)
    const [rows] = await utc.query<mysql.RowDataPacket[]>(`SELECT locked_by FROM ${table} WHERE name = 'java-held'`)
    expect(rows).toEqual([{ locked_by: 'released' }])
  })

  it('DATETIME(3): UTC wall-clock values read as UTC from a +05:00 session', async () => {
    const table = await newTable('datetime')
    await utc.query(
      `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ('by-hand', '2999-01-02 03:04:05.678', '2999-01-02 02:04:05.678', 'other-host')`,
    )
    const inspector = mysqlLockInspector({ client: plus5, tableName: table })
    expect(await inspector.get('by-hand')).toMatchObject({
      lockUntil: new Date('2999-01-02T03:04:05.678Z'),
      lockedAt: new Date('2999-01-02T02:04:05.678Z'),
      held: true,
    })
    expect(await inspector.release((await inspector.get('by-hand'))!)).toBe(true)
  })

  it('list() returns every name as stored, sorted in JavaScript string order (not the collation’s)', async () => {
    const table = await newTable('datetime')
    const provider = mysqlLockProvider({ client: db, tableName: table })
    // utf8mb4_bin sorts by code point, which puts U+FF5E before the emoji; JavaScript (UTF-16) after.
    const names = ['b', 'B', "it's", 'a/b:c é', '日本', '\uff5e', '😀', ' lead']
    for (const name of names)
      expect(await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeDefined()
    const { locks } = await mysqlLockInspector({ client: plus5, tableName: table }).list()
    expect(locks.map((record) => record.name)).toEqual([...names].sort())
    expect(locks.every((record) => record.held && record.lockedBy !== undefined)).toBe(true)
  })

  it('reads the column type once, and not at all when columnType is given; a pool with rowsAsArray works', async () => {
    const table = await newTable('timestamp')
    const sent: string[] = []
    const counting = (client: mysql.Pool): MysqlClient => ({
      query: (sql: string, values: unknown[]) => {
        sent.push(sql)
        return client.query(sql, values) as Promise<[unknown, unknown]>
      },
    })
    const arrays = zonedPool('+05:00', { rowsAsArray: true })
    await mysqlLockProvider({ client: arrays, tableName: table }).lock(
      lockConfiguration({ name: 'job', lockAtMostFor: '1m' }),
    )
    const detecting = mysqlLockInspector({ client: counting(arrays), tableName: table })
    await Promise.all([detecting.list(), detecting.get('job')])
    await detecting.get('job')
    expect(sent.filter((sql) => sql.includes('information_schema'))).toHaveLength(1)
    expect((await detecting.get('job'))?.lockUntil?.getTime()).toBeGreaterThan(Date.now() + 50_000)
    sent.length = 0
    const given = mysqlLockInspector({ client: counting(arrays), tableName: table, columnType: 'timestamp' })
    expect((await given.get('job'))?.held).toBe(true)
    expect(sent.filter((sql) => sql.includes('information_schema'))).toEqual([])
  })

  it('a missing table rejects with LockProviderError saying how to create it, and is read again once created', async () => {
    const table = uniqueTable('shedlock_my_inspect_late')
    tables.push(table)
    const inspector = mysqlLockInspector({ client: plus5, tableName: table })
    await expect(inspector.list()).rejects.toThrow(LockProviderError)
    await expect(inspector.get('x')).rejects.toThrow(/does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS/)
    // Created afterwards, with Java's TIMESTAMP columns: the type is read then, not guessed before.
    await db.query(javaSchema(table))
    await utc.query(
      `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ('late', '2037-01-02 03:04:05.678', '2037-01-02 02:04:05.678', 'java-host')`,
    )
    expect((await inspector.get('late'))?.lockUntil).toEqual(new Date('2037-01-02T03:04:05.678Z'))
  })

  it('refuses a missing or callback-API client, bad names and a bad columnType', async () => {
    expect(() => mysqlLockInspector({} as never)).toThrow(LockConfigurationError)
    expect(() =>
      mysqlLockInspector({
        client: { query: (_sql: string, _values: unknown[], _callback: unknown) => undefined } as never,
      }),
    ).toThrow(/callback/)
    expect(() => mysqlLockInspector({ client: db, tableName: 'x; DROP' })).toThrow(/not a plain SQL identifier/)
    expect(() => mysqlLockInspector({ client: db, columnType: 'date' as never })).toThrow(
      /columnType must be 'datetime' or 'timestamp'/,
    )
  })
})
