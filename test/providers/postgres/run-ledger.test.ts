import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, LockProviderError } from '../../../src/index.ts'
import {
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../../src/providers/postgres/index.ts'
import { SWEEP_LIMIT } from '../../../src/support/sql/sql-run-ledger.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'
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

  it("the sweep of every task: at most once per 10 minutes, bounded, and in place of the task's own age DELETE (no statement more per run)", async () => {
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
      const old = (name: string, daysAgo: number) => {
        const at = new Date(Date.now() - daysAgo * 86_400_000)
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
      const yearLong = postgresRunLedger({ client: db, tableName: table, maxAge: '365d' })
      for (let i = 0; i < SWEEP_LIMIT + 5; i++)
        await db.query(
          `INSERT INTO ${table} (id, name, node, started_at, outcome) VALUES ($1, 'bulk', 'n', now() - interval '40 days', 'ok')`,
          [`bulk-${i}`],
        )
      await yearLong.record(old('renamed', 40))
      const ledger = postgresRunLedger({ client: counting as never, tableName: table, maxAge: '30d' })
      const run = await ledger.start({ name: 'current', slot: undefined, node: 'n', startedAt: new Date() })
      statements.length = 0
      await run.finish({ finishedAt: new Date(), outcome: 'ok', durationMs: 1 })
      // UPDATE (the handle knows the row: no SELECT of its name), and the first write's sweep of
      // every task in place of the task's own age DELETE; no keep DELETE before its 10th write.
      expect(statements).toHaveLength(2)
      expect(statements[1]).toMatch(
        /^DELETE FROM \w+ WHERE id IN \(SELECT id FROM \(SELECT id FROM \w+ WHERE started_at < /,
      )
      const count = async (name: string) =>
        Number((await db.query(`SELECT count(*) AS n FROM ${table} WHERE name = $1`, [name])).rows[0].n)
      // Bounded: 1000 rows, then the next write sweeps again, since more were left.
      expect((await count('bulk')) + (await count('renamed'))).toBe(6)
      await ledger.record({ ...old('current', 0) })
      expect((await count('bulk')) + (await count('renamed'))).toBe(0)
      // Now at most once per 10 minutes: a task's own rows are pruned on its 10th write (keep 100).
      await yearLong.record(old('renamed', 40))
      await yearLong.record(old('current', 40))
      const perWrite: number[] = []
      for (let write = 3; write <= 10; write++) {
        statements.length = 0
        await ledger.record({ ...old('current', 0) })
        perWrite.push(statements.length)
      }
      // INSERT alone, then on the 10th: INSERT, the task's age DELETE, the keep DELETE.
      expect(perWrite).toEqual([1, 1, 1, 1, 1, 1, 1, 3])
      expect(await count('renamed')).toBe(1)
      expect(await count('current')).toBe(10)
      expect(
        (await ledger.history('current', { limit: 20 })).every((r) => r.startedAt.getTime() > Date.now() - 60_000),
      ).toBe(true)
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
