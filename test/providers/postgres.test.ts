import assert from 'node:assert/strict'
import { hostname } from 'node:os'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../src/providers/postgres.ts'
import { lockProviderSuite } from '../../src/testing/index.ts'
import { uniqueTable } from '../support/backends.ts'
import { registerSuite } from '../support/register-suite.ts'
import { postgresPoolOrSkip } from '../support/sql-pools.ts'

const pool = await postgresPoolOrSkip(12)

const NOW = `timezone('utc', statement_timestamp())`

describe.skipIf(!pool)('postgres', () => {
  const db = pool!
  const tables: string[] = []
  const newTable = async (options: { columnNames?: Record<string, string> } = {}): Promise<string> => {
    const table = uniqueTable('shedlock_pg')
    tables.push(table)
    await db.query(postgresSchema({ tableName: table, ...options }))
    return table
  }
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  for (const useDbTime of [true, false]) {
    describe(useDbTime ? 'database time' : 'app time', () => {
      let table = ''
      beforeAll(async () => {
        table = await newTable()
      })
      registerSuite(
        lockProviderSuite({
          provider: () => postgresLockProvider({ client: db, tableName: table, useDbTime }),
          isLocked: async (name) => (await db.query(`SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > ${NOW}`, [name])).rowCount === 1,
          deleteRecord: async (name) => {
            await db.query(`DELETE FROM ${table} WHERE name = $1`, [name])
          },
          unreachableProvider: () =>
            postgresLockProvider({ client: new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test', connectionTimeoutMillis: 2000 }), tableName: table }),
          extensible: true,
          maxNameLength: 64,
        }),
      )
    })
  }

  describe('storage format', () => {
    it('writes UTC timestamps and a locked_by that starts with the host name, whatever the process time zone', async () => {
      const table = await newTable()
      const previous = process.env.TZ
      process.env.TZ = 'America/Los_Angeles'
      try {
        for (const useDbTime of [true, false]) {
          const name = `format-${useDbTime}`
          const lock = await postgresLockProvider({ client: db, tableName: table, useDbTime }).lock(lockConfiguration({ name, lockAtMostFor: '1h' }))
          assert.ok(lock)
          const { rows } = await db.query(
            `SELECT locked_by, extract(epoch FROM lock_until) * 1000 AS until_ms, extract(epoch FROM locked_at) * 1000 AS at_ms FROM ${table} WHERE name = $1`,
            [name],
          )
          const row = rows[0] as { locked_by: string; until_ms: string; at_ms: string }
          expect(row.locked_by.startsWith(`${hostname()}:${process.pid}:`)).toBe(true)
          expect(Math.abs(Number(row.at_ms) - Date.now())).toBeLessThan(5_000)
          expect(Number(row.until_ms) - Number(row.at_ms)).toBeGreaterThan(3_600_000 - 5_000)
          expect(Number(row.until_ms) - Number(row.at_ms)).toBeLessThan(3_600_000 + 5_000)
          await lock.unlock()
        }
      } finally {
        if (previous === undefined) delete process.env.TZ
        else process.env.TZ = previous
      }
    })

    it('respects a lock written by Java ShedLock and takes over an expired one', async () => {
      const table = await newTable()
      await db.query(`INSERT INTO ${table} VALUES ('java-held', ${NOW} + interval '1 hour', ${NOW}, 'java-host'), ('java-expired', ${NOW} - interval '1 day', ${NOW} - interval '1 day', 'java-host')`)
      const provider = postgresLockProvider({ client: db, tableName: table })
      expect(await provider.lock(lockConfiguration({ name: 'java-held', lockAtMostFor: '1m' }))).toBeUndefined()
      const lock = await provider.lock(lockConfiguration({ name: 'java-expired', lockAtMostFor: '1m' }))
      expect(lock).toBeDefined()
      await lock!.unlock()
      const { rows } = await db.query(`SELECT locked_by FROM ${table} WHERE name = 'java-held'`)
      expect(rows[0].locked_by).toBe('java-host')
    })

    it('decides expiry on the database clock: an app clock an hour ahead cannot take a held lock', async () => {
      const table = await newTable()
      const name = 'skewed'
      const honest = await postgresLockProvider({ client: db, tableName: table }).lock(lockConfiguration({ name, lockAtMostFor: '10m' }))
      assert.ok(honest)
      const ahead = { now: () => Date.now() + 3_600_000 }
      expect(await postgresLockProvider({ client: db, tableName: table, clock: ahead }).lock(lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }))).toBeUndefined()
      // With app time the skewed node believes the lock expired: the risk the README states.
      expect(
        await postgresLockProvider({ client: db, tableName: table, clock: ahead, useDbTime: false }).lock(lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) })),
      ).toBeDefined()
    })

    it('works with a schema-qualified table and custom column names', async () => {
      await db.query('CREATE SCHEMA IF NOT EXISTS shedlock_ops')
      const table = `shedlock_ops.${uniqueTable('locks')}`
      tables.push(table)
      const columnNames = { name: 'lock_name', lockUntil: 'until_ts', lockedAt: 'at_ts', lockedBy: 'owner' }
      await db.query(postgresSchema({ tableName: table, columnNames }))
      const provider = postgresLockProvider({ client: db, tableName: table, columnNames })
      const lock = await provider.lock(lockConfiguration({ name: 'custom', lockAtMostFor: '1m' }))
      assert.ok(lock)
      expect((await db.query(`SELECT owner FROM ${table} WHERE lock_name = 'custom' AND until_ts > ${NOW}`)).rowCount).toBe(1)
      expect(await provider.lock(lockConfiguration({ name: 'custom', lockAtMostFor: '1m' }))).toBeUndefined()
      await lock.unlock()
    })

    it('commits lock writes on their own, outside a transaction the caller has open', async () => {
      const table = await newTable()
      const client = await db.connect()
      try {
        await client.query('BEGIN')
        await client.query(`INSERT INTO ${table} VALUES ('other-row', ${NOW}, ${NOW}, 'tx')`)
        const lock = await postgresLockProvider({ client: db, tableName: table }).lock(lockConfiguration({ name: 'outside-tx', lockAtMostFor: '1m' }))
        assert.ok(lock)
        await client.query('ROLLBACK')
      } finally {
        client.release()
      }
      expect((await db.query(`SELECT 1 FROM ${table} WHERE name = 'outside-tx' AND lock_until > ${NOW}`)).rowCount).toBe(1)
    })
  })

  describe('bad input', () => {
    it('rejects table and column names that are not plain identifiers before any query', () => {
      const client = {
        query: () => {
          throw new Error('no query may run')
        },
      }
      for (const tableName of ['shedlock; DROP TABLE users', 'a.b.c', '"quoted"', '', 'x'.repeat(64)]) {
        expect(() => postgresLockProvider({ client, tableName })).toThrow(LockConfigurationError)
      }
      expect(() => postgresLockProvider({ client, columnNames: { lockedBy: 'by--' } })).toThrow(/columnNames.lockedBy/)
      expect(() => postgresSchema({ tableName: 'x y' })).toThrow(LockConfigurationError)
    })

    it('a missing table rejects with LockProviderError that names the lock and gives the DDL', async () => {
      const provider = postgresLockProvider({ client: db, tableName: 'shedlock_missing_table' })
      const error = await provider.lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' })).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('"needs-table"')
      expect((error as Error).message).toContain('CREATE TABLE IF NOT EXISTS shedlock_missing_table')
    })
  })
})

describe('postgres options', () => {
  it('a missing client is a LockConfigurationError saying what to pass', () => {
    expect(() => postgresLockProvider({} as never)).toThrow(LockConfigurationError)
    expect(() => postgresLockProvider({ client: {} } as never)).toThrow(/pass your pg Pool as \{ client \}/)
  })
})
