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
