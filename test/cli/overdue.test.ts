import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Cron } from 'croner'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LockInspector } from '../../src/core/lock-inspector.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import type { RunLedger } from '../../src/core/run-ledger.ts'
import { createDashboard } from '../../src/dashboard/index.ts'
import { createLockingTaskExecutor, withLock } from '../../src/index.ts'
import { postgresLockInspector, postgresLockProvider, postgresRunLedger } from '../../src/providers/postgres/index.ts'
import { redisLockInspector, redisLockProvider, redisRunLedger } from '../../src/providers/redis/index.ts'
import { loadSqliteDriver } from '../../src/providers/sqlite/driver.ts'
import { sqliteLockInspector, sqliteLockProvider, sqliteRunLedger } from '../../src/providers/sqlite/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { REDIS_URL, redisOrSkip } from '../helpers/kv-clients.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli } from './support/cli.ts'

// Overdue tasks (issue 46): a croner job under withLock records its next fire time with each run;
// once the schedule stops (every replica down), `shedlock status` says the task is overdue, from
// the store alone, and the dashboard's /healthz answers 503 naming it.

interface Store {
  /** What the CLI's status takes: the URL and, where it has its own, the runs table. */
  readonly args: readonly string[]
  provider(lockedBy?: string): LockProvider
  readonly inspector: LockInspector
  readonly ledger: RunLedger
}

interface StatusJson {
  overdue: string[]
  tasks: { name: string; state: string; lastRun: { nextFireAt: string | null } | null }[]
}

let counter = 0
const fresh = (): string => `overdue-${process.pid}-${++counter}`

function overdueCases(store: () => Store): void {
  it('a task whose schedule stopped is overdue once its next fire time passes by --grace: exit 1, /healthz 503', async () => {
    const name = fresh()
    const executor = createLockingTaskExecutor(store().provider(), { runLedger: store().ledger })
    const job = new Cron(
      '* * * * * *',
      withLock(executor, { name, lockAtMostFor: '10s' }, () => undefined),
    )
    try {
      await sleep(2_200)
      const status = await cli(['status', '--json', '--grace', '1500ms', ...store().args])
      expect(status.code, status.stderr).toBe(0)
      const running = (JSON.parse(status.stdout) as StatusJson).tasks.find((task) => task.name === name)
      expect(running?.state).toBe('ok')
      // The whole second after the latest run: croner's own next fire time.
      expect(Date.parse(running!.lastRun!.nextFireAt!) % 1000).toBe(0)
    } finally {
      job.stop()
      await executor.close()
    }
    // Every replica is down now: only the store knows when the task was due.
    await sleep(2_600)
    const stopped = await cli(['status', '--grace', '1500ms', ...store().args])
    expect(stopped.code, stopped.stderr).toBe(1)
    expect(stopped.stdout).toMatch(new RegExp(`${name} +overdue \\(due \\d+s ago\\)`))
    const json = JSON.parse(
      (await cli(['status', '--json', '--grace', '1500ms', ...store().args])).stdout,
    ) as StatusJson
    expect(json.overdue).toContain(name)
    // A generous grace: not yet overdue.
    const patient = await cli(['status', '--json', '--grace', '1h', ...store().args])
    expect((JSON.parse(patient.stdout) as StatusJson).overdue).not.toContain(name)

    const dashboard = createDashboard({
      stores: [{ label: 'store', inspector: store().inspector, runLedger: store().ledger }],
      overdueGrace: '1500ms',
    })
    const health = await dashboard.health()
    expect(health.healthy).toBe(false)
    expect(health.stores[0]!.overdue).toContain(name)

    // Paused on purpose: its fire times are skipped, not missed.
    expect((await cli(['pause', name, ...store().args.slice(0, 2), ...tableArgs(store())])).code).toBe(0)
    const paused = JSON.parse(
      (await cli(['status', '--json', '--grace', '1500ms', ...store().args])).stdout,
    ) as StatusJson
    expect(paused.overdue).not.toContain(name)
  })
}

/** The lock table option of a store's args (`--table T`), for pause, which takes no runs table. */
function tableArgs(store: Store): string[] {
  const at = store.args.indexOf('--table')
  return at < 0 ? [] : ['--table', store.args[at + 1]!]
}

const pool = await postgresPoolOrSkip(2)

describe.skipIf(!pool)('overdue tasks on PostgreSQL', () => {
  const db = pool!
  const table = uniqueTable('cli_overdue')
  const runs = `${table}_runs`
  const store: Store = {
    args: ['--url', POSTGRES_URL, '--table', table, '--runs-table', runs],
    provider: (lockedBy) => postgresLockProvider({ client: db, tableName: table, lockedBy }),
    inspector: postgresLockInspector({ client: db, tableName: table }),
    ledger: postgresRunLedger({ client: db, tableName: runs }),
  }
  beforeAll(async () => {
    const init = await cli(['init', ...store.args])
    expect(init.code, init.stderr).toBe(0)
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.query(`DROP TABLE IF EXISTS ${runs}`)
    await db.end()
  })
  overdueCases(() => store)
})

const redis = await redisOrSkip()

describe.skipIf(!redis)('overdue tasks on Redis', () => {
  const environment = `cli-overdue-${process.pid}-${randomBytes(3).toString('hex')}`
  const client = redis!
  const store: Store = {
    args: ['--url', `${REDIS_URL}${REDIS_URL.includes('?') ? '&' : '?'}environment=${environment}`],
    provider: (lockedBy) => redisLockProvider({ client, environment, lockedBy }),
    inspector: redisLockInspector({ client, environment }),
    ledger: redisRunLedger({ client, environment }),
  }
  afterAll(async () => {
    const keys = [
      ...(await client.keys(`job-lock:${environment}:*`)),
      ...(await client.keys(`shedlock-runs:${environment}:*`)),
    ]
    if (keys.length > 0) await client.del(...keys)
    client.disconnect()
  })
  overdueCases(() => store)
})

const driver = await loadSqliteDriver()

describe('overdue tasks on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-overdue-'))
  const file = join(dir, 'locks.db')
  const database = driver.open(file)
  const store: Store = {
    args: ['--url', `sqlite:${file}`],
    provider: (lockedBy) => sqliteLockProvider({ database, lockedBy }),
    inspector: sqliteLockInspector({ database }),
    ledger: sqliteRunLedger({ database }),
  }
  afterAll(() => {
    database.close()
    rmSync(dir, { recursive: true, force: true })
  })
  beforeAll(async () => {
    const init = await cli(['init', ...store.args])
    expect(init.code, init.stderr).toBe(0)
  })
  overdueCases(() => store)
})
