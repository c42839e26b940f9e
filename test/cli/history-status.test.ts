import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { RunOutcome } from '../../src/core/run-ledger.ts'
import { postgresRunLedger, postgresRunsSchema, postgresSchema } from '../../src/providers/postgres/index.ts'
import { loadSqliteDriver } from '../../src/providers/sqlite/driver.ts'
import { sqliteSchema } from '../../src/providers/sqlite/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli, lines, startCli, waitFor } from './support/cli.ts'

const pool = await postgresPoolOrSkip(2)
const DAY = 86_400_000

interface StatusJson {
  stale: string[]
  failing: string[]
  ignored: string[]
  tasks: { name: string; state: string; consecutiveFailures: number }[]
}

describe.skipIf(!pool)('shedlock status and history (the built CLI, on PostgreSQL)', () => {
  const db = pool!
  const tables: string[] = []
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  /** A fresh lock table and runs table, with the given runs (outcomes oldest first, `daysAgo` for the newest). */
  async function store(tasks: Record<string, { outcomes: RunOutcome[]; daysAgo?: number }>): Promise<string[]> {
    const [locks, runs] = [uniqueTable('shedlock_cli_st_locks'), uniqueTable('shedlock_cli_st_runs')]
    tables.push(locks, runs)
    await db.query(postgresSchema({ tableName: locks }))
    await db.query(postgresRunsSchema({ tableName: runs }))
    const ledger = postgresRunLedger({ client: db, tableName: runs, maxAge: '365d' })
    for (const [name, { outcomes, daysAgo = 0 }] of Object.entries(tasks)) {
      for (const [i, outcome] of outcomes.entries()) {
        const at = new Date(Date.now() - daysAgo * DAY - (outcomes.length - i) * 60_000)
        const error = outcome === 'failed' ? { type: 'Error', message: `run ${i} failed` } : undefined
        await ledger.record({
          name,
          slot: undefined,
          node: 'n',
          startedAt: at,
          finishedAt: at,
          outcome: outcome as 'ok',
          durationMs: 5,
          error,
        })
      }
    }
    return ['--url', POSTGRES_URL, '--table', locks, '--runs-table', runs]
  }

  it('a task whose latest finished run failed is failing (N in a row): exit 1, and --json says which', async () => {
    const url = await store({
      broken: { outcomes: ['ok', 'failed', 'skipped', 'failed'] },
      healed: { outcomes: ['failed', 'ok'] },
    })
    const json = await cli(['status', ...url, '--json'])
    expect(json.code, json.stderr).toBe(1)
    const out = JSON.parse(json.stdout) as StatusJson
    expect(out).toMatchObject({ stale: [], failing: ['broken'], ignored: [] })
    expect(out.tasks).toMatchObject([
      { name: 'broken', state: 'failing', consecutiveFailures: 2 },
      { name: 'healed', state: 'ok', consecutiveFailures: 0 },
    ])
    const text = await cli(['status', ...url])
    expect(text.code, text.stderr).toBe(1)
    expect(lines(text.stdout)[0]).toMatch(/: 2 tasks, 0 stale, 1 failing; now /)
    expect(text.stdout).toMatch(/^broken +failing \(2 in a row\) /m)
    // Stale beats failing; a probe of one task (NAME=AGE only) is not failed by another.
    const probe = await cli(['status', ...url, '--stale', 'healed=1h', '--json'])
    expect(probe.code, probe.stderr).toBe(0)
    expect(JSON.parse(probe.stdout)).toMatchObject({ stale: [], failing: [] })
    const both = await cli(['status', ...url, '--stale', '1h', '--json'])
    expect(both.code).toBe(1)
    expect(JSON.parse(both.stdout)).toMatchObject({ failing: ['broken'] })
  })

  it('--ignore-older-than (7d by default) leaves out a task not run for that long, unless --stale names it; 0 leaves none out', async () => {
    const url = await store({ renamed: { outcomes: ['failed'], daysAgo: 10 }, current: { outcomes: ['ok'] } })
    const byDefault = await cli(['status', ...url, '--stale', '26h', '--json'])
    expect(byDefault.code, byDefault.stderr).toBe(0)
    expect(JSON.parse(byDefault.stdout)).toMatchObject({
      stale: [],
      failing: [],
      ignored: ['renamed'],
      tasks: [{ name: 'current', state: 'ok' }],
    })
    const text = await cli(['status', ...url])
    expect(text.code).toBe(0)
    expect(lines(text.stdout)[0]).toMatch(/: 1 task, 0 stale, 0 failing, 1 not run for 7d left out; now /)
    const wider = await cli(['status', ...url, '--stale', '26h', '--ignore-older-than', '30d', '--json'])
    expect(wider.code).toBe(1)
    expect(JSON.parse(wider.stdout)).toMatchObject({ stale: ['renamed'], ignored: [] })
    const none = await cli(['status', ...url, '--ignore-older-than', '0', '--json'])
    expect(JSON.parse(none.stdout)).toMatchObject({ failing: ['renamed'], ignored: [] })
    const named = await cli(['status', ...url, '--stale', 'renamed=26h', '--json'])
    expect(named.code).toBe(1)
    expect(JSON.parse(named.stdout)).toMatchObject({ stale: ['renamed'], ignored: [] })
    const bad = await cli(['status', ...url, '--ignore-older-than', 'soon'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(
      /^shedlock status: --ignore-older-than "soon": .*use an AGE like 7d, or 0 to leave no task out/,
    )
  })

  it('history on a store without the runs table says "history" and names shedlock init --runs-table; status too', async () => {
    const missing = uniqueTable('shedlock_cli_no_runs')
    for (const args of [['history', 'report'], ['status']]) {
      const run = await cli([...args, '--url', POSTGRES_URL, '--runs-table', missing])
      expect(run.code).toBe(1)
      expect(lines(run.stderr)).toHaveLength(1)
      expect(run.stderr).toMatch(
        new RegExp(
          `^shedlock ${args[0]}: no run history in postgres://\\S+: its table ${missing} does not exist; create it with: shedlock init --url \\S+ --runs-table ${missing}\\n$`,
        ),
      )
      expect(run.stderr).not.toMatch(/lock "report"/)
    }
    // --json: the document of /healthz's entry, with the reason in errors, the hint whole.
    const json = await cli(['status', '--url', POSTGRES_URL, '--runs-table', missing, '--json'])
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toEqual({
      store: expect.stringMatching(/^PostgreSQL postgres:\/\//),
      now: expect.any(String),
      errors: [
        expect.stringMatching(
          new RegExp(
            `^runs: no run history in \\S+: its table ${missing} does not exist; create it with: shedlock init --url \\S+ --runs-table ${missing}$`,
          ),
        ),
      ],
      stale: [],
      overdue: [],
      failing: [],
      ignored: [],
      tasks: [],
    })
    expect(json.stderr).toMatch(/^shedlock status: no run history in /)
  })

  it('a runs table that cannot be read is about the run history, not the locks, on stderr and in --json', async () => {
    const broken = uniqueTable('shedlock_cli_bad_runs')
    tables.push(broken)
    await db.query(`CREATE TABLE ${broken} (x INT)`)
    for (const args of [['history', 'report'], ['status'], ['status', '--json']]) {
      const run = await cli([...args, '--url', POSTGRES_URL, '--runs-table', broken])
      expect(run.code).toBe(1)
      expect(run.stderr).toMatch(
        new RegExp(
          `^shedlock ${args[0]}: postgres: could not read the run history${args[0] === 'history' ? ' of "report"' : ''}: `,
        ),
      )
      expect(run.stderr).not.toMatch(/could not (list the locks|inspect lock)/)
      if (args.includes('--json'))
        expect(JSON.parse(run.stdout).errors).toEqual([`runs: ${run.stderr.replace(/^shedlock status: |\n$/g, '')}`])
    }
  })

  it("status --json has the fields of /healthz's entry for the store, with the same values", async () => {
    const url = await store({ broken: { outcomes: ['ok', 'failed'] }, healed: { outcomes: ['failed', 'ok'] } })
    const dashboard = startCli(['dashboard', ...url, '--port', '0', '--stale', 'healed=1h'])
    expect(await waitFor(() => /on (http:\/\/\S+\/) /.test(dashboard.stdout()), 15_000), dashboard.stderr()).toBe(true)
    const base = /on (http:\/\/\S+\/) /.exec(dashboard.stdout())![1]!
    const health = (await (await fetch(`${base}healthz`)).json()) as { stores: Record<string, unknown>[] }
    dashboard.child.kill('SIGTERM')
    await dashboard.exited
    const status = await cli(['status', ...url, '--stale', 'healed=1h', '--json'])
    const { now, ...fields } = JSON.parse(status.stdout) as Record<string, unknown>
    expect(now).toEqual(expect.any(String))
    expect(health.stores).toHaveLength(1)
    expect(fields).toEqual(health.stores[0])
    expect(fields).toMatchObject({ errors: [], failing: [], stale: [], store: expect.stringMatching(/^PostgreSQL /) })
  })

  it('history: options before or after the task name, and -- ends the options (a name may start with -)', async () => {
    const url = await store({ report: { outcomes: ['ok', 'failed'] }, '-odd': { outcomes: ['ok'] } })
    const before = await cli(['history', ...url, '--json', 'report'])
    const after = await cli(['history', 'report', ...url, '--json'])
    for (const run of [before, after]) {
      expect(run.code, run.stderr).toBe(0)
      expect(JSON.parse(run.stdout).runs.map((r: { outcome: string }) => r.outcome)).toEqual(['failed', 'ok'])
    }
    const odd = await cli(['history', ...url, '--json', '--', '-odd'])
    expect(odd.code, odd.stderr).toBe(0)
    expect(JSON.parse(odd.stdout)).toMatchObject({ task: '-odd', runs: [{ outcome: 'ok' }] })
    const unknown = await cli(['history', ...url, '-odd'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(
      /^shedlock history: unknown option "-odd"; a name that starts with "-" goes after "--"/,
    )
    const two = await cli(['history', 'a', 'b', ...url])
    expect(two.code).toBe(2)
    expect(two.stderr).toMatch(/^shedlock history: one task at a time: got "a", "b"/)
  })

  it('history --json: the fencing token as decimal text (all of its digits past 2^53), null where the run had none', async () => {
    const url = await store({ report: { outcomes: ['ok'] } })
    const ledger = postgresRunLedger({ client: db, tableName: url[url.indexOf('--runs-table') + 1]! })
    const at = new Date()
    await ledger.record({
      name: 'report',
      slot: undefined,
      node: 'n',
      startedAt: at,
      finishedAt: at,
      outcome: 'ok',
      durationMs: 1,
      fencingToken: 2n ** 53n + 1n,
    })
    const run = await cli(['history', 'report', ...url, '--json'])
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout).runs.map((r: { fencingToken: unknown }) => r.fencingToken)).toEqual([
      '9007199254740993',
      null,
    ])
    const status = await cli(['status', ...url, '--json'])
    expect(JSON.parse(status.stdout).tasks[0].lastRun.fencingToken).toBe('9007199254740993')
  })

  it('doctor checks the runs table: a missing one is a note (--), a failure when --runs-table names it', async () => {
    const url = await store({})
    const present = await cli(['doctor', ...url, '--json'])
    expect(present.code, present.stdout).toBe(0)
    const runsTable = url[url.indexOf('--runs-table') + 1]!
    expect(JSON.parse(present.stdout).checks).toContainEqual({
      label: `table ${runsTable} (run history)`,
      status: 'ok',
      detail: 'exists and can be read',
    })
    const missing = uniqueTable('shedlock_cli_no_runs')
    const lockTable = url[url.indexOf('--table') + 1]!
    // A SQLite file with the lock table only: the default runs table is missing.
    const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-doctor-'))
    try {
      const database = (await loadSqliteDriver()).open(join(dir, 'locks.db'))
      database.exec(sqliteSchema())
      database.close()
      const note = await cli(['doctor', '--url', `sqlite:${join(dir, 'locks.db')}`])
      expect(note.code, note.stdout).toBe(0)
      expect(note.stdout).toMatch(
        /^ {2}-- {4}table shedlock_runs \(run history\): does not exist \(optional: shedlock history and status read it\); create it with: shedlock init --url sqlite:\S+ --runs-table shedlock_runs$/m,
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    const asked = await cli(['doctor', '--url', POSTGRES_URL, '--table', lockTable, '--runs-table', missing, '--json'])
    expect(asked.code).toBe(1)
    expect(JSON.parse(asked.stdout).checks).toContainEqual({
      label: `table ${missing} (run history)`,
      status: 'fail',
      detail: `does not exist; create it with: shedlock init --url ${POSTGRES_URL} --table ${lockTable} --runs-table ${missing}`,
    })
  })
})

describe('an unknown command', () => {
  it.each([
    ['stauts', 'status'],
    ['hsitory', 'history'],
    ['lst', 'list'],
    ['unlok', 'unlock'],
    ['Doctor', 'doctor'],
  ])('shedlock %s: did you mean "%s"?', async (typed, meant) => {
    const run = await cli([typed])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe(`shedlock: unknown command "${typed}"; did you mean "${meant}"? (see shedlock --help)\n`)
  })

  it('far from every command: no guess', async () => {
    const run = await cli(['frobnicate'])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe('shedlock: unknown command "frobnicate" (see shedlock --help)\n')
  })
})
