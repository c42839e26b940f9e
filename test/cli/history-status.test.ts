import { afterAll, describe, expect, it } from 'vitest'
import type { RunOutcome } from '../../src/core/run-ledger.ts'
import { postgresRunLedger, postgresRunsSchema, postgresSchema } from '../../src/providers/postgres/index.ts'
import { uniqueTable } from '../support/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../support/sql-pools.ts'
import { cli, lines } from './support/cli.ts'

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
        await ledger.record({ name, slot: undefined, node: 'n', startedAt: at, finishedAt: at, outcome: outcome as 'ok', durationMs: 5, error })
      }
    }
    return ['--url', POSTGRES_URL, '--table', locks, '--runs-table', runs]
  }

  it('a task whose latest finished run failed is failing (N in a row): exit 1, and --json says which', async () => {
    const url = await store({ broken: { outcomes: ['ok', 'failed', 'skipped', 'failed'] }, healed: { outcomes: ['failed', 'ok'] } })
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
    expect(JSON.parse(byDefault.stdout)).toMatchObject({ stale: [], failing: [], ignored: ['renamed'], tasks: [{ name: 'current', state: 'ok' }] })
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
    expect(bad.stderr).toMatch(/^shedlock status: --ignore-older-than "soon": .*use an AGE like 7d, or 0 to leave no task out/)
  })
})
