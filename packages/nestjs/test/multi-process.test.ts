import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { postgresSchema } from 'shedlock/postgres'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { connectOrSkip, uniqueTable } from '../../../test/helpers/backends.ts'
import { ensureNestjsBuilt, tsc } from '../../../test/integrations/support/build.ts'
import {
  analyse,
  countDoubleRuns,
  readLedger,
  runProofProcess,
  stderrErrors,
  summary,
} from '../../../test/integrations/support/proof.ts'
import { killStartedProcesses } from '../../../test/helpers/processes.ts'

// Three processes of a NestJS app (test/fixtures/proof-app/main.ts, compiled here with tsc for
// its decorator metadata) share one PostgreSQL database, with @Cron jobs every second for 6 s:
// each locked job must run every tick of the window exactly once, never overlapping. Needs the
// built shedlock package (`npm run build`); builds @shedlock/nestjs (unless up to date) and the app.
const RUN_MS = 6_000
const NODES = ['a', 'b', 'c']
const URL_ = process.env.SHEDLOCK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const appDir = fileURLToPath(new URL('fixtures/proof-app', import.meta.url))

let pool: pg.Pool | undefined
const tables: string[] = []
const dirs: string[] = []

beforeAll(async () => {
  pool = await connectOrSkip('postgres', URL_, async () => {
    const p = new pg.Pool({ connectionString: URL_, max: 2 })
    await p.query('SELECT 1')
    return p
  })
  // The package (unless its build is up to date), then the app that imports it, with tsc.
  await ensureNestjsBuilt()
  const { code, output } = await tsc(join(appDir, 'tsconfig.json'))
  expect(output).toBe('')
  expect(code).toBe(0)
}, 120_000)

afterEach(killStartedProcesses)
afterAll(async () => {
  for (const table of tables) await pool?.query(`DROP TABLE IF EXISTS ${table}`)
  await pool?.end()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe('@nestjs/schedule: three processes over one PostgreSQL database', () => {
  it('run every tick of each locked job exactly once, never twice, never overlapping; forRootAsync, per-method providers and both decorator orders', async (context) => {
    if (!pool) return context.skip()
    const [table, tableB] = [uniqueTable('shedlock_nest'), uniqueTable('shedlock_nest_b')]
    tables.push(table, tableB)
    await pool.query(postgresSchema({ tableName: table }))
    await pool.query(postgresSchema({ tableName: tableB }))
    const dir = mkdtempSync(join(tmpdir(), 'shedlock-proof-nestjs-'))
    dirs.push(dir)
    const ledger = join(dir, 'ledger.jsonl')
    const prefix = `proof-${randomUUID().slice(0, 8)}`
    const env = {
      PROOF_DATABASE_URL: URL_,
      PROOF_TABLE: table,
      PROOF_TABLE_B: tableB,
      PROOF_PREFIX: prefix,
      PROOF_LEDGER: ledger,
      PROOF_RUN_MS: String(RUN_MS),
    }

    const runs = await Promise.all(
      NODES.map((node) =>
        runProofProcess(join(appDir, 'dist/main.js'), node, { ...env, PROOF_NODE: node }, RUN_MS + 20_000),
      ),
    )
    countDoubleRuns(() => {
      const records = readLedger(ledger)
      return ['below', 'above'].map((job) =>
        analyse(
          records.filter((r) => r.job === job),
          runs,
        ),
      )
    })
    for (const run of runs) {
      expect(stderrErrors(run), `stderr of node ${run.node}`).toEqual([])
      expect(run.code, `exit code of node ${run.node}\n${run.stdout}`).toBe(0)
      expect(run.stdout).toContain('stopped')
    }

    const records = readLedger(ledger)
    for (const job of ['below', 'above']) {
      const report = analyse(
        records.filter((r) => r.job === job),
        runs,
      )
      console.log(summary(`@nestjs/schedule, job "${job}"`, report))
      expect(report.window.length, 'ticks in the window').toBeGreaterThanOrEqual(3)
      expect(report.duplicates, `${job}: ticks that ran twice`).toEqual([])
      expect(report.missing, `${job}: ticks of the window that never ran`).toEqual([])
      expect(report.overlaps, `${job}: runs that overlapped`).toEqual([])
      expect(report.unlocked, `${job}: runs where assertLocked() failed`).toBe(0)
    }

    // The control: an in-memory provider coordinates nothing, so each process ran each tick.
    const local = records.filter((r) => r.job === 'local')
    const report = analyse(local, runs)
    console.log(summary('@nestjs/schedule, job "local" (in-memory, the control)', report))
    for (const tick of report.window)
      expect(
        local
          .filter((r) => r.tick === tick)
          .map((r) => r.node)
          .sort(),
        `local, tick ${tick}`,
      ).toEqual(NODES)

    // Each job's lock lives in the table of the provider it chose.
    const names = async (t: string) =>
      (await pool!.query<{ name: string }>(`SELECT name FROM ${t} ORDER BY name`)).rows.map((r) => r.name)
    expect(await names(table)).toEqual([`${prefix}-below`])
    expect(await names(tableB)).toEqual([`${prefix}-above`])
  }, 45_000)
})
