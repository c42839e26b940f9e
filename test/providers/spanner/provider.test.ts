import assert from 'node:assert/strict'
import { hostname } from 'node:os'
import { Spanner } from '@google-cloud/spanner'
import type { Database } from '@google-cloud/spanner'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import { spannerLockProvider } from '../../../src/providers/spanner/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { GOOGLE_TEST_PROJECT, SPANNER_TEST_INSTANCE } from '../../helpers/google-emulators.ts'
import { registerSuite } from '../../helpers/register-suite.ts'
import { dropWhenIdle, emulatorSpanner, newDatabase } from './emulator.ts'

const HOUR = 3_600_000

describe.skipIf(!emulatorSpanner)('spanner (emulator)', () => {
  const spanner = emulatorSpanner!
  let database: Database
  const dead: Spanner[] = []
  beforeAll(async () => {
    database = await newDatabase(spanner)
  }, 60_000)
  afterAll(async () => {
    for (const s of dead) s.close()
    await dropWhenIdle(spanner, database)
  })

  const isHeld = async (table: string, name: string): Promise<boolean> => {
    const [rows] = await database.run({
      sql: `SELECT lock_until > CURRENT_TIMESTAMP() AS held FROM ${table} WHERE name = @name`,
      params: { name },
      json: true,
    })
    return (rows[0] as { held?: boolean } | undefined)?.held === true
  }
  const deleteRow = async (table: string, name: string): Promise<void> => {
    await database.table(table).deleteRows([name])
  }
  // A closed client: every call fails at once. (A client on a port where nothing listens also
  // fails, but its session pool keeps retrying for a minute in the background and rejects then.)
  const closedDatabase = (): Database => {
    const s = new Spanner({ projectId: GOOGLE_TEST_PROJECT })
    dead.push(s)
    const closed = s.instance(SPANNER_TEST_INSTANCE).database('closed')
    void closed.close()
    return closed
  }

  // The emulator runs one read-write transaction at a time and aborts the others, which retry:
  // racing contenders take seconds, so the suite's providers get 30 s, and the contention group
  // races 8 of them, 6 rounds (16 and 10 took 7 and 13 s). The full suite runs once
  // (database time, fencing tokens); Java's own table and the app clock run the groups they change.
  const variants = [
    { title: 'database time, fencing tokens', table: 'shedlock_fenced', useDbTime: true, fencing: true },
    {
      title: "database time, Java ShedLock's table",
      table: 'shedlock',
      useDbTime: true,
      fencing: false,
      groups: ['basic', 'extension', 'record', 'names', 'failure'],
    },
    {
      title: 'app time, fencing tokens',
      table: 'shedlock_fenced',
      useDbTime: false,
      fencing: true,
      groups: ['basic', 'extension', 'fencing'],
    },
  ]
  for (const { title, table, useDbTime, fencing, groups } of variants) {
    describe(`conformance suite: ${title}`, () => {
      const cases = lockProviderSuite({
        provider: () =>
          spannerLockProvider({ database, tableName: table, useDbTime, fencingTokens: fencing, timeout: '30s' }),
        isLocked: (name) => isHeld(table, name),
        deleteRecord: (name) => deleteRow(table, name),
        unreachableProvider: () => spannerLockProvider({ database: closedDatabase(), tableName: table, useDbTime }),
        extensible: true,
        slots: { inspector: true },
        fencing,
        maxNameLength: 64,
        // The fuzz's 16 workers queue on the emulator's one transaction at a time: 25 runs each take minutes.
        fuzzIterations: 5,
        contention: { contenders: 8, rounds: 6 },
      })
      registerSuite(groups ? cases.filter((c) => groups.includes(c.group)) : cases)
    })
  }

  describe('database time', () => {
    it("decides expiry on Spanner's CURRENT_TIMESTAMP(), not on a skewed app clock; useDbTime: false on the app clock", async () => {
      const name = `skew-${Date.now()}`
      const first = await spannerLockProvider({ database }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(first)
      // A node whose clock is an hour ahead: its configuration is fresh on its own clock.
      const ahead = { now: () => Date.now() + HOUR }
      const config = () => lockConfiguration({ name, lockAtMostFor: '1m', createdAt: new Date(ahead.now()) })
      expect(await spannerLockProvider({ database, clock: ahead }).lock(config())).toBeUndefined()
      expect(await isHeld('shedlock', name)).toBe(true)
      const taken = await spannerLockProvider({ database, clock: ahead, useDbTime: false }).lock(config())
      assert.ok(taken)
      await taken.unlock()
    })

    it('writes locked_at from CURRENT_TIMESTAMP() and lock_until lockAtMostFor later; an extension moves lock_until from the new now', async () => {
      const name = `times-${Date.now()}`
      const lock = (await spannerLockProvider({ database }).lock(
        lockConfiguration({ name, lockAtMostFor: '90s' }),
      )) as ExtensibleLock
      assert.ok(lock)
      const read = async () => {
        const [rows] = await database.run({
          sql: 'SELECT UNIX_MILLIS(lock_until) AS until, UNIX_MILLIS(locked_at) AS locked, UNIX_MILLIS(CURRENT_TIMESTAMP()) AS now FROM shedlock WHERE name = @name',
          params: { name },
          json: true,
        })
        return rows[0] as { until: number; locked: number; now: number }
      }
      const row = await read()
      expect(row.until - row.locked).toBe(90_000)
      expect(row.now - row.locked).toBeGreaterThanOrEqual(0)
      expect(row.now - row.locked).toBeLessThan(5_000)
      const extended = await lock.extend('3m', '0s')
      assert.ok(extended)
      const after = await read()
      expect(after.until - after.now).toBeGreaterThan(170_000)
      expect(after.locked).toBe(row.locked)
      await extended.unlock()
    })

    it('a release within lockAtLeastFor keeps the row until locked_at + lockAtLeastFor', async () => {
      const name = `least-${Date.now()}`
      const lock = await spannerLockProvider({ database }).lock(
        lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '20s' }),
      )
      assert.ok(lock)
      await lock.unlock()
      const [rows] = await database.run({
        sql: 'SELECT UNIX_MILLIS(lock_until) - UNIX_MILLIS(locked_at) AS held_ms FROM shedlock WHERE name = @name',
        params: { name },
        json: true,
      })
      expect((rows[0] as { held_ms: number }).held_ms).toBe(20_000)
    })
  })

  describe('errors', () => {
    it('a missing table rejects with LockProviderError naming the lock and giving the DDL', async () => {
      const error = await spannerLockProvider({ database, tableName: 'no_such_table' })
        .lock(lockConfiguration({ name: 'missing-table', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toContain('spanner: could not acquire lock "missing-table"')
      expect(error.message).toContain('CREATE TABLE IF NOT EXISTS no_such_table (')
    })

    it("fencingTokens on Java's table (no fencing_token column) rejects with the ALTER TABLE that adds it", async () => {
      const error = await spannerLockProvider({ database, fencingTokens: true })
        .lock(lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toContain('ALTER TABLE shedlock ADD COLUMN fencing_token INT64;')
    })

    it('a name over STRING(64) rejects with LockConfigurationError before anything is written', async () => {
      const provider = spannerLockProvider({ database })
      const name = 'n'.repeat(65)
      await expect(provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).rejects.toBeInstanceOf(
        LockConfigurationError,
      )
      expect(await isHeld('shedlock', name)).toBe(false)
    })

    it('rejects a missing database object and bad table names at creation', () => {
      expect(() => spannerLockProvider({} as never)).toThrow(LockConfigurationError)
      expect(() => spannerLockProvider({ database, tableName: 'x; DROP TABLE y' })).toThrow(LockConfigurationError)
    })
  })

  it('stores locked_by as <host>:<pid>:<random> per acquisition, and a stale handle cannot release a newer holder', async () => {
    const name = `owner-${Date.now()}`
    const provider = spannerLockProvider({ database })
    const first = await provider.lock(lockConfiguration({ name, lockAtMostFor: '300ms' }))
    assert.ok(first)
    const [rows] = await database.run({
      sql: 'SELECT locked_by FROM shedlock WHERE name = @name',
      params: { name },
      json: true,
    })
    expect((rows[0] as { locked_by: string }).locked_by).toMatch(
      new RegExp(`^${hostname()}:${process.pid}:[0-9a-f]{12}$`),
    )
    await new Promise((resolve) => setTimeout(resolve, 400))
    const second = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(second)
    await first.unlock()
    expect(await isHeld('shedlock', name)).toBe(true)
    await second.unlock()
  })
})
