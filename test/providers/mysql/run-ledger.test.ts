import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError } from '../../../src/index.ts'
import { mysqlLockProvider, mysqlRunLedger, mysqlRunsSchema, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { waitFor } from '../../helpers/processes.ts'
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

  it('pruneDelay after a write, the task keeps its newest keep runs (the DELETE reads the table it deletes from)', async () => {
    const name = `pruned-${Math.random().toString(36).slice(2)}`
    const ledger = mysqlRunLedger({ client: db, tableName: runs, keep: 5, pruneDelay: 50 })
    const base = Date.now() - 60_000
    for (let i = 0; i < 8; i++) {
      const at = new Date(base + i * 1000)
      await ledger.record({
        name,
        slot: undefined,
        node: 'n',
        startedAt: at,
        finishedAt: at,
        outcome: 'ok',
        durationMs: 1,
      })
    }
    const count = async () =>
      Number(
        (
          (await db.query(`SELECT count(*) AS n FROM ${runs} WHERE name = ?`, [name])) as unknown as [{ n: unknown }[]]
        )[0][0]!.n,
      )
    expect(await waitFor(async () => (await count()) === 5, 5_000)).toBe(true)
    expect((await ledger.history(name)).map((r) => r.startedAt.getTime())).toEqual(
      [7, 6, 5, 4, 3].map((i) => base + i * 1000),
    )
  })

  it('a runs table without the fencing_token column (created before it) rejects with the ALTER TABLE that adds it', async () => {
    const table = uniqueTable('shedlock_my_runs_old')
    await db.query(mysqlRunsSchema({ tableName: table }))
    await db.query(`ALTER TABLE ${table} DROP COLUMN fencing_token`)
    try {
      const ledger = mysqlRunLedger({ client: db, tableName: table })
      const at = new Date()
      const record = ledger.record({
        name: 'x',
        slot: undefined,
        node: 'n',
        startedAt: at,
        finishedAt: at,
        outcome: 'ok',
        durationMs: 0,
      })
      await expect(record).rejects.toThrow(LockProviderError)
      await expect(record).rejects.toThrow(`ALTER TABLE ${table} ADD COLUMN fencing_token BIGINT NULL`)
      await expect(ledger.history('x')).rejects.toThrow(/has no fencing_token column; add it with: ALTER TABLE/)
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${table}`)
    }
  })

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = mysqlRunLedger({ client: db, tableName: uniqueTable('shedlock_runs_missing') })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(/does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS/)
  })
})
