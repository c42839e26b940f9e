import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, LockProviderError } from '../../../src/index.ts'
import {
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../../src/providers/postgres/index.ts'
import { SWEEP_LIMIT } from '../../../src/support/sql/sql-run-pruner.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'
import { waitFor } from '../../helpers/processes.ts'
import { postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

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
      withMaxAge: (maxAge) => postgresRunLedger({ client: db, tableName: runs, keep: 5, maxAge }),
    }),
  )

  it('runs recorded in one turn cost one INSERT of their rows', async () => {
    const sent: string[] = []
    const client = {
      query: (text: string, values: unknown[]) => {
        sent.push(text)
        return db.query(text, values)
      },
    }
    const ledger = postgresRunLedger({ client, tableName: runs, pruneDelay: '1h' })
    const name = `ledger-batch-${Date.now()}`
    const at = new Date()
    await Promise.all(
      Array.from({ length: 12 }, (_, k) =>
        ledger.record({
          name,
          slot: undefined,
          node: `n${k}`,
          startedAt: at,
          finishedAt: at,
          outcome: 'ok',
          durationMs: k,
        }),
      ),
    )
    expect(sent.filter((text) => text.startsWith('INSERT')).length).toBe(1)
    expect((await ledger.history(name, { limit: 50 })).length).toBe(12)
  })

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
    const failure = new Error(
      "copy to postgres://etl:Zq8@Wx3:Kv5@warehouse:5432/dw failed: host=warehouse password='Jm2@Qp4' sslmode=require",
    )
    await expect(executor.executeWithLock(() => Promise.reject(failure), { name, lockAtMostFor: '1m' })).rejects.toBe(
      failure,
    )
    const { rows } = await db.query(`SELECT error_type, error_message FROM ${runs} WHERE name = $1`, [name])
    expect(rows).toEqual([
      {
        error_type: 'Error',
        error_message:
          "copy to postgres://etl:***@warehouse:5432/dw failed: host=warehouse password='***' sslmode=require",
      },
    ])
    for (const piece of ['Zq8', 'Wx3', 'Kv5', 'Jm2', 'Qp4']) expect(rows[0].error_message).not.toContain(piece)
  })

  it("old runs are deleted apart from the runs: a write is one statement; the sweep of every task and the task's own prune follow pruneDelay later", async () => {
    const table = uniqueTable('shedlock_pg_sweep')
    await db.query(postgresRunsSchema({ tableName: table }))
    try {
      const statements: string[] = []
      const counting = {
        query: (text: string, values?: unknown[]) => {
          statements.push(text)
          return db.query(text, values)
        },
      }
      const run = (name: string, daysAgo: number, offsetMs = 0) => {
        const at = new Date(Date.now() - daysAgo * 86_400_000 + offsetMs)
        return {
          name,
          slot: undefined,
          node: 'n',
          startedAt: at,
          finishedAt: at,
          outcome: 'ok' as const,
          durationMs: 1,
        }
      }
      const count = async (name: string) =>
        Number((await db.query(`SELECT count(*) AS n FROM ${table} WHERE name = $1`, [name])).rows[0].n)
      // Written while the age limit was a year, by a ledger that prunes nothing within the test.
      const yearLong = postgresRunLedger({ client: db, tableName: table, maxAge: '365d', pruneDelay: '1h' })
      for (let i = 0; i < SWEEP_LIMIT + 5; i++)
        await db.query(
          `INSERT INTO ${table} (id, name, node, started_at, outcome) VALUES ($1, 'bulk', 'n', now() - interval '40 days', 'ok')`,
          [`bulk-${i}`],
        )
      await yearLong.record(run('renamed', 40))
      const ledger = postgresRunLedger({
        client: counting as never,
        tableName: table,
        maxAge: '30d',
        keep: 20,
        pruneDelay: 200,
      })
      await ledger.record(run('current', 0))
      // The write alone: nothing is deleted on the run's path.
      expect(statements).toHaveLength(1)
      expect(statements[0]).toMatch(/^INSERT INTO /)
      // pruneDelay later, the first write's sweep of every task, bounded: 1000 rows, then another
      // sweep a pruneDelay later, since more were left.
      expect(await waitFor(async () => (await count('bulk')) + (await count('renamed')) === 0, 5_000)).toBe(true)
      expect(statements.slice(1)).toEqual([
        expect.stringMatching(/^DELETE FROM \w+ WHERE id IN \(SELECT id FROM \(SELECT id FROM \w+ WHERE started_at < /),
        expect.stringMatching(/^DELETE FROM \w+ WHERE id IN /),
      ])
      // The task's own prune: due on every keep / 10-th write of it (here the 2nd), one DELETE of
      // its runs beyond keep and older than maxAge, pruneDelay after the write.
      await yearLong.record(run('current', 40))
      for (let i = 0; i < 25; i++) await yearLong.record(run('current', 0, -60_000 + i))
      statements.length = 0
      await ledger.record(run('current', 0))
      expect(statements).toHaveLength(1)
      expect(await waitFor(async () => (await count('current')) === 20, 5_000)).toBe(true)
      expect(statements).toEqual([
        expect.stringMatching(/^INSERT INTO /),
        expect.stringMatching(/^DELETE FROM \w+ WHERE name = \$1 AND \(started_at < /),
      ])
      const kept = await ledger.history('current', { limit: 20 })
      expect(kept).toHaveLength(20)
      expect(kept.every((r) => r.startedAt.getTime() > Date.now() - 120_000)).toBe(true)
      // Not due again before its next 2nd write: no statement but the write.
      statements.length = 0
      await ledger.record(run('current', 0))
      await new Promise((resolve) => setTimeout(resolve, 400))
      expect(statements).toHaveLength(1)
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${table}`)
    }
  })

  it('a runs table without the fencing_token column (created before it) rejects with the ALTER TABLE that adds it', async () => {
    const table = uniqueTable('shedlock_pg_runs_old')
    await db.query(postgresRunsSchema({ tableName: table }))
    await db.query(`ALTER TABLE ${table} DROP COLUMN fencing_token`)
    try {
      const ledger = postgresRunLedger({ client: db, tableName: table })
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
      await expect(record).rejects.toThrow(
        `has no fencing_token column; add it with: ALTER TABLE ${table} ADD COLUMN fencing_token BIGINT NULL`,
      )
      await expect(ledger.history('x')).rejects.toThrow(/has no fencing_token column; add it with: ALTER TABLE/)
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${table}`)
    }
  })

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = postgresRunLedger({ client: db, tableName: uniqueTable('shedlock_runs_missing') })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(
      /does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS \w+ \(\n {2}id VARCHAR\(36\)/,
    )
  })
})
