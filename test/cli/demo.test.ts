import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { noDoubleRunInAnyAttempt } from '../helpers/double-runs.ts'
import { startCli, waitFor } from './support/cli.ts'

const TICK_LINE = /^\d\d:\d\d:\d\d {2}(.*)$/gm
const HAS_TICK = /^\d\d:\d\d:\d\d {2}/m

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

const dbDirs: string[] = []
afterAll(() => {
  for (const dir of dbDirs) rmSync(dir, { recursive: true, force: true })
})

/** The demo's own temporary folder, named in its first line; undefined for a --db file. */
function demoFolder(stdout: string): string | undefined {
  const db = /^shedlock demo: .* share the SQLite file (.+) \((?:node:sqlite|better-sqlite3|libsql)\)\.$/m.exec(
    stdout,
  )?.[1]
  return db?.includes('shedlock-demo-') ? dirname(db) : undefined
}

/** Starts `node dist/cli/main.js ...args`; `output()` is what it printed so far. */
function start(args: string[]): { child: ChildProcess; done: Promise<Run>; output: () => string } {
  const started = startCli(args)
  const done = started.done.then((run) => {
    // Removed by the demo; by the tests too when a demo killed with SIGKILL could not.
    const folder = demoFolder(run.stdout)
    if (folder !== undefined) dbDirs.push(folder)
    return run
  })
  return { child: started.child, done, output: started.stdout }
}

async function cli(...args: string[]): Promise<Run> {
  return start(args).done
}

/** A number of the demo's summary, or undefined when the demo printed none. */
function summaryNumberOrUndefined(stdout: string, label: string): number | undefined {
  const match = new RegExp(`^ *${label}: (\\d+)`, 'm').exec(stdout)
  return match ? Number(match[1]) : undefined
}

function summaryNumber(stdout: string, label: string): number {
  const n = summaryNumberOrUndefined(stdout, label)
  if (n === undefined) throw new Error(`no "${label}" in the summary:\n${stdout}`)
  return n
}

/** The checker's duplicate count, or 0 when the demo printed no summary (the checks that follow say why). */
function duplicatesIn(stdout: string): number {
  return summaryNumberOrUndefined(stdout, 'duplicates') ?? 0
}

function workerPids(stdout: string): number[] {
  return [...stdout.matchAll(/\(pid (\d+)\)/g)].map((m) => Number(m[1]))
}

/** Alive and not a zombie waiting for a reaper. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return true
  }
}

describe('shedlock demo', () => {
  it('three processes share one SQLite file: every tick runs exactly once, no duplicates, exit 0', async () => {
    const run = await cli('demo', '--seconds', '4')
    noDoubleRunInAnyAttempt('duplicates', duplicatesIn(run.stdout))
    expect(run.stderr).toBe('')
    expect(run.code, run.stdout).toBe(0)
    const ticks = [...run.stdout.matchAll(TICK_LINE)].map((m) => m[1]!)
    expect(ticks.length).toBeGreaterThanOrEqual(3)
    for (const line of ticks) {
      expect(line.match(/node-\d ran/g), line).toHaveLength(1)
      expect(line.match(/node-\d skipped/g), line).toHaveLength(2)
    }
    expect(workerPids(run.stdout)).toHaveLength(3)
    expect(run.stdout).toContain('duplicates: 0')
    expect(summaryNumber(run.stdout, 'ticks')).toBe(4)
    expect(summaryNumber(run.stdout, 'executions')).toBe(4)
    expect(summaryNumber(run.stdout, 'skips')).toBe(8)
    expect(summaryNumber(run.stdout, 'missed ticks')).toBe(0)
    expect(summaryNumber(run.stdout, 'errors')).toBe(0)
    expect(run.stdout).toMatch(/^ +db: .+demo\.db \(temporary: removed as the demo exits\)$/m)
    expect(existsSync(demoFolder(run.stdout)!)).toBe(false)
  }, 30_000)

  it('--db PATH: the file is kept, and named without "temporary" in the summary', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'shedlock-test-demo-db-'))
    dbDirs.push(folder)
    const db = join(folder, 'mine.db')
    const run = await cli('demo', '--seconds', '1', '--nodes', '2', '--db', db)
    expect(run.code, run.stdout).toBe(0)
    expect(run.stdout.split('\n')).toContain(`${'db'.padStart(14)}: ${db}`)
    expect(existsSync(db)).toBe(true)
  }, 30_000)

  it('--no-lock runs the task without shedlock: the checker reports duplicates and exits 1', async () => {
    const run = await cli('demo', '--seconds', '2', '--no-lock')
    expect(run.code, run.stdout).toBe(1)
    expect(summaryNumber(run.stdout, 'duplicates')).toBeGreaterThan(0)
    expect(summaryNumber(run.stdout, 'executions')).toBe(6)
    expect(run.stdout).toContain('DUPLICATE')
    expect(run.stdout).toMatch(/^FAILED: \d+ duplicates/m)
  }, 30_000)

  it('Ctrl-C stops every node, prints the summary and exits 130, leaving no process behind', async () => {
    const { child, done, output } = start(['demo', '--seconds', '60'])
    expect(await waitFor(() => HAS_TICK.test(output()) || child.exitCode !== null, 15_000), output()).toBe(true)
    const pids = workerPids(output())
    expect(pids).toHaveLength(3)
    child.kill('SIGINT')
    const run = await done
    noDoubleRunInAnyAttempt('duplicates', duplicatesIn(run.stdout))
    expect(run.code, run.stdout).toBe(130)
    expect(run.stdout).toContain('Interrupted')
    expect(run.stdout).toContain('duplicates: 0')
    expect(pids.filter(isAlive)).toEqual([])
    expect(existsSync(demoFolder(run.stdout)!), 'the temporary folder is removed').toBe(false)
  }, 30_000)

  it('SIGTERM stops it as Ctrl-C does: exit 143, its temporary folder removed', async () => {
    const { child, done, output } = start(['demo', '--seconds', '60'])
    expect(await waitFor(() => HAS_TICK.test(output()) || child.exitCode !== null, 15_000), output()).toBe(true)
    const folder = demoFolder(output())
    expect(folder !== undefined && existsSync(folder), output()).toBe(true)
    child.kill('SIGTERM')
    const run = await done
    expect(run.code, run.stdout).toBe(143)
    expect(run.stdout).toContain('Interrupted')
    expect(existsSync(folder!)).toBe(false)
  }, 30_000)

  it('a node whose parent dies (kill -9) stops by itself', async () => {
    const { child, done, output } = start(['demo', '--seconds', '60'])
    expect(await waitFor(() => workerPids(output()).length === 3 || child.exitCode !== null, 15_000), output()).toBe(
      true,
    )
    const pids = workerPids(output())
    child.kill('SIGKILL')
    await done
    expect(
      await waitFor(() => pids.every((pid) => !isAlive(pid)), 5_000),
      `still running: ${pids.filter(isAlive).join(', ')}`,
    ).toBe(true)
  }, 30_000)
})

describe('shedlock command line', () => {
  it('--help lists the commands and the exit codes; --version prints the package version', async () => {
    const help = await cli('--help')
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/^Usage: shedlock <command>/m)
    expect(help.stdout).toMatch(/^ {2}demo {2}/m)
    expect(help.stdout).toContain('Exit codes: 0 ok, 1 failure, 2 usage error')
    expect(help.stdout).not.toContain('__demo-worker')
    const version = await cli('--version')
    expect(version.code).toBe(0)
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    expect(version.stdout).toBe(`${pkg.version}\n`)
  })

  it('demo --help describes the options without running anything', async () => {
    const run = await cli('demo', '--help')
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^Usage: shedlock demo \[--db PATH\] \[--seconds N\] \[--nodes N\]/)
    expect(run.stdout).not.toContain('no-lock')
    expect(run.stdout).not.toContain('Summary')
  })

  it.each([
    [['demo', '--bogus'], /^shedlock demo: unknown option "--bogus" \(see shedlock demo --help\)\n$/],
    [['demo', '--secnds', '3'], /^shedlock demo: unknown option "--secnds"; did you mean "--seconds"\?/],
    [['demo', '--seconds', 'abc'], /^shedlock demo: --seconds must be a whole number/],
    [['demo', '--nodes', '0'], /^shedlock demo: --nodes must be a whole number from 1/],
    [['demo', 'extra'], /^shedlock demo: unexpected argument "extra": this command takes options only/],
    [['frobnicate'], /^shedlock: unknown command "frobnicate"/],
    [['--frobnicate'], /^shedlock: unknown option "--frobnicate" \(see shedlock --help\)\n$/],
    [['--hlep'], /^shedlock: unknown option "--hlep"; did you mean "--help"\? \(see shedlock --help\)\n$/],
  ])('%j is a usage error: one line on stderr, exit 2', async (args, message) => {
    const run = await cli(...args)
    expect(run.code).toBe(2)
    expect(run.stdout).toBe('')
    expect(run.stderr).toMatch(message)
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1)
  })

  it('no command prints the help on stderr and exits 2', async () => {
    const run = await cli()
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('Usage: shedlock <command>')
  })
})
