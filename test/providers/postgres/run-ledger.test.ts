import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError } from '../../../src/index.ts'
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

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = postgresRunLedger({ client: db, tableName: uniqueTable('shedlock_runs_missing') })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(/does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS \w+ \(\n {2}id VARCHAR\(36\)/)
  })
})
