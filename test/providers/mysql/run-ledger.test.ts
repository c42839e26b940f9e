import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError } from '../../../src/index.ts'
import { mysqlLockProvider, mysqlRunLedger, mysqlRunsSchema, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await mysqlPoolOrSkip(4)

describe.skipIf(!pool)('mysqlRunLedger', () => {
  const db = pool!
  const locks = uniqueTable('shedlock_my_ledger_locks')
  const runs = uniqueTable('shedlock_my_runs')
  // A session in another time zone must read the same instants: times are stored as UTC.
  const zoned = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 })
  zoned.on('connection', (connection) => void connection.query("SET time_zone = '+05:00'"))
  beforeAll(async () => {
    await db.query(mysqlSchema({ tableName: locks }))
    await db.query(mysqlRunsSchema({ tableName: runs }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${locks}`)
    await db.query(`DROP TABLE IF EXISTS ${runs}`)
    await db.end()
    await zoned.end()
  })

  registerRunLedgerSuite(
    runLedgerSuite({
      ledger: mysqlRunLedger({ client: db, tableName: runs, keep: 5 }),
      keep: 5,
      provider: () => mysqlLockProvider({ client: db, tableName: locks }),
      withMaxAge: (maxAge) => mysqlRunLedger({ client: db, tableName: runs, keep: 5, maxAge }),
    }),
  )

  it('reads the same instants from a session in another time zone', async () => {
    const name = `zoned-${Math.random().toString(36).slice(2)}`
    const startedAt = new Date('2026-11-24T02:00:00.123Z')
    await mysqlRunLedger({ client: db, tableName: runs }).record({
      name,
      slot: startedAt,
      node: 'n',
      startedAt,
      finishedAt: startedAt,
      outcome: 'ok',
      durationMs: 1,
    })
    const [run] = await mysqlRunLedger({ client: zoned, tableName: runs }).history(name)
    expect(run?.startedAt).toEqual(startedAt)
    expect(run?.slot).toEqual(startedAt)
  })

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = mysqlRunLedger({ client: db, tableName: uniqueTable('shedlock_runs_missing') })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(/does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS/)
  })
})
