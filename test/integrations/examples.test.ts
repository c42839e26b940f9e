import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { connectOrSkip } from '../helpers/backends.ts'
import { ensureNestjsBuilt, tsc } from './support/build.ts'
import { runProofProcess, stderrErrors } from './support/proof.ts'
import { killStartedProcesses } from '../helpers/processes.ts'

// Keeps examples/ working: compiles them with tsc (as `npm run example` does), then runs each one
// twice at once for a few seconds over one store, as a user would in two terminals. Needs the
// built package (`npm run build`); builds @shedlock/nestjs unless its build is up to date.
const root = fileURLToPath(new URL('../../', import.meta.url))
const examples = readdirSync(join(root, 'examples'))
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.slice(0, -3))
const RUN_MS = 3_000
const LINE = /^\[(\d+)\] (\d\d:\d\d:\d\d) (ran|skipped)\b/gm
const POSTGRES_URL = process.env.SHEDLOCK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const dirs: string[] = []

afterEach(killStartedProcesses)
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

beforeAll(async () => {
  if (!existsSync(join(root, 'dist/index.js'))) throw new Error('dist/ is missing: run "npm run build" first')
  await ensureNestjsBuilt()
  const { code, output } = await tsc(join(root, 'examples/tsconfig.json'))
  expect(output).toBe('')
  expect(code).toBe(0)
}, 120_000)

it('examples/ holds the five documented examples', () => {
  expect([...examples].sort()).toEqual([
    'cron-sqlite',
    'croner-sqlite',
    'nestjs-postgres',
    'node-cron-sqlite',
    'node-schedule-sqlite',
  ])
})

describe.each(examples)('example %s', (example) => {
  it('runs: two processes at once share the job, one runs it and the other skips it', async (context) => {
    const env: Record<string, string> = { EXAMPLE_RUN_MS: String(RUN_MS) }
    if (example.endsWith('-sqlite')) {
      const dir = mkdtempSync(join(tmpdir(), `shedlock-example-${example}-`))
      dirs.push(dir)
      env.SHEDLOCK_SQLITE = join(dir, 'locks.db')
    } else {
      const reachable = await connectOrSkip('postgres', POSTGRES_URL, async () => {
        const client = new pg.Client({ connectionString: POSTGRES_URL })
        await client.connect()
        await client.end()
        return true
      })
      if (!reachable) return context.skip()
      env.DATABASE_URL = POSTGRES_URL
    }
    const script = join(root, `examples/dist/${example}.js`)
    const runs = await Promise.all(['one', 'two'].map((node) => runProofProcess(script, node, env, RUN_MS + 15_000)))
    const lines: Array<{ pid: string; time: string; what: string }> = []
    for (const run of runs) {
      expect(stderrErrors(run), `stderr of ${example} (${run.node}), stdout:\n${run.stdout}`).toEqual([])
      expect(run.code, `exit code of ${example} (${run.node})`).toBe(0)
      for (const [, pid, time, what] of run.stdout.matchAll(LINE)) lines.push({ pid: pid!, time: time!, what: what! })
    }
    // Whether a second ran exactly once is for the multi-process proofs, which know when each
    // process was up; here two processes that overlap must share the work.
    const output = runs.map((r) => `${r.node}:\n${r.stdout}`).join('\n')
    expect(lines.filter((l) => l.what === 'ran').length, `no process ran the job\n${output}`).toBeGreaterThanOrEqual(1)
    expect(
      lines.some((l) => l.what === 'skipped'),
      `no process ever skipped\n${output}`,
    ).toBe(true)
  }, 30_000)
})
