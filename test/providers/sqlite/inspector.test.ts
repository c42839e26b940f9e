import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  loadSqliteDriver,
  type SqliteConnection,
  type SqliteDriver,
  type SqliteDriverName,
} from '../../../src/providers/sqlite/driver.ts'
import { sqliteLockInspector, sqliteLockProvider, sqliteSchema } from '../../../src/providers/sqlite/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

// Each driver this Node can load: node:sqlite (Node >= 22.13), better-sqlite3 (whose native
// binary must match this Node) and libsql (prebuilt, required everywhere). The provider's tests
// say which one each Node version requires.
const drivers: { name: SqliteDriverName; driver: SqliteDriver | undefined; why: string }[] = []
for (const name of ['better-sqlite3', 'node:sqlite', 'libsql'] as const) {
  try {
    drivers.push({ name, driver: await loadSqliteDriver(name), why: '' })
  } catch (error) {
    if (name === 'libsql') throw error
    const why = error instanceof Error ? error.message.split('\n')[0]! : String(error)
    console.warn(`SKIPPED sqliteLockInspector tests with ${name}: ${why}`)
    drivers.push({ name, driver: undefined, why })
  }
}

const workDir = mkdtempSync(join(tmpdir(), 'shedlock-sqlite-inspect-'))
const opened: SqliteConnection[] = []
afterAll(() => {
  for (const connection of opened) connection.close()
  rmSync(workDir, { recursive: true, force: true })
})
let files = 0

const NOW = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

for (const { name: driverName, driver, why } of drivers) {
  describe.skipIf(!driver)(`sqliteLockInspector with ${driverName}${driver ? '' : ` (skipped: ${why})`}`, () => {
    /** A fresh WAL database file with a lock table. */
    const openWithTable = (table = 'shedlock'): SqliteConnection => {
      const database = driver!.open(join(workDir, `db-${++files}.sqlite`))
      opened.push(database)
      database.exec('PRAGMA journal_mode = WAL')
      database.exec(sqliteSchema({ tableName: table }))
      return database
    }
    const row = (database: SqliteConnection, lockName: string): Record<string, unknown> | undefined =>
      database
        .prepare(`SELECT locked_by, lock_until, lock_until <= ${NOW} AS free FROM shedlock WHERE name = ?`)
        .all(lockName)[0] as Record<string, unknown> | undefined

    for (const useDbTime of [true, false]) {
      describe(useDbTime ? 'locks taken with database time' : 'locks taken with app time', () => {
        const database = driver ? openWithTable() : undefined
        registerInspectorSuite(
          lockInspectorSuite({
            provider: () => sqliteLockProvider({ database: database!, useDbTime }),
            inspector: driver ? sqliteLockInspector({ database: database! }) : (undefined as never),
          }),
        )
      })
    }

    it('a force-release keeps the row, with lock_until now and locked_by "released"', async () => {
      const database = openWithTable()
      const inspector = sqliteLockInspector({ database })
      const lock = await sqliteLockProvider({ database }).lock(lockConfiguration({ name: 'job', lockAtMostFor: '1m' }))
      expect(lock).toBeDefined()
      expect(await inspector.release('job')).toBe(true)
      expect(row(database, 'job')).toMatchObject({ locked_by: 'released', free: 1 })
      expect(row(database, 'job')?.lock_until).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/)
      expect((await inspector.get('job'))?.lockedBy).toBe('released')
    })

    it('reads a row written by hand in the table’s format: UTC text, with or without milliseconds', async () => {
      const database = openWithTable()
      database
        .prepare(
          `INSERT INTO shedlock VALUES ('by-hand', '2999-01-02 03:04:05.678', '2999-01-02 02:04:05.678', 'other-host'), ('old', '2020-01-01 00:00:00', '2019-12-31 23:00:00', 'other-host')`,
        )
        .run()
      const inspector = sqliteLockInspector({ database })
      expect(await inspector.get('by-hand')).toMatchObject({
        name: 'by-hand',
        lockUntil: new Date('2999-01-02T03:04:05.678Z'),
        lockedAt: new Date('2999-01-02T02:04:05.678Z'),
        lockedBy: 'other-host',
        held: true,
      })
      expect(await inspector.get('old')).toMatchObject({
        lockUntil: new Date('2020-01-01T00:00:00.000Z'),
        held: false,
        remainingMs: 0,
      })
      // The provider takes the expired one and leaves the held one: they agree on both.
      const provider = sqliteLockProvider({ database })
      expect(await provider.lock(lockConfiguration({ name: 'by-hand', lockAtMostFor: '1m' }))).toBeUndefined()
      expect(await provider.lock(lockConfiguration({ name: 'old', lockAtMostFor: '1m' }))).toBeDefined()
    })

    it('list() returns every name as stored, sorted in JavaScript string order (not SQLite’s byte order)', async () => {
      const database = openWithTable()
      const provider = sqliteLockProvider({ database })
      // UTF-8 byte order puts U+FF5E before the emoji; UTF-16 (JavaScript) order puts it after.
      const names = ['b', 'B', "it's", 'a/b:c é', '日本', '\uff5e', '😀', 'trailing ']
      for (const lockName of names)
        expect(await provider.lock(lockConfiguration({ name: lockName, lockAtMostFor: '1m' }))).toBeDefined()
      const { locks } = await sqliteLockInspector({ database }).list()
      expect(locks.map((record) => record.name)).toEqual([...names].sort())
      expect(locks.every((record) => record.held)).toBe(true)
    })

    it('a schema-qualified table of an attached database, and other column names', async () => {
      const database = driver!.open(join(workDir, `db-${++files}.sqlite`))
      opened.push(database)
      database.exec(`ATTACH DATABASE '${join(workDir, `db-${++files}.sqlite`)}' AS ops`)
      const options = {
        tableName: 'ops.locks',
        columnNames: { name: 'id', lockUntil: 'until_at', lockedAt: 'taken_at', lockedBy: 'holder' },
      }
      database.exec(sqliteSchema(options))
      expect(
        await sqliteLockProvider({ database, ...options }).lock(
          lockConfiguration({ name: 'job', lockAtMostFor: '1m' }),
        ),
      ).toBeDefined()
      const inspector = sqliteLockInspector({ database, ...options })
      expect(await inspector.get('job')).toMatchObject({ name: 'job', held: true })
      expect(await inspector.release('job')).toBe(true)
      expect(database.prepare('SELECT holder FROM ops.locks').all()).toEqual([{ holder: 'released' }])
    })

    it('a missing table rejects with LockProviderError saying how to create it', async () => {
      const database = openWithTable()
      const inspector = sqliteLockInspector({ database, tableName: 'shedlock_missing' })
      await expect(inspector.list()).rejects.toThrow(LockProviderError)
      await expect(inspector.list()).rejects.toThrow(
        /^sqlite: could not list the locks: table shedlock_missing does not exist/,
      )
      await expect(inspector.get('x')).rejects.toThrow(/Create it with:\nCREATE TABLE IF NOT EXISTS shedlock_missing/)
      await expect(inspector.release('x')).rejects.toThrow(/could not release lock "x"/)
    })

    it('a closed database rejects with LockProviderError', async () => {
      const database = openWithTable()
      database.close()
      opened.splice(opened.indexOf(database), 1)
      await expect(sqliteLockInspector({ database }).list()).rejects.toThrow(/the database is closed/)
    })
  })
}

describe('sqliteLockInspector options', () => {
  it('refuses a missing database and names that are not identifiers', () => {
    expect(() => sqliteLockInspector({} as never)).toThrow(LockConfigurationError)
    expect(() =>
      sqliteLockInspector({
        database: { prepare: () => ({ all: () => [], run: () => ({ changes: 0 }) }) },
        tableName: 'x; DROP',
      }),
    ).toThrow(/not a plain SQL identifier/)
  })
})
