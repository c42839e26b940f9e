import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../src/index.ts'
import { postgresLockProvider } from '../../src/providers/postgres/index.ts'
import { loadSqliteDriver } from '../../src/providers/sqlite/driver.ts'
import { sqliteSchema } from '../../src/providers/sqlite/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { datastoreOrSkip, firestoreOrSkip, GOOGLE_TEST_PROJECT } from '../helpers/google-emulators.ts'
import { dropRedisEnvironment, redisOrSkip, redisUrlIn } from '../helpers/kv-clients.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli } from './support/cli.ts'

// shedlock run records its runs in the store's run history when there is one for the URL (the
// built bin, as users run it; `npm run build` first).

/** A run as `shedlock history --json` prints it. */
interface HistoryRun {
  name: string
  slot: string | null
  node: string
  startedAt: string
  finishedAt: string | null
  outcome: string
  durationMs: number | null
  error: { type: string; message: string } | null
}

/** Runs `sh -c script` under lock `name` on `store`; `extra` options go before the `--`. */
const runSh = (store: string[], name: string, script: string, ...extra: string[]) =>
  cli(['run', ...store, '--name', name, '--lock-at-most-for', '1m', ...extra, '--', 'sh', '-c', script])

async function historyOf(store: string[], name: string): Promise<HistoryRun[]> {
  const run = await cli(['history', name, ...store, '--json'])
  expect(run.code, run.stderr).toBe(0)
  return (JSON.parse(run.stdout) as { runs: HistoryRun[] }).runs
}

/** `shedlock status --stale NAME=1h --json`: its exit code and the task's line. */
async function staleness(
  store: string[],
  name: string,
): Promise<{ code: number | null; task: Record<string, unknown> | undefined }> {
  const run = await cli(['status', ...store, '--stale', `${name}=1h`, '--json'])
  const { tasks } = JSON.parse(run.stdout) as { tasks: Record<string, unknown>[] }
  return { code: run.code, task: tasks.find((task) => task.name === name) }
}

/** The history of a task that failed (exit 3), then succeeded, checked as `history` and `status` show it. */
async function failedThenOk(store: string[], name: string): Promise<void> {
  const failed = await runSh(store, name, 'echo failing; exit 3')
  expect(failed).toMatchObject({ code: 3, stdout: 'failing\n', stderr: '' })
  const afterFailure = await staleness(store, name)
  expect(afterFailure.code).toBe(1)
  expect(afterFailure.task).toMatchObject({
    state: 'stale',
    consecutiveFailures: 1,
    lastSuccess: null,
    lastFailure: { outcome: 'failed', error: { type: 'CommandFailedError', message: 'sh: exited with code 3' } },
  })

  const ok = await runSh(store, name, 'echo ran')
  expect(ok).toMatchObject({ code: 0, stdout: 'ran\n', stderr: '' })
  const runs = await historyOf(store, name)
  expect(runs.map((run) => [run.outcome, run.error])).toEqual([
    ['ok', null],
    ['failed', { type: 'CommandFailedError', message: 'sh: exited with code 3' }],
  ])
  for (const run of runs) {
    expect(run).toMatchObject({ name, slot: null })
    expect(run.finishedAt).not.toBeNull()
    expect(run.durationMs).toBeGreaterThanOrEqual(0)
    // The lock's holder: <host>:<pid of that shedlock run>:<random>.
    expect(run.node.startsWith(`${hostname()}:`)).toBe(true)
  }
  const afterSuccess = await staleness(store, name)
  expect(afterSuccess.code).toBe(0)
  expect(afterSuccess.task).toMatchObject({ state: 'ok', consecutiveFailures: 0 })
}

const pool = await postgresPoolOrSkip(2)

describe.skipIf(!pool)('shedlock run on PostgreSQL with a runs table', () => {
  const db = pool!
  const table = uniqueTable('cli_history')
  const runsTable = `${table}_runs`
  const store = ['--url', POSTGRES_URL, '--table', table, '--runs-table', runsTable]
  beforeAll(async () => {
    const init = await cli(['init', ...store])
    expect(init.code, init.stderr).toBe(0)
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.query(`DROP TABLE IF EXISTS ${runsTable}`)
    await db.end()
  })

  it('records each run: failed with the exit code, then ok; status --stale NAME=1h exits 1 after the failure, 0 after the success', async () => {
    await failedThenOk(store, 'report')
  })

  it('a command killed by a signal, or not found, is a failed run that says so', async () => {
    expect((await runSh(store, 'killed', 'kill -TERM $$')).code).toBe(143)
    const missing = await cli([
      'run',
      ...store,
      '--name',
      'killed',
      '--lock-at-most-for',
      '1m',
      '--',
      '/nonexistent/report.sh',
    ])
    expect(missing).toMatchObject({ code: 127, stderr: 'shedlock run: /nonexistent/report.sh: command not found\n' })
    expect((await historyOf(store, 'killed')).map((run) => [run.outcome, run.error?.message])).toEqual([
      ['failed', '/nonexistent/report.sh: command not found (exit 127)'],
      ['failed', 'sh: killed by SIGTERM (exit 143)'],
    ])
  })

  it('--slot: a run records its slot; a slot whose lock another host holds is recorded as skipped', async () => {
    expect((await runSh(store, 'nightly', 'true', '--slot', '2026-11-24T02:00:00Z')).code).toBe(0)
    const held = await postgresLockProvider({ client: db, tableName: table }).lock(
      lockConfiguration({ name: 'nightly', lockAtMostFor: '1m' }),
    )
    try {
      const skipped = await runSh(store, 'nightly', 'echo must not run', '--slot', '2026-11-25T02:00:00Z', '--quiet')
      expect(skipped).toMatchObject({ code: 0, stdout: '', stderr: '' })
    } finally {
      await held!.unlock()
    }
    // Another host holding the lock of a run without a slot: nothing to record on this one.
    const other = await postgresLockProvider({ client: db, tableName: table }).lock(
      lockConfiguration({ name: 'nightly', lockAtMostFor: '1m' }),
    )
    try {
      expect((await runSh(store, 'nightly', 'echo must not run', '--quiet')).code).toBe(0)
    } finally {
      await other!.unlock()
    }
    expect((await historyOf(store, 'nightly')).map((run) => [run.outcome, run.slot])).toEqual([
      ['skipped', '2026-11-25T02:00:00.000Z'],
      ['ok', '2026-11-24T02:00:00.000Z'],
    ])
  })

  it('--no-history: the run is not recorded', async () => {
    expect(await runSh(store, 'unrecorded', 'echo ran', '--no-history')).toMatchObject({
      code: 0,
      stdout: 'ran\n',
      stderr: '',
    })
    expect(await historyOf(store, 'unrecorded')).toEqual([])
  })

  it('--runs-table naming a table that does not exist: the command runs as usual, with one warning', async () => {
    const run = await runSh(
      ['--url', POSTGRES_URL, '--table', table, '--runs-table', `${table}_missing`],
      'elsewhere',
      'echo ran; exit 4',
    )
    expect(run).toMatchObject({ code: 4, stdout: 'ran\n' })
    expect(run.stderr).toBe(
      `shedlock run: warning: no run history table ${table}_missing; create it with: shedlock init --url ${POSTGRES_URL} --runs-table ${table}_missing; this run is not recorded\n`,
    )
  })
})

// The same driver choice as the CLI's.
const driver = await loadSqliteDriver()

describe('shedlock run on SQLite without a runs table: as before, until init creates one', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-history-'))
  const file = join(dir, 'locks.db')
  const store = ['--url', `sqlite:${file}`]
  const tables = (): string[] => {
    const database = driver.open(file)
    try {
      const statement = database.prepare(
        `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`,
      ) as unknown as { all(): { name: string }[] }
      return statement.all().map((row) => row.name)
    } finally {
      database.close()
    }
  }
  beforeAll(() => {
    const database = driver.open(file)
    database.exec(sqliteSchema())
    database.close()
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('runs the command, passes its exit code, prints nothing of its own and creates no table', async () => {
    expect(await runSh(store, 'report', 'echo ran')).toEqual({ code: 0, signal: null, stdout: 'ran\n', stderr: '' })
    expect(await runSh(store, 'report', 'echo failing >&2; exit 3')).toEqual({
      code: 3,
      signal: null,
      stdout: '',
      stderr: 'failing\n',
    })
    expect(tables()).toEqual(['shedlock'])
  })

  it('after shedlock init, records its runs', async () => {
    expect((await cli(['init', ...store])).code).toBe(0)
    expect(tables()).toEqual(['shedlock', 'shedlock_runs'])
    await failedThenOk(store, 'after-init')
  })

  it('--every: a run records when the next is due (its slot, or its start, plus the period); status calls the task overdue once that passed', async () => {
    // A slot of long ago: its next run was due long ago too, and none came.
    const late = await runSh(store, 'hourly', 'true', '--slot', '2026-01-01T10:00:00Z', '--every', '1h')
    expect(late.code, late.stderr).toBe(0)
    const status = await cli(['status', ...store, '--json'])
    expect(status.code).toBe(1)
    const json = JSON.parse(status.stdout) as {
      overdue: string[]
      tasks: { name: string; lastRun: { nextFireAt: string } }[]
    }
    expect(json.overdue).toEqual(['hourly'])
    expect(json.tasks.find((task) => task.name === 'hourly')?.lastRun.nextFireAt).toBe('2026-01-01T11:00:00.000Z')
    // Without a slot, from the run's start: due in an hour, so not overdue.
    const before = Date.now()
    expect((await runSh(store, 'hourly', 'true', '--every', '1h')).code).toBe(0)
    const now = JSON.parse((await cli(['status', ...store, '--json'])).stdout) as typeof json
    expect(now.overdue).toEqual([])
    const due = Date.parse(now.tasks.find((task) => task.name === 'hourly')!.lastRun.nextFireAt)
    expect(due).toBeGreaterThanOrEqual(before + 3_600_000)
    expect(due).toBeLessThan(Date.now() + 3_600_000)
    const zero = await runSh(store, 'hourly', 'true', '--every', '0')
    expect(zero).toMatchObject({ code: 2, stdout: '' })
    expect(zero.stderr).toMatch(/--every must be longer than 0/)
  })
})

const redis = await redisOrSkip()

describe.skipIf(!redis)('shedlock run on Redis: always a run history', () => {
  // Every key of this file lives under its own environment, deleted at the end.
  const environment = `cli-history-${process.pid}-${randomBytes(3).toString('hex')}`
  const store = ['--url', redisUrlIn(environment)]
  afterAll(async () => {
    await dropRedisEnvironment(redis!, environment)
    redis!.disconnect()
  })

  it('records each run in the URL environment: failed with the exit code, then ok; status --stale follows', async () => {
    await failedThenOk(store, 'report')
    expect(await redis!.exists(`shedlock-runs:${environment}:report`)).toBe(1)
  })

  it('--no-history: no stream is written', async () => {
    expect((await runSh(store, 'unrecorded', 'true', '--no-history')).code).toBe(0)
    expect(await redis!.exists(`shedlock-runs:${environment}:unrecorded`)).toBe(0)
  })
})

const firestore = await firestoreOrSkip()

describe.skipIf(!firestore)('shedlock run on Firestore (the emulator): always a run history', () => {
  const table = uniqueTable('cli_history')
  const runs = `${table}_runs`
  const store = ['--url', `firestore://${GOOGLE_TEST_PROJECT}`, '--table', table, '--runs-table', runs]
  afterAll(async () => {
    await firestore!.recursiveDelete(firestore!.collection(runs))
    await firestore!.recursiveDelete(firestore!.collection(table))
    await firestore!.terminate()
  })

  it('records each run in the --runs-table collection: failed with the exit code, then ok; status --stale follows', async () => {
    await failedThenOk(store, 'report')
    expect((await firestore!.collection(runs).doc('report').collection('runs').get()).size).toBe(2)
  })
})

const datastore = await datastoreOrSkip()

describe.skipIf(!datastore)('shedlock run on Datastore (the emulator): always a run history', () => {
  const namespace = uniqueTable('ns').replaceAll('_', '-')
  const store = ['--url', `datastore://${GOOGLE_TEST_PROJECT}/${namespace}`]

  it('records each run under kind shedlock_run: failed with the exit code, then ok; status --stale follows', async () => {
    await failedThenOk(store, 'report')
    const parent = datastore!.key({ namespace, path: ['shedlock_run_task', 'report'] })
    const [entities] = await datastore!.runQuery(datastore!.createQuery(namespace, 'shedlock_run').hasAncestor(parent))
    expect(entities).toHaveLength(2)
  })
})
