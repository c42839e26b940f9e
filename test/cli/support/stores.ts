import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import type { LockInspector } from '../../../src/core/lock-inspector.ts'
import type { LockProvider } from '../../../src/core/lock-provider.ts'
import type { RunLedger } from '../../../src/core/run-ledger.ts'
import {
  postgresLockInspector,
  postgresLockProvider,
  postgresRunLedger,
} from '../../../src/providers/postgres/index.ts'
import { redisLockInspector, redisLockProvider, redisRunLedger } from '../../../src/providers/redis/index.ts'
import { loadSqliteDriver } from '../../../src/providers/sqlite/driver.ts'
import { sqliteLockInspector, sqliteLockProvider, sqliteRunLedger } from '../../../src/providers/sqlite/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { dropRedisEnvironment, redisOrSkip, redisUrlIn } from '../../helpers/kv-clients.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'
import { cli } from './cli.ts'

// The stores the operator commands' tests run on (PostgreSQL, Redis, SQLite), each as the CLI
// opens it and as an application's executor reaches it, made once and removed after its file.

/** One store, as the CLI opens it and as an application reaches it. */
export interface CliStore {
  /** The CLI's options for the lock store (`--url`, `--table`). */
  readonly args: readonly string[]
  /** `args` for history and status: with the runs table, where the store has its own. */
  readonly historyArgs: readonly string[]
  provider(lockedBy?: string): LockProvider
  readonly inspector: LockInspector
  readonly ledger: RunLedger
}

/** What a file may add to the PostgreSQL block: its pool and the lock table's name. */
export interface PostgresExtras {
  readonly db: pg.Pool
  readonly table: string
}

/**
 * A `describe` block per store, `${title} on PostgreSQL` and so on, that runs `cases` over its
 * store, made with `shedlock init`. A store whose server is down skips its block (CI fails
 * instead: see helpers/sql-pools.ts). `postgres` adds tests to the PostgreSQL block.
 */
export async function describeOnCliStores(
  title: string,
  cases: (store: () => CliStore) => void,
  postgres?: (extras: () => PostgresExtras) => void,
): Promise<void> {
  const pool = await postgresPoolOrSkip(2)
  describe.skipIf(!pool)(`${title} on PostgreSQL`, () => {
    const db = pool!
    const table = uniqueTable('cli_store')
    const runs = `${table}_runs`
    const args = ['--url', POSTGRES_URL, '--table', table]
    const store: CliStore = {
      args,
      historyArgs: [...args, '--runs-table', runs],
      provider: (lockedBy) => postgresLockProvider({ client: db, tableName: table, lockedBy }),
      inspector: postgresLockInspector({ client: db, tableName: table }),
      ledger: postgresRunLedger({ client: db, tableName: runs }),
    }
    beforeAll(() => init(store.historyArgs))
    afterAll(async () => {
      await db.query(`DROP TABLE IF EXISTS ${table}`)
      await db.query(`DROP TABLE IF EXISTS ${runs}`)
      await db.end()
    })
    cases(() => store)
    postgres?.(() => ({ db, table }))
  })

  const redis = await redisOrSkip()
  describe.skipIf(!redis)(`${title} on Redis`, () => {
    // Every key of the block lives under its own environment, deleted at the end.
    const environment = `cli-${process.pid}-${randomBytes(3).toString('hex')}`
    const client = redis!
    const args = ['--url', redisUrlIn(environment)]
    const store: CliStore = {
      args,
      historyArgs: args,
      provider: (lockedBy) => redisLockProvider({ client, environment, lockedBy }),
      inspector: redisLockInspector({ client, environment }),
      ledger: redisRunLedger({ client, environment }),
    }
    afterAll(async () => {
      await dropRedisEnvironment(client, environment)
      client.disconnect()
    })
    cases(() => store)
  })

  const driver = await loadSqliteDriver()
  describe(`${title} on SQLite`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-store-'))
    const file = join(dir, 'locks.db')
    const database = driver.open(file)
    const args = ['--url', `sqlite:${file}`]
    const store: CliStore = {
      args,
      historyArgs: args,
      provider: (lockedBy) => sqliteLockProvider({ database, lockedBy }),
      inspector: sqliteLockInspector({ database }),
      ledger: sqliteRunLedger({ database }),
    }
    beforeAll(() => init(args))
    afterAll(() => {
      database.close()
      rmSync(dir, { recursive: true, force: true })
    })
    cases(() => store)
  })
}

async function init(args: readonly string[]): Promise<void> {
  const run = await cli(['init', ...args])
  expect(run.code, run.stderr).toBe(0)
}
