import assert from 'node:assert/strict'
import { hostname } from 'node:os'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { type PostgresClient, postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { registerSuite } from '../../helpers/register-suite.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await postgresPoolOrSkip(12)

const NOW = `timezone('utc', statement_timestamp())`

describe.skipIf(!pool)('postgres', () => {
  const db = pool!
  const tables: string[] = []
  const newTable = async (
    options: { columnNames?: Record<string, string>; fencingTokens?: boolean } = {},
  ): Promise<string> => {
    const table = uniqueTable('shedlock_pg')
    tables.push(table)
    await db.query(postgresSchema({ tableName: table, ...options }))
    return table
  }
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  // Sessions whose transactions run at a stricter isolation level than read committed.
  const isolated: pg.Pool[] = []
  const isolatedPool = async (level: 'repeatable read' | 'serializable', max = 16): Promise<pg.Pool> => {
    const p = new pg.Pool({
      connectionString: POSTGRES_URL,
      max,
      options: `-c default_transaction_isolation=${level.replace(' ', '\\ ')}`,
    })
    isolated.push(p)
    expect((await p.query('SHOW default_transaction_isolation')).rows[0].default_transaction_isolation).toBe(level)
    return p
  }
  afterAll(async () => {
    for (const p of isolated) await p.end()
  })

  // At repeatable read and serializable, contenders meet serialization failures and deadlocks:
  // 16 of them race 25 rounds there, and none may reject.
  const variants: {
    title: string
    useDbTime: boolean
    level?: 'repeatable read' | 'serializable'
    fencing?: boolean
    groups?: string[]
  }[] = [
    { title: 'database time', useDbTime: true },
    { title: 'app time', useDbTime: false },
    { title: 'database time, serializable sessions', useDbTime: true, level: 'serializable' },
    {
      title: 'database time, repeatable read sessions',
      useDbTime: true,
      level: 'repeatable read',
      groups: ['contention'],
    },
    { title: 'database time, fencing tokens', useDbTime: true, fencing: true },
  ]
  for (const { title, useDbTime, level, fencing = false, groups } of variants) {
    describe(title, () => {
      let table = ''
      let client: pg.Pool = db
      beforeAll(async () => {
        table = await newTable({ fencingTokens: fencing })
        if (level) client = await isolatedPool(level)
      })
      const cases = lockProviderSuite({
        provider: () => postgresLockProvider({ client, tableName: table, useDbTime, fencingTokens: fencing }),
        isLocked: async (name) =>
          (await db.query(`SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > ${NOW}`, [name])).rowCount === 1,
        deleteRecord: async (name) => {
          await db.query(`DELETE FROM ${table} WHERE name = $1`, [name])
        },
        unreachableProvider: () =>
          postgresLockProvider({
            client: new pg.Pool({
              connectionString: 'postgres://postgres@127.0.0.1:1/test',
              connectionTimeoutMillis: 2000,
            }),
            tableName: table,
          }),
        extensible: true,
        slots: { inspector: true, paired: true },
        maxNameLength: 64,
        fencing,
        ...(level ? { contention: { rounds: 25 } } : {}),
      })
      registerSuite(groups ? cases.filter((c) => groups.includes(c.group)) : cases)
    })
  }

  describe('serialization failures and deadlocks (sessions at repeatable read or serializable)', () => {
    const failing = (code: string, message: string): Error => Object.assign(new Error(message), { code })
    const serialization = (): Error => failing('40001', 'could not serialize access due to concurrent update')
    const deadlock = (): Error => failing('40P01', 'deadlock detected')
    // A client that fails the first `failures` statements matching `pattern`, then reports one row changed.
    const flaky = (pattern: RegExp, failures: number, error: () => Error): PostgresClient & { calls: string[] } => {
      const calls: string[] = []
      let left = failures
      return {
        calls,
        query: async (text) => {
          calls.push(text)
          if (pattern.test(text) && left-- > 0) throw error()
          return { rowCount: 1, rows: [] }
        },
      }
    }

    it('a serialization failure or deadlock on acquire is "not acquired", and executeWithLock does not run the task', async () => {
      for (const error of [serialization, deadlock]) {
        const client = flaky(/^INSERT/, 1, error)
        const provider = postgresLockProvider({ client })
        expect(await provider.lock(lockConfiguration({ name: 'contended', lockAtMostFor: '1m' }))).toBeUndefined()
        expect(client.calls.filter((text) => text.startsWith('INSERT'))).toHaveLength(1)
      }
    })

    it('unlock and extend retry a serialization failure or deadlock up to 5 times, then reject with LockProviderError', async () => {
      for (const error of [serialization, deadlock]) {
        const client = flaky(/^UPDATE/, 5, error)
        const lock = await postgresLockProvider({ client }).lock(
          lockConfiguration({ name: 'retried', lockAtMostFor: '1m' }),
        )
        assert.ok(lock)
        const extended = await lock.extend('1m', 0)
        assert.ok(extended)
        expect(client.calls.filter((text) => text.startsWith('UPDATE'))).toHaveLength(6)

        const stubborn = flaky(/^UPDATE/, 6, error)
        const held = await postgresLockProvider({ client: stubborn }).lock(
          lockConfiguration({ name: 'stubborn', lockAtMostFor: '1m' }),
        )
        assert.ok(held)
        const failure = await held.unlock().catch((e: unknown) => e)
        expect(failure).toBeInstanceOf(LockProviderError)
        expect((failure as Error).message).toMatch(
          /^postgres: could not release lock "stubborn": a (serialization failure|deadlock) .* persisted through 6 attempts .*the lock stays held until it expires/,
        )
        expect(stubborn.calls.filter((text) => text.startsWith('UPDATE'))).toHaveLength(6)
        // The failed unlock leaves the handle usable: the seventh statement succeeds.
        await held.unlock()
      }
    })
  })

  describe('name length', () => {
    // Counts the statements the provider sends through the shared pool.
    const counting = (): PostgresClient & { texts: string[] } => {
      const texts: string[] = []
      return {
        texts,
        query: (text, values) => {
          texts.push(text)
          return db.query(text, values)
        },
      }
    }

    it('reads the name column length once, in one query, and then sends one statement per acquire attempt', async () => {
      const table = await newTable()
      const client = counting()
      const provider = postgresLockProvider({ client, tableName: table })
      const results = await Promise.all(
        Array.from({ length: 8 }, () => provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))),
      )
      // Eight concurrent first acquires share one reading.
      expect(client.texts.filter((text) => text.includes('pg_attribute'))).toHaveLength(1)
      expect(client.texts).toHaveLength(9)
      await results.find((lock) => lock)!.unlock()
      const before = client.texts.length
      await (await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' })))!.unlock()
      expect(client.texts.length - before).toBe(2)
      expect(client.texts.slice(before)).toEqual([expect.stringMatching(/^INSERT/), expect.stringMatching(/^UPDATE/)])
      await expect(provider.lock(lockConfiguration({ name: 'x'.repeat(65), lockAtMostFor: '1m' }))).rejects.toThrow(
        LockConfigurationError,
      )
      expect(client.texts.length - before).toBe(2)
    })

    it('counts characters, not bytes or UTF-16 units: 64 non-ASCII letters fit VARCHAR(64), 65 do not', async () => {
      const table = await newTable()
      const provider = postgresLockProvider({ client: db, tableName: table })
      const fits = [...'é日😀'.repeat(22)].slice(0, 64).join('')
      expect([...fits]).toHaveLength(64)
      const lock = await provider.lock(lockConfiguration({ name: fits, lockAtMostFor: '1m' }))
      assert.ok(lock)
      await lock.unlock()
      const error = await provider
        .lock(lockConfiguration({ name: `${fits}é`, lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain(
        `is 65 characters, and postgres (column name of ${table}, character varying(64)) holds at most 64`,
      )
    })

    it('reads the limit of a schema-qualified table with its own column names and width; a text column has none', async () => {
      await db.query('CREATE SCHEMA IF NOT EXISTS shedlock_ops')
      const table = `shedlock_ops.${uniqueTable('narrow')}`
      tables.push(table)
      await db.query(
        `CREATE TABLE ${table} (lock_name VARCHAR(20) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL)`,
      )
      // A table of the same bare name in the default schema, with another width: the schema decides.
      const decoy = table.slice('shedlock_ops.'.length)
      tables.push(decoy)
      await db.query(
        `CREATE TABLE ${decoy} (lock_name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL)`,
      )
      const provider = postgresLockProvider({ client: db, tableName: table, columnNames: { name: 'lock_name' } })
      await (await provider.lock(lockConfiguration({ name: 'n'.repeat(20), lockAtMostFor: '1m' })))!.unlock()
      await expect(provider.lock(lockConfiguration({ name: 'n'.repeat(21), lockAtMostFor: '1m' }))).rejects.toThrow(
        /is 21 characters, and postgres \(column lock_name of shedlock_ops\.\S+, character varying\(20\)\) holds at most 20/,
      )

      const wide = uniqueTable('shedlock_pg_text')
      tables.push(wide)
      await db.query(
        `CREATE TABLE ${wide} (name TEXT PRIMARY KEY, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, locked_by TEXT NOT NULL)`,
      )
      const long = `long-${'x'.repeat(1_000)}`
      const lock = await postgresLockProvider({ client: db, tableName: wide }).lock(
        lockConfiguration({ name: long, lockAtMostFor: '1m' }),
      )
      assert.ok(lock, 'a text column refused a long name')
      await lock.unlock()
    })

    it('a missing table is not remembered: once it is created, the next acquire reads its limit', async () => {
      const table = uniqueTable('shedlock_pg_late')
      tables.push(table)
      const provider = postgresLockProvider({ client: db, tableName: table })
      await expect(provider.lock(lockConfiguration({ name: 'early', lockAtMostFor: '1m' }))).rejects.toThrow(
        /does not exist/,
      )
      await db.query(postgresSchema({ tableName: table }))
      await (await provider.lock(lockConfiguration({ name: 'late', lockAtMostFor: '1m' })))!.unlock()
      await expect(provider.lock(lockConfiguration({ name: 'x'.repeat(65), lockAtMostFor: '1m' }))).rejects.toThrow(
        LockConfigurationError,
      )
    })
  })

  describe('storage format', () => {
    it('writes UTC timestamps and a locked_by that starts with the host name, whatever the process time zone', async () => {
      const table = await newTable()
      const previous = process.env.TZ
      process.env.TZ = 'America/Los_Angeles'
      try {
        for (const useDbTime of [true, false]) {
          const name = `format-${useDbTime}`
          const lock = await postgresLockProvider({ client: db, tableName: table, useDbTime }).lock(
            lockConfiguration({ name, lockAtMostFor: '1h' }),
          )
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

    it('sends no make_interval, which CockroachDB lacks, and keeps durations to the millisecond', async () => {
      const table = await newTable()
      const sent: string[] = []
      const client: PostgresClient = {
        query: (text, values) => {
          sent.push(text)
          return db.query(text, values)
        },
      }
      const provider = postgresLockProvider({ client, tableName: table })
      const lock = await provider.lock(
        lockConfiguration({ name: 'durations', lockAtMostFor: 90_500, lockAtLeastFor: 30_250 }),
      )
      assert.ok(lock)
      const span = async (): Promise<number> => {
        const { rows } = await db.query(
          `SELECT extract(epoch FROM lock_until - locked_at) * 1000 AS ms FROM ${table} WHERE name = 'durations'`,
        )
        return Number((rows[0] as { ms: string }).ms)
      }
      expect(Math.abs((await span()) - 90_500)).toBeLessThan(50)
      await lock.unlock()
      expect(Math.abs((await span()) - 30_250)).toBeLessThan(50)
      expect(sent.length).toBeGreaterThanOrEqual(2)
      for (const text of sent) expect(text).not.toMatch(/make_interval/i)
    })

    it('respects a lock written by Java ShedLock and takes over an expired one', async () => {
      const table = await newTable()
      await db.query(
        `INSERT INTO ${table} VALUES ('java-held', ${NOW} + interval '1 hour', ${NOW}, 'java-host'), ('java-expired', ${NOW} - interval '1 day', ${NOW} - interval '1 day', 'java-host')`,
      )
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
      const honest = await postgresLockProvider({ client: db, tableName: table }).lock(
        lockConfiguration({ name, lockAtMostFor: '10m' }),
      )
      assert.ok(honest)
      const ahead = { now: () => Date.now() + 3_600_000 }
      expect(
        await postgresLockProvider({ client: db, tableName: table, clock: ahead }).lock(
          lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }),
        ),
      ).toBeUndefined()
      // With app time the skewed node believes the lock expired: the risk the README states.
      expect(
        await postgresLockProvider({ client: db, tableName: table, clock: ahead, useDbTime: false }).lock(
          lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }),
        ),
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
      expect(
        (await db.query(`SELECT owner FROM ${table} WHERE lock_name = 'custom' AND until_ts > ${NOW}`)).rowCount,
      ).toBe(1)
      expect(await provider.lock(lockConfiguration({ name: 'custom', lockAtMostFor: '1m' }))).toBeUndefined()
      await lock.unlock()
    })

    it('commits lock writes on their own, outside a transaction the caller has open', async () => {
      const table = await newTable()
      const client = await db.connect()
      try {
        await client.query('BEGIN')
        await client.query(`INSERT INTO ${table} VALUES ('other-row', ${NOW}, ${NOW}, 'tx')`)
        const lock = await postgresLockProvider({ client: db, tableName: table }).lock(
          lockConfiguration({ name: 'outside-tx', lockAtMostFor: '1m' }),
        )
        assert.ok(lock)
        await client.query('ROLLBACK')
      } finally {
        client.release()
      }
      expect(
        (await db.query(`SELECT 1 FROM ${table} WHERE name = 'outside-tx' AND lock_until > ${NOW}`)).rowCount,
      ).toBe(1)
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
      const error = await provider
        .lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
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
