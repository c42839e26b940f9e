import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { loadSqliteDriver } from '../../src/providers/sqlite/driver.ts'
import { sqliteLockProvider, sqliteRunLedger } from '../../src/providers/sqlite/index.ts'
import { cli, lines } from './support/cli.ts'

// What a terminal acts on: C0 controls but the line feed, DEL, C1 controls (U+009B is CSI), the
// Unicode line separators and the bidirectional controls.
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/

// Written to the store by a hostile writer: retitles the terminal, clears it, forges a line,
// colours through an 8-bit CSI, and reverses the text after it.
const NODE = 'n1\x1b]0;owned\x07\x1b[2J\nFAKE node line'
const MESSAGE = 'boom\x1b[2J\r\nFAKE error line\u009b31m red\u202e desrever'
const TASK = 'evil\x1b[1A\nFAKE task line'
const HOLDER = 'h\x1b]0;owned\x07\x1b[2J\u202e'

const driver = await loadSqliteDriver()

describe('a ledger and a lock table written by a hostile writer: no control character reaches the terminal', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-hostile-'))
  const file = join(dir, 'locks.db')
  const store = ['--url', `sqlite:${file}`]

  beforeAll(async () => {
    expect((await cli(['init', ...store])).code).toBe(0)
    const database = driver.open(file)
    try {
      const ledger = sqliteRunLedger({ database })
      const at = new Date(Date.now() - 60_000)
      for (const name of ['report', 'other']) {
        await ledger.record({
          name,
          slot: undefined,
          node: 'n1',
          startedAt: at,
          finishedAt: at,
          outcome: 'failed',
          durationMs: 5,
          error: { type: 'Error', message: 'plain' },
        })
      }
      // Past what the library writes: the raw columns, as any SQL client may set them.
      database
        .prepare('UPDATE shedlock_runs SET node = ?, error_message = ? WHERE name = ?')
        .run(NODE, MESSAGE, 'report')
      database.prepare('UPDATE shedlock_runs SET name = ? WHERE name = ?').run(TASK, 'other')
      const lock = await sqliteLockProvider({ database }).lock(
        lockConfiguration({ name: 'plain', lockAtMostFor: 600_000 }),
      )
      expect(lock).toBeDefined()
      database
        .prepare('INSERT INTO shedlock SELECT ?, lock_until, locked_at, ? FROM shedlock WHERE name = ?')
        .run(TASK, HOLDER, 'plain')
    } finally {
      database.close()
    }
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it.each([['history', 'report'], ['history', '--', TASK], ['status'], ['list']])(
    'shedlock %s: every control character printed as a visible escape, no forged line',
    async (...args) => {
      const [command, ...rest] = args
      const run = await cli([command!, ...store, ...rest])
      // status exits 1: both tasks failed.
      expect(run.code, run.stderr).toBe(command === 'status' ? 1 : 0)
      expect(run.stderr).not.toMatch(RAW_CONTROL)
      expect(run.stdout).not.toMatch(RAW_CONTROL)
      expect(run.stdout).not.toMatch(/^FAKE/m)
      expect(run.stdout).toMatch(/\\u001b/)
    },
  )

  it('history and status show what the store holds, escaped: \\u001b for ESC, \\n for a line feed', async () => {
    const history = await cli(['history', 'report', ...store])
    expect(history.stdout).toContain('n1\\u001b]0;owned\\u0007\\u001b[2J\\nFAKE node line')
    expect(history.stdout).toContain('Error: boom\\u001b[2J\\r\\nFAKE error line\\u009b31m red\\u202e desrever')
    // One heading, a blank line, the table's header and its one row.
    expect(lines(history.stdout)).toHaveLength(4)
    const status = await cli(['status', ...store])
    expect(status.stdout).toContain('evil\\u001b[1A\\nFAKE task line')
  })

  it('--json documents parse to the stored values, with no raw C1 or bidirectional control either', async () => {
    const history = await cli(['history', 'report', ...store, '--json'])
    expect(history.stdout).not.toMatch(RAW_CONTROL)
    const run = JSON.parse(history.stdout).runs[0]
    expect(run).toMatchObject({ node: NODE, error: { type: 'Error', message: MESSAGE } })
    const status = await cli(['status', ...store, '--json'])
    expect(status.stdout).not.toMatch(RAW_CONTROL)
    expect(JSON.parse(status.stdout).tasks.map((task: { name: string }) => task.name)).toEqual([TASK, 'report'])
    const list = await cli(['list', ...store, '--json'])
    expect(list.stdout).not.toMatch(RAW_CONTROL)
    expect(JSON.parse(list.stdout).locks).toContainEqual(expect.objectContaining({ name: TASK, lockedBy: HOLDER }))
  })

  it('unlock names the holder escaped', async () => {
    const run = await cli(['unlock', ...store, '--name', TASK, '--yes'])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout + run.stderr).not.toMatch(RAW_CONTROL)
    expect(run.stdout).toContain('held by h\\u001b]0;owned\\u0007\\u001b[2J\\u202e since ')
  })
})
