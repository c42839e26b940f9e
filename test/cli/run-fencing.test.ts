import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { commandEnvironment } from '../../src/cli/command-process.ts'
import { runCommand } from '../../src/cli/run.ts'
import { inMemoryLockInspector, inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { postgresSchema } from '../../src/providers/postgres/index.ts'
import type { StoreAdmin } from '../../src/support/store-admin.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { REDIS_URL, redisOrSkip } from '../helpers/kv-clients.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli } from './support/cli.ts'

// shedlock run gives the command its lock's fencing token in SHEDLOCK_FENCING_TOKEN, where the
// store hands out tokens, and no such variable where it does not.

// The in-process runs below open this in-memory store instead of the URL's (an in-memory store
// cannot cross processes); the built bin's runs further down use PostgreSQL and Redis.
const memory = inMemoryLockProvider()
vi.mock('../../src/cli/open-store.ts', () => ({
  withStore: async (_url: unknown, _options: unknown, fn: (store: StoreAdmin) => Promise<unknown>) =>
    fn({
      kind: 'in-memory',
      where: 'this process',
      extensible: true,
      provider: () => memory,
      inspector: inMemoryLockInspector(memory),
      structure: async () => [],
      close: async () => undefined,
    } as unknown as StoreAdmin),
}))

const folder = mkdtempSync(join(tmpdir(), 'shedlock-run-fencing-'))
afterAll(() => rmSync(folder, { recursive: true, force: true }))
let files = 0

/** A command that writes the SHEDLOCK_FENCING_TOKEN it got (or "absent") to a file; its path and arguments. */
function reporter(): { file: string; command: string[] } {
  files += 1
  const file = join(folder, `token-${files}`)
  const code = "require('node:fs').writeFileSync(process.argv[1], process.env.SHEDLOCK_FENCING_TOKEN ?? 'absent')"
  return { file, command: [process.execPath, '-e', code, file] }
}

describe('commandEnvironment', () => {
  it('sets SHEDLOCK_FENCING_TOKEN to the token in decimal, or removes it; the rest is kept', () => {
    const inherited = { PATH: '/bin', SHEDLOCK_FENCING_TOKEN: '999' }
    expect(commandEnvironment(inherited, 12345678901234567890n)).toEqual({
      PATH: '/bin',
      SHEDLOCK_FENCING_TOKEN: '12345678901234567890',
    })
    expect(commandEnvironment(inherited, undefined)).toEqual({ PATH: '/bin' })
    expect(inherited).toEqual({ PATH: '/bin', SHEDLOCK_FENCING_TOKEN: '999' })
  })
})

describe('shedlock run, in process, on a store that hands out tokens', () => {
  it('--help says so', () => {
    expect(runCommand.help).toMatch(/environment variable SHEDLOCK_FENCING_TOKEN/)
  })

  it('the command gets its lock’s token, greater at each run, in place of an inherited one', async () => {
    const before = process.env.SHEDLOCK_FENCING_TOKEN
    process.env.SHEDLOCK_FENCING_TOKEN = '999'
    try {
      const tokens: string[] = []
      for (let i = 0; i < 3; i++) {
        const { file, command } = reporter()
        const args = ['--url', 'postgres://in-process@127.0.0.1/none', '--name', 'fenced', '--lock-at-most-for', '1m']
        const code = await runCommand.run([...args, '--', ...command])
        expect(code).toBe(0)
        tokens.push(readFileSync(file, 'utf8'))
      }
      expect(tokens).toEqual(['1', '2', '3'])
    } finally {
      if (before === undefined) delete process.env.SHEDLOCK_FENCING_TOKEN
      else process.env.SHEDLOCK_FENCING_TOKEN = before
    }
  })
})

// The built bin on PostgreSQL: a lock table without the fencing_token column hands out no token,
// one with it (shedlock init --fencing-tokens) does; Redis always does.
const pool = await postgresPoolOrSkip(1)
const table = uniqueTable('cli_fencing')
const fencedTable = uniqueTable('cli_fencing_col')
if (pool) await pool.query(postgresSchema({ tableName: table }))
afterAll(async () => {
  await pool?.query(`DROP TABLE IF EXISTS ${table}`)
  await pool?.query(`DROP TABLE IF EXISTS ${fencedTable}`)
  await pool?.end()
})
const redis = await redisOrSkip()
afterAll(() => redis?.quit())

/** Runs the built bin's `shedlock run` three times under `name` and returns the tokens its commands got. */
async function tokensOfRuns(url: string, name: string, extra: string[] = []): Promise<string[]> {
  const tokens: string[] = []
  for (let i = 0; i < 3; i++) {
    const { file, command } = reporter()
    const run = await cli(['run', '--url', url, ...extra, '--name', name, '--lock-at-most-for', '1m', '--', ...command])
    expect(run).toMatchObject({ code: 0, stderr: '' })
    tokens.push(readFileSync(file, 'utf8'))
  }
  return tokens
}

/** Decimal tokens, each greater than the one before. */
function expectIncreasing(tokens: string[]): void {
  for (const token of tokens) expect(token).toMatch(/^[1-9]\d*$/)
  for (let i = 1; i < tokens.length; i++) expect(BigInt(tokens[i]!) > BigInt(tokens[i - 1]!), `${tokens}`).toBe(true)
}

describe.skipIf(!pool)('shedlock run on PostgreSQL with the fencing_token column (the built bin)', () => {
  it('the command gets its lock’s token in SHEDLOCK_FENCING_TOKEN, greater at each run, once init --fencing-tokens made the column', async () => {
    const init = await cli(['init', '--url', POSTGRES_URL, '--table', fencedTable, '--fencing-tokens'])
    expect(init.code, init.stderr).toBe(0)
    expectIncreasing(await tokensOfRuns(POSTGRES_URL, 'fenced-pg', ['--table', fencedTable]))
  })
})

describe.skipIf(!redis)('shedlock run on Redis (the built bin)', () => {
  it('the command gets its lock’s token in SHEDLOCK_FENCING_TOKEN, greater at each run', async () => {
    const environment = uniqueTable('cli_fencing')
    try {
      expectIncreasing(await tokensOfRuns(`${REDIS_URL}/?environment=${environment}`, 'fenced-redis', ['--no-history']))
    } finally {
      await redis!.del(`job-lock:${environment}:fenced-redis`, `:{job-lock:${environment}:fenced-redis}:fence`)
    }
  })
})

describe.skipIf(!pool)('shedlock run on PostgreSQL without tokens (the built bin)', () => {
  it('the command gets no SHEDLOCK_FENCING_TOKEN, even when shedlock inherited one', async () => {
    const { file, command } = reporter()
    const run = await cli(
      ['run', '--url', POSTGRES_URL, '--table', table, '--name', 'plain', '--lock-at-most-for', '1m', '--', ...command],
      { env: { SHEDLOCK_FENCING_TOKEN: '999' } },
    )
    expect(run).toMatchObject({ code: 0, stderr: '' })
    expect(readFileSync(file, 'utf8')).toBe('absent')
  })
})
