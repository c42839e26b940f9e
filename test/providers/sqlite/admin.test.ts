import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { parseStoreUrl } from '../../../src/cli/store-url.ts'
import { schema, sqlitePath } from '../../../src/providers/sqlite/admin.ts'
import { loadSqliteDriver } from '../../../src/providers/sqlite/driver.ts'
import { lockConfiguration } from '../../../src/index.ts'
import { sqliteLockProvider, sqliteRunsSchema, sqliteSchema } from '../../../src/providers/sqlite/index.ts'
import { MAIN, waitFor } from '../../cli/support/cli.ts'
import { cliProof } from '../../cli/support/proof.ts'

// The same driver choice as the CLI's: node:sqlite where this Node has it, else better-sqlite3, else libsql.
const driver = await loadSqliteDriver()

describe(`shedlock CLI on SQLite (the built bin; this process: ${driver.name})`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-sqlite-'))
  const file = join(dir, 'locks.db')
  const url = `sqlite:${file}`
  // Opened lazily: the proof's first step, `shedlock init`, creates the file and the table.
  let database: ReturnType<typeof driver.open> | undefined
  const db = (): ReturnType<typeof driver.open> => (database ??= driver.open(file))
  afterAll(() => {
    database?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  cliProof({
    kind: /^SQLite /,
    args: ['--url', url],
    provider: () => sqliteLockProvider({ database: db() }),
    isHeld: async (name) => {
      const statement = db().prepare(
        `SELECT 1 AS held FROM shedlock WHERE name = ? AND lock_until > strftime('%Y-%m-%d %H:%M:%f', 'now')`,
      ) as unknown as {
        all(...params: string[]): unknown[]
      }
      return statement.all(name).length === 1
    },
    init: {
      args: ['--url', `sqlite:///${join(dir, 'fresh.db').slice(1)}`],
      first:
        /: created table shedlock\n.*: created table shedlock_runs \(run history\)\n.*: set journal_mode to WAL \(was delete\)\n$/,
      again:
        /: table shedlock already exists: nothing to do.*\n.*: table shedlock_runs \(run history\) already exists: nothing to do\n.*: journal_mode is already WAL\n$/,
    },
    missingLayout: {
      args: ['--url', url, '--table', 'shedlock_missing'],
      advice: /create it with: shedlock init --url sqlite:\S+ --table shedlock_missing/,
    },
  })

  // util-linux script(1) gives the CLI a terminal, the one place where unlock asks.
  const hasScript = spawnSync('script', ['--version'], { stdio: 'ignore' }).status === 0
  if (!hasScript) console.warn('SKIPPED the interactive unlock cases: script(1) from util-linux is not installed')
  describe.skipIf(!hasScript)('unlock on a terminal', () => {
    /** Runs unlock in a pseudo-terminal, answers the prompt, and resolves to its output and exit code. */
    const unlockAnswering = async (name: string, answer: string): Promise<{ code: number | null; output: string }> => {
      const command = [process.execPath, MAIN, 'unlock', '--url', url, '--name', name]
        .map((word) => `'${word.replace(/'/g, `'\\''`)}'`)
        .join(' ')
      const child = spawn('script', ['-qec', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
      let output = ''
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const closed = new Promise<number | null>((resolve) => child.on('close', resolve))
      expect(await waitFor(() => output.includes('[y/N]'), 10_000), output).toBe(true)
      child.stdin.end(`${answer}\n`)
      return { code: await closed, output }
    }

    it('asks after showing the holder: "n" releases nothing (exit 1), "y" releases the lock (exit 0)', async () => {
      const name = `tty-${process.pid}`
      const lock = await sqliteLockProvider({ database: db() }).lock(lockConfiguration({ name, lockAtMostFor: '5m' }))
      expect(lock).toBeDefined()
      const held = `SELECT 1 FROM shedlock WHERE name = '${name}' AND lock_until > strftime('%Y-%m-%d %H:%M:%f', 'now')`
      const isHeld = (): boolean => (db().prepare(held) as unknown as { all(): unknown[] }).all().length === 1

      const declined = await unlockAnswering(name, 'n')
      expect(declined.code).toBe(1)
      expect(declined.output).toMatch(new RegExp(`lock "${name}" is held by \\S+ since \\S+ until \\S+`))
      expect(declined.output).toContain('Release it? A node may then start the task at once. [y/N]')
      expect(declined.output).toContain('not released')
      expect(isHeld()).toBe(true)

      const confirmed = await unlockAnswering(name, 'y')
      expect(confirmed.code).toBe(0)
      expect(confirmed.output).toContain(`released lock "${name}"`)
      expect(isHeld()).toBe(false)
    })
  })
})

describe('sqlitePath', () => {
  it('reads sqlite:PATH and sqlite:///abs/path', () => {
    expect(sqlitePath(parseStoreUrl('sqlite:./locks.db'))).toBe('./locks.db')
    expect(sqlitePath(parseStoreUrl('sqlite:/var/locks.db'))).toBe('/var/locks.db')
    expect(sqlitePath(parseStoreUrl('sqlite:///var/locks.db'))).toBe('/var/locks.db')
    expect(() => sqlitePath(parseStoreUrl('sqlite:'))).toThrow(/sqlite: URL without a path/)
  })
})

describe('schema', () => {
  it('is the DDL of sqliteSchema(), for the table given or shedlock, then that of sqliteRunsSchema()', () => {
    const runs = `\n-- The run history (optional; shedlock history, shedlock status):\n${sqliteRunsSchema()}`
    expect(schema(undefined)).toBe(sqliteSchema() + runs)
    expect(schema('jobs_lock')).toBe(sqliteSchema({ tableName: 'jobs_lock' }) + runs)
  })
})
