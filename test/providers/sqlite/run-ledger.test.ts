import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { LockProviderError } from '../../../src/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../../src/providers/sqlite/driver.ts'
import {
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../../src/providers/sqlite/index.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { waitFor } from '../../helpers/processes.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'

// The CLI's driver choice: node:sqlite where this Node has it, else better-sqlite3, else libsql.
const driver = await loadSqliteDriver()
const dir = mkdtempSync(join(tmpdir(), 'shedlock-sqlite-ledger-'))
const database: SqliteConnection = driver.open(join(dir, 'locks.db'))
database.exec('PRAGMA journal_mode = WAL')
database.exec(sqliteSchema())
database.exec(sqliteRunsSchema())
afterAll(() => {
  database.close()
  rmSync(dir, { recursive: true, force: true })
})

describe(`sqliteRunLedger (${driver.name})`, () => {
  registerRunLedgerSuite(
    runLedgerSuite({
      ledger: sqliteRunLedger({ database, keep: 5 }),
      keep: 5,
      provider: () => sqliteLockProvider({ database }),
      withMaxAge: (maxAge) => sqliteRunLedger({ database, keep: 5, maxAge }),
    }),
  )

  it('sqliteRunsSchema() is idempotent, also for a table in an attached database', () => {
    database.exec(sqliteRunsSchema())
    database.exec(`ATTACH DATABASE '${join(dir, 'other.db')}' AS other`)
    database.exec(sqliteRunsSchema({ tableName: 'other.runs' }))
    database.exec(sqliteRunsSchema({ tableName: 'other.runs' }))
    const indexes = database.prepare("SELECT name FROM other.sqlite_master WHERE type = 'index'").all() as {
      name: string
    }[]
    expect(indexes.map((i) => i.name)).toContain('runs_name_started')
  })

  it('pruneDelay after a write, the task keeps its newest keep runs', async () => {
    const name = `pruned-${Math.random().toString(36).slice(2)}`
    const ledger = sqliteRunLedger({ database, keep: 5, pruneDelay: 50 })
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
    const count = () =>
      Number(
        (database.prepare('SELECT count(*) AS n FROM shedlock_runs WHERE name = ?').all(name) as { n: unknown }[])[0]!
          .n,
      )
    expect(await waitFor(() => count() === 5, 5_000)).toBe(true)
    expect((await ledger.history(name)).map((r) => r.startedAt.getTime())).toEqual(
      [7, 6, 5, 4, 3].map((i) => base + i * 1000),
    )
  })

  it('a runs table without the fencing_token column (created before it) rejects with the ALTER TABLE that adds it', async () => {
    database.exec(sqliteRunsSchema({ tableName: 'runs_old' }))
    database.exec('ALTER TABLE runs_old DROP COLUMN fencing_token')
    const ledger = sqliteRunLedger({ database, tableName: 'runs_old' })
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
    await expect(record).rejects.toThrow('ALTER TABLE runs_old ADD COLUMN fencing_token BIGINT NULL')
    await expect(ledger.history('x')).rejects.toThrow(/has no fencing_token column; add it with: ALTER TABLE/)
  })

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = sqliteRunLedger({ database, tableName: 'runs_missing' })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(
      /does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS runs_missing/,
    )
  })
})
