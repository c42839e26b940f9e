import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { postgresLockInspector, postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'
import { postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await postgresPoolOrSkip(4)

describe.skipIf(!pool)('postgresLockInspector', () => {
  const db = pool!
  const table = uniqueTable('shedlock_pg_inspect')
  beforeAll(async () => {
    await db.query(postgresSchema({ tableName: table }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  for (const useDbTime of [true, false]) {
    describe(useDbTime ? 'locks taken with database time' : 'locks taken with app time', () => {
      registerInspectorSuite(
        lockInspectorSuite({
          provider: () => postgresLockProvider({ client: db, tableName: table, useDbTime }),
          inspector: postgresLockInspector({ client: db, tableName: table }),
        }),
      )
    })
  }

  it('a force-release writes lock_until to the millisecond, so that a node on app time finds the lock free at once', async () => {
    // With PostgreSQL's microseconds, an app-time node asking within the millisecond of the
    // release compared its millisecond clock with a later lock_until and found the lock held
    // (5 of 300 release-then-acquire rounds here, before).
    const inspector = postgresLockInspector({ client: db, tableName: table })
    const appTime = () => postgresLockProvider({ client: db, tableName: table, useDbTime: false })
    const name = `released-${Math.random().toString(36).slice(2)}`
    await appTime().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(await inspector.release(name)).toBe(true)
    const { rows } = await db.query(
      `SELECT lock_until = date_trunc('milliseconds', lock_until) AS whole FROM ${table} WHERE name = $1`,
      [name],
    )
    expect(rows).toEqual([{ whole: true }])
    const next = await appTime().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(next, 'the node on app time found the released lock held').toBeDefined()
    await next!.unlock()
  })

  it('a force-release keeps the row, with lock_until now and locked_by "released"', async () => {
    const inspector = postgresLockInspector({ client: db, tableName: table })
    const name = `row-${Math.random().toString(36).slice(2)}`
    const lock = await postgresLockProvider({ client: db, tableName: table }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    expect(lock).toBeDefined()
    expect(await inspector.release(name)).toBe(true)
    const { rows } = await db.query(
      `SELECT locked_by, lock_until <= timezone('utc', statement_timestamp()) AS free FROM ${table} WHERE name = $1`,
      [name],
    )
    expect(rows).toEqual([{ locked_by: 'released', free: true }])
    expect((await inspector.get(name))?.lockedBy).toBe('released')
  })

  it('a missing table rejects with LockProviderError saying how to create it', async () => {
    const inspector = postgresLockInspector({ client: db, tableName: uniqueTable('shedlock_missing') })
    await expect(inspector.list()).rejects.toThrow(LockProviderError)
    await expect(inspector.get('x')).rejects.toThrow(/does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS/)
  })
})
