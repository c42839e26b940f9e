import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { waitFor } from '../helpers/processes.ts'

// The CI watchdog (test/helpers/watchdog.ts) on a scratch suite whose files hang on purpose
// (test/helpers/watchdog-fixture: a 3 s limit per file). Without the watchdog each of these runs
// would hang until killed from outside.
const ROOT = new URL('../..', import.meta.url).pathname
const CONFIG = 'test/helpers/watchdog-fixture/vitest.config.ts'
const scratch = mkdtempSync(join(tmpdir(), 'shedlock-watchdog-test-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

interface Run {
  code: number | null
  output: string
  seconds: number
}

/** `vitest run` on the scratch suite, with `args` (file filters, reporters) and `env`. */
function vitest(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const started = Date.now()
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env }
  // This run's own vitest and watchdog must not leak into the inner one.
  for (const name of Object.keys(childEnv)) if (/^VITEST|^SHEDLOCK_WATCHDOG/.test(name)) delete childEnv[name]
  Object.assign(childEnv, env)
  const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', CONFIG, ...args], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (chunk) => {
    output += chunk
  })
  child.stderr.on('data', (chunk) => {
    output += chunk
  })
  // A watchdog that does not fire: fail within the test's time rather than hang the suite.
  const backstop = setTimeout(() => child.kill('SIGKILL'), 45_000)
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(backstop)
      resolve({ code, output, seconds: (Date.now() - started) / 1000 })
    })
  })
}

/** The seconds the watchdog says the file ran, from `the file has run for N s (limit 3 s)`. */
function ranFor(output: string): number {
  const match = /the file has run for (\d+) s \(limit 3 s\)/.exec(output)
  expect(match, output).not.toBeNull()
  return Number(match![1])
}

describe('the CI watchdog', { timeout: 60_000 }, () => {
  test('names the file and the test of an idle hang, within its limit, and kills what the test started', async () => {
    const pidFile = join(scratch, 'child.pid')
    const run = await vitest(['idle'], { WATCHDOG_CHILD_PID_FILE: pidFile })
    expect(run.code, run.output).toBe(1)
    expect(run.output).toContain('hung: idle.hang.ts > waits for a reply that never comes for ')
    expect(ranFor(run.output)).toBeLessThanOrEqual(4)
    const pid = Number(readFileSync(pidFile, 'utf8'))
    const gone = () => {
      try {
        process.kill(pid, 0)
        return false
      } catch {
        return true
      }
    }
    expect(await waitFor(gone, 5000), `the test's child ${pid} outlived the watchdog`).toBe(true)
  })

  test('names a test that blocks its worker, with the command line reporters of .ci/run, and logs it', async () => {
    const log = join(scratch, 'watchdog.log')
    const run = await vitest(
      ['busy', '--reporter=default', '--reporter=json', `--outputFile.json=${join(scratch, 'report.json')}`],
      { SHEDLOCK_WATCHDOG_LOG: log },
    )
    expect(run.code, run.output).toBe(1)
    expect(run.output).toContain('hung: busy.hang.ts > spins without end for ')
    expect(ranFor(run.output)).toBeLessThanOrEqual(4)
    expect(readFileSync(log, 'utf8')).toMatch(/^watchdog: hung: busy\.hang\.ts > spins without end for \d+ s/)
  })

  test('names a beforeAll that never ends, and every other file running', async () => {
    const run = await vitest(['hook', 'idle'])
    expect(run.code, run.output).toBe(1)
    expect(run.output).toMatch(/hung: (hook\.hang\.ts > beforeAll|idle\.hang\.ts > waits for a reply)/)
    expect(run.output).toMatch(/ {2}also running: (hook\.hang\.ts > beforeAll|idle\.hang\.ts > waits for a reply)/)
  })

  test('lets a slow file within its limit pass, and the run end by itself', async () => {
    const run = await vitest(['healthy'])
    expect(run.code, run.output).toBe(0)
    expect(run.output).not.toContain('hung:')
  })
})
