import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { analyse, countDoubleRuns, readLedger, runProofProcess, stderrErrors, summary } from './support/proof.ts'
import { killStartedProcesses } from '../helpers/processes.ts'

// Three processes of a small app per scheduler, sharing one SQLite file, a job every second for
// 6 s: every tick of the window must run exactly once, on some node, never overlapping. The apps
// import the built package (`npm test` builds first; while developing, `npm run build`).
const RUN_MS = 6_000
const NODES = ['a', 'b', 'c']
const dist = fileURLToPath(new URL('../../dist/', import.meta.url))
const dirs: string[] = []

afterEach(killStartedProcesses)
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe.each(['node-cron', 'croner', 'cron', 'node-schedule'])('%s: three processes over one SQLite file', (app) => {
  it('run every tick exactly once, never twice, never overlapping', async () => {
    for (const file of ['index.js', 'providers/sqlite/index.js', 'integrations/node-cron.js']) {
      if (!existsSync(join(dist, file))) throw new Error(`dist/${file} is missing: run "npm run build" first`)
    }
    const dir = mkdtempSync(join(tmpdir(), `shedlock-proof-${app}-`))
    dirs.push(dir)
    const ledger = join(dir, 'ledger.jsonl')
    const env = {
      PROOF_DB: join(dir, 'locks.db'),
      PROOF_LEDGER: ledger,
      PROOF_LOCK: `proof-${app}-${randomUUID()}`,
      PROOF_RUN_MS: String(RUN_MS),
    }
    const script = fileURLToPath(new URL(`../fixtures/apps/${app}.mjs`, import.meta.url))

    const runs = await Promise.all(
      NODES.map((node) => runProofProcess(script, node, { ...env, PROOF_NODE: node }, RUN_MS + 15_000)),
    )
    countDoubleRuns(() => [analyse(readLedger(ledger), runs)])
    for (const run of runs) {
      expect(stderrErrors(run), `stderr of node ${run.node}`).toEqual([])
      expect(run.code, `exit code of node ${run.node}\n${run.stdout}`).toBe(0)
      expect(run.stdout).toContain('stopped')
    }

    const records = readLedger(ledger)
    const report = analyse(records, runs)
    console.log(summary(app, report))
    expect(report.window.length, 'ticks in the window').toBeGreaterThanOrEqual(3)
    expect(report.duplicates, 'ticks that ran twice').toEqual([])
    expect(report.missing, 'ticks of the window that never ran').toEqual([])
    expect(report.overlaps, 'runs that overlapped').toEqual([])
    // node-cron runs the job outside the lock's async context (documented); withLock runs it inside.
    expect(report.unlocked).toBe(app === 'node-cron' ? records.length : 0)
  }, 30_000)
})
