import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { STORES } from '../../src/providers/registry.ts'
import { cli } from './support/cli.ts'

// The CLI in scripts: JSON output, exit codes a script can tell apart, errors in the words of the
// command line, help that fits a terminal. Against SQLite files (the built bin, as users run it).
const temp = mkdtempSync(join(tmpdir(), 'shedlock-cli-scripting-'))
afterAll(() => rmSync(temp, { recursive: true, force: true }))
const noUrl = { SHEDLOCK_URL: undefined }
const COMMANDS = [
  'run',
  'list',
  'unlock',
  'pause',
  'resume',
  'trigger',
  'history',
  'status',
  'dashboard',
  'doctor',
  'init',
  'schema',
  'demo',
]

async function sqliteStore(name: string): Promise<string> {
  const url = `sqlite:${join(temp, `${name}.db`)}`
  const init = await cli(['init', '--url', url])
  expect(init.code, init.stderr).toBe(0)
  return url
}

describe('help', () => {
  it('every help text fits 80 columns', async () => {
    for (const args of [['--help'], ...COMMANDS.map((c) => [c, '--help'])]) {
      const run = await cli(args, { env: noUrl })
      expect(run.code).toBe(0)
      const wide = run.stdout.split('\n').filter((line) => line.length > 80)
      expect(wide, args.join(' ')).toEqual([])
    }
  })

  it('shedlock help COMMAND shows it; an unknown topic is a usage error (exit 2)', async () => {
    const known = await cli(['help', 'doctor'])
    expect(known.code).toBe(0)
    expect(known.stdout).toMatch(/^Usage: shedlock doctor/)
    for (const topic of ['nope', 'demo-worker']) {
      const unknown = await cli(['help', topic])
      expect(unknown.code).toBe(2)
      expect(unknown.stdout).toBe('')
      expect(unknown.stderr).toBe(`shedlock: no help on "${topic}": give a command, one of ${COMMANDS.join(', ')}\n`)
    }
  })

  it('shows one URL form per scheme, the same in shedlock --help and docs/cli.md', async () => {
    const help = (await cli(['--help'])).stdout
    const docs = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8')
    for (const store of STORES) {
      expect(help).toContain(`  ${store.urlForm}`)
      expect(docs).toContain(`| \`${store.urlForm}\``)
    }
    expect(help).not.toContain('sqlite:///')
    expect(docs).not.toContain('sqlite:///')
  })
})

describe('errors name the flags, not the library options', () => {
  it.each([
    [
      ['--lock-at-most-for', '1s', '--lock-at-least-for', '5s'],
      'shedlock run: Lock "x": --lock-at-least-for (5s) is longer than --lock-at-most-for (1s); make --lock-at-most-for at least as long as --lock-at-least-for (see shedlock run --help)\n',
    ],
    [['--lock-at-most-for', '0'], /^shedlock run: Lock "x": --lock-at-most-for is 0, so /],
  ])('run %j', async (options, expected) => {
    const run = await cli(['run', '--url', 'sqlite::memory:', '--name', 'x', ...options, '--', 'true'])
    expect(run.code).toBe(2)
    if (typeof expected === 'string') expect(run.stderr).toBe(expected)
    else expect(run.stderr).toMatch(expected)
    expect(run.stderr).not.toMatch(/lockAt(Most|Least)For/)
  })

  it('a bad --table says --table, a blank --name says --name', async () => {
    const table = await cli(['list', '--url', `sqlite:${join(temp, 'none.db')}`, '--table', 'a b'])
    expect(table.code).toBe(2)
    expect(table.stderr).toMatch(/^shedlock list: sqlite: --table "a b" is not a plain SQL identifier/)
    const name = await cli(['run', '--url', 'sqlite::memory:', '--name', ' ', '--lock-at-most-for', '1m', '--', 'true'])
    expect(name.code).toBe(2)
    expect(name.stderr).toMatch(/^shedlock run: --name " " is blank/)
  })
})

describe('shedlock run when skipped', () => {
  const hold = (url: string, name: string) =>
    cli(['run', '--url', url, '--name', name, '--lock-at-most-for', '1m', '--lock-at-least-for', '1m', '--', 'true'])

  it('--skipped-exit-code N: a skip exits N, a run keeps the command exit code', async () => {
    const url = await sqliteStore('exit-code')
    const first = await cli([
      'run',
      '--url',
      url,
      '--name',
      'job',
      '--lock-at-most-for',
      '1m',
      '--lock-at-least-for',
      '1m',
      '--skipped-exit-code',
      '75',
      '--',
      process.execPath,
      '-e',
      'process.exit(0)',
    ])
    expect(first.code, first.stderr).toBe(0)
    const skipped = await cli([
      'run',
      '--url',
      url,
      '--name',
      'job',
      '--lock-at-most-for',
      '1m',
      '--skipped-exit-code',
      '75',
      '--',
      'true',
    ])
    expect(skipped.code).toBe(75)
    expect(skipped.stdout).toMatch(/^skipped: lock "job" is held by /)
    const defaulted = await cli(['run', '--url', url, '--name', 'job', '--lock-at-most-for', '1m', '--', 'true'])
    expect(defaulted.code).toBe(0)
  })

  it.each([['-1'], ['256'], ['x']])('--skipped-exit-code=%s is a usage error', async (value) => {
    const run = await cli([
      'run',
      '--url',
      'sqlite::memory:',
      '--name',
      'x',
      '--lock-at-most-for',
      '1m',
      `--skipped-exit-code=${value}`,
      '--',
      'true',
    ])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('--skipped-exit-code must be a whole number from 0 to 255')
  })

  it('--json: the skip as one JSON line, with the holder', async () => {
    const url = await sqliteStore('json')
    expect((await hold(url, 'report')).code).toBe(0)
    const run = await cli(['run', '--url', url, '--name', 'report', '--lock-at-most-for', '1m', '--json', '--', 'true'])
    expect(run.code).toBe(0)
    expect(run.stdout.split('\n')).toHaveLength(2)
    const skip = JSON.parse(run.stdout) as Record<string, unknown>
    expect(skip).toMatchObject({ skipped: true, reason: 'held', name: 'report', slot: null })
    expect(skip.lockedBy).toMatch(/^\S+:\d+:[0-9a-f]+$/)
    expect(Date.parse(skip.lockUntil as string) - Date.parse(skip.lockedAt as string)).toBe(60_000)
  })

  it('--json with --slot: reason slot-done and the slot', async () => {
    const url = await sqliteStore('json-slot')
    const args = [
      'run',
      '--url',
      url,
      '--name',
      'nightly',
      '--lock-at-most-for',
      '1m',
      '--slot',
      '2026-11-24T02:00:00Z',
      '--json',
      '--',
    ]
    expect((await cli([...args, 'true'])).code).toBe(0)
    const run = await cli([...args, 'true'])
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual({
      skipped: true,
      reason: 'slot-done',
      name: 'nightly',
      slot: '2026-11-24T02:00:00.000Z',
      lockedBy: null,
      lockedAt: null,
      lockUntil: null,
    })
  })

  it('--json and --quiet contradict each other', async () => {
    const run = await cli([
      'run',
      '--url',
      'sqlite::memory:',
      '--name',
      'x',
      '--lock-at-most-for',
      '1m',
      '--json',
      '--quiet',
      '--',
      'true',
    ])
    expect(run.code).toBe(2)
    expect(run.stderr).toMatch(/--quiet and --json contradict each other/)
  })
})

describe('shedlock init --json', () => {
  it('says what it did, then that there was nothing to do', async () => {
    const url = `sqlite:${join(temp, 'init-json.db')}`
    const first = await cli(['init', '--url', url, '--json'])
    expect(first.code, first.stderr).toBe(0)
    const created = JSON.parse(first.stdout) as { store: string; kind: string; done: string[] }
    expect(created.kind).toBe('SQLite')
    expect(created.done).toContain('created table shedlock')
    const again = JSON.parse((await cli(['init', '--url', url, '--json'])).stdout) as { done: string[] }
    expect(again.done[0]).toMatch(/^table shedlock already exists: nothing to do/)
  })
})

describe('shedlock unlock --json', () => {
  it('one document with the result and the record as it was; then not-held', async () => {
    const url = await sqliteStore('unlock-json')
    // Held for an hour after a run that ends at once (lockAtLeastFor).
    const hold = await cli([
      'run',
      '--url',
      url,
      '--name',
      'nightly',
      '--lock-at-most-for',
      '2h',
      '--lock-at-least-for',
      '1h',
      '--',
      'true',
    ])
    expect(hold.code, hold.stderr).toBe(0)
    const run = await cli(['unlock', '--url', url, '--name', 'nightly', '--yes', '--json'])
    expect(run.code, run.stderr).toBe(0)
    const released = JSON.parse(run.stdout) as {
      name: string
      result: string
      lock: { state: string; lockedBy: string | null; remainingMs: number | null }
    }
    expect(released.name).toBe('nightly')
    expect(released.result).toBe('released')
    expect(released.lock.state).toBe('held')
    expect(released.lock.lockedBy).toMatch(/\S/)
    expect(released.lock.remainingMs).toBeGreaterThan(50 * 60_000)
    const again = await cli(['unlock', '--url', url, '--name', 'nightly', '--yes', '--json'])
    expect(again.code, again.stderr).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ name: 'nightly', result: 'not-held', lock: { state: 'free' } })
  })

  it('takes the lock as NAME, as history takes its task (--name NAME works too; after --, a NAME may start with -)', async () => {
    const url = await sqliteStore('unlock-positional')
    for (const name of ['nightly', '-odd']) {
      const hold = await cli([
        'run',
        '--url',
        url,
        `--name=${name}`,
        '--lock-at-most-for',
        '2h',
        '--lock-at-least-for',
        '1h',
        '--',
        'true',
      ])
      expect(hold.code, hold.stderr).toBe(0)
    }
    const byName = await cli(['unlock', 'nightly', '--url', url, '--yes', '--json'])
    expect(byName.code, byName.stderr).toBe(0)
    expect(JSON.parse(byName.stdout)).toMatchObject({ name: 'nightly', result: 'released', lock: { state: 'held' } })
    const odd = await cli(['unlock', '--url', url, '--yes', '--', '-odd'])
    expect(odd.code, odd.stderr).toBe(0)
    expect(odd.stdout).toMatch(/^lock "-odd" is held by .*\nreleased lock "-odd"\n$/)
    const flag = await cli(['unlock', '--url', url, '--name', 'nightly', '--yes', '--json'])
    expect(JSON.parse(flag.stdout)).toMatchObject({ name: 'nightly', result: 'not-held' })
  })

  it('a missing lock is an error on stderr, exit 1, nothing on stdout', async () => {
    const url = await sqliteStore('unlock-json-missing')
    const run = await cli(['unlock', '--url', url, '--name', 'never', '--yes', '--json'])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toMatch(/no lock named "never"/)
  })
})

describe('shedlock doctor --json', () => {
  it('one document: store, healthy and every check; exit 0 when healthy', async () => {
    const url = await sqliteStore('doctor')
    const run = await cli(['doctor', '--url', url, '--json'])
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout) as {
      store: string
      healthy: boolean
      checks: { label: string; status: string; detail: string }[]
    }
    expect(report.store).toBe(url)
    expect(report.healthy).toBe(true)
    expect(report.checks.map((c) => c.label)).toContain('write')
    for (const check of report.checks) expect(['ok', 'warn', 'skip']).toContain(check.status)
  })

  it('exit 1 and healthy: false when a check fails', async () => {
    const url = `sqlite:${join(temp, 'doctor-no-table.db')}`
    // init creates the file and the table; another table name is missing in it.
    expect((await cli(['init', '--url', url])).code).toBe(0)
    const run = await cli(['doctor', '--url', url, '--table', 'missing_table', '--json'])
    expect(run.code).toBe(1)
    const report = JSON.parse(run.stdout) as { healthy: boolean; checks: { status: string }[] }
    expect(report.healthy).toBe(false)
    expect(report.checks.some((c) => c.status === 'fail')).toBe(true)
  })
})
