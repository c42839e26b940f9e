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

  it('a missing runs table rejects with LockProviderError saying how to create it', async () => {
    const ledger = sqliteRunLedger({ database, tableName: 'runs_missing' })
    await expect(ledger.history('x')).rejects.toThrow(LockProviderError)
    await expect(ledger.history('x')).rejects.toThrow(
      /does not exist\. Create it with:\nCREATE TABLE IF NOT EXISTS runs_missing/,
    )
  })
})
