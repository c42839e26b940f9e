import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, LockProviderError } from '../../../src/index.ts'
import { postgresLockProvider, postgresRunLedger, postgresRunsSchema, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../support/backends.ts'
import { registerRunLedgerSuite } from '../../support/register-suite.ts'
import { postgresPoolOrSkip } from '../../support/sql-pools.ts'

const pool = await postgresPoolOrSkip(4)

describe.skipIf(!pool)('postgresRunLedger', () => {
  const db = pool!
  const locks = uniqueTable('shedlock_pg_ledger_locks')
  const runs = uniqueTable('shedlock_pg_runs')
  beforeAll(async () => {
    await db.query(postgresSchema({ tableName: locks }))
    await db.query(postgresRunsSchema({ tableName: runs }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${locks}`)
    await db.query(`DROP TABLE IF EXISTS ${runs}`)
    await db.end()
  })

  registerRunLedgerSuite(
    runLedgerSuite({
      ledger: postgresRunLedger({ client: db, tableName: runs, keep: 5 }),
      keep: 5,
      provider: () => postgresLockProvider({ client: db, tableName: locks }),
    }),
  )

  it('postgresRunsSchema() is idempotent and creates the (name, started_at) index', async () => {
    await db.query(postgresRunsSchema({ tableName: runs }))
    const { rows } = await db.query('SELECT indexname FROM pg_indexes WHERE tablename = $1', [runs])
    expect(rows.map((r) => r.indexname)).toContain(`${runs}_name_started`)
  })

  it('a task error is stored with its URL password and its password=... redacted, no piece of either left', async () => {
    const name = `ledger-redact-${Date.now()}`
    const executor = createLockingTaskExecutor(postgresLockProvider({ client: db, tableName: locks }), {
      runLedger: postgresRunLedger({ client: db, tableName: runs }),
    })
    const failure = new Error("copy to postgres://etl:Zq8@Wx3:Kv5@warehouse:5432/dw failed: host=warehouse password='Jm2@Qp4' sslmode=require")
    await expect(executor.executeWithLock(() => Promise.reject(failure), { name, lockAtMostFor: '1m' })).rejects.toBe(failure)
    const { rows } = await db.query(`SELECT error_type, error_message FROM ${runs} WHERE name = $1`, [name])
    expect(rows).toEqual([
      { error_type: 'Error', error_message: "copy to postgres://etl:***@warehouse:5432/dw failed: host=warehouse password='***' sslmode=require" },
    ])
    for (const piece of ['Zq8', 'Wx3', 'Kv5', 'Jm2', 'Qp4']) expect(rows[0].error_message).not.toContain(piece)
  })

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = postgresRunLedger({ client: db, tableName: uniqueTable('shedlock_runs_missing') })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(/does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS \w+ \(\n {2}id VARCHAR\(36\)/)
  })
})
