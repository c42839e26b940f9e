import { afterAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { cli, startCli, waitFor } from '../../cli/support/cli.ts'
import { cliProof } from '../../cli/support/proof.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

const url = POSTGRES_URL
const pool = await postgresPoolOrSkip(4)

describe.skipIf(!pool)('shedlock CLI on PostgreSQL (the built bin)', () => {
  const db = pool!
  const table = uniqueTable('shedlock_cli')
  const fresh = `${table}_init`
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.query(`DROP TABLE IF EXISTS ${fresh}`)
    await db.query(`DROP TABLE IF EXISTS ${fresh}_runs`)
    await db.end()
  })
  const wrong = new URL(url)
  // The local server trusts loopback connections, so a wrong password alone would be accepted: an unknown role is refused whatever the password.
  wrong.username = 'shedlock_no_such_role'
  wrong.password = 'pg-s3cret-Pa55'

  cliProof({
    kind: /^PostgreSQL /,
    args: ['--url', url, '--table', table],
    provider: () => postgresLockProvider({ client: db, tableName: table }),
    isHeld: async (name) =>
      (
        await db.query(
          `SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > timezone('utc', statement_timestamp())`,
          [name],
        )
      ).rowCount === 1,
    init: {
      args: ['--url', url, '--table', fresh, '--runs-table', `${fresh}_runs`],
      first: new RegExp(`: created table ${fresh}\\n.*: created table ${fresh}_runs \\(run history\\)\\n$`),
      again: new RegExp(
        `: table ${fresh} already exists: nothing to do.*\\n.*: table ${fresh}_runs \\(run history\\) already exists: nothing to do\\n$`,
      ),
    },
    missingLayout: {
      args: ['--url', url, '--table', `${table}_missing`],
      advice: new RegExp(`create it with: shedlock init --url \\S+ --table ${table}_missing`),
    },
    wrongPassword: { url: wrong.toString(), password: wrong.password, message: /shedlock_no_such_role/ },
  })

  it('--fencing-tokens: schema prints the column, doctor fails without it, init adds it, and doctor then takes a lock with a token', async () => {
    const fenced = `${table}_fenced`
    try {
      const schema = await cli(['schema', 'postgres', '--fencing-tokens'])
      expect(schema.code, schema.stderr).toBe(0)
      expect(schema.stdout).toContain('  fencing_token BIGINT NULL,\n')
      // A table as Java ShedLock (or an older shedlock) created it.
      await db.query(postgresSchema({ tableName: fenced }))
      const args = ['--url', url, '--table', fenced, '--fencing-tokens']
      const before = await cli(['doctor', ...args])
      expect(before.code, before.stdout).toBe(1)
      expect(before.stdout).toContain(
        `FAIL  fencing tokens: table ${fenced} has no fencing_token column, which fencingTokens: true needs; add it with: ALTER TABLE ${fenced} ADD COLUMN fencing_token BIGINT NULL;`,
      )
      const init = await cli(['init', ...args])
      expect(init.code, init.stderr).toBe(0)
      expect(init.stdout).toContain(
        `: added column fencing_token to table ${fenced}: ALTER TABLE ${fenced} ADD COLUMN fencing_token BIGINT NULL;\n`,
      )
      const again = await cli(['init', ...args])
      expect(again.stdout).toContain(`: table ${fenced} already exists: nothing to do`)
      const after = await cli(['doctor', ...args])
      expect(after.code, after.stdout).toBe(0)
      expect(after.stdout).toMatch(/ok {4}fencing tokens: column fencing_token bigint/)
      const lock = await postgresLockProvider({ client: db, tableName: fenced, fencingTokens: true }).lock(
        lockConfiguration({ name: 'after-init', lockAtMostFor: '1m' }),
      )
      // A new row's token starts above the floor: the clock in milliseconds times 1000.
      expect(lock!.fencingToken! > BigInt(Date.now() - 60_000) * 1000n).toBe(true)
      await lock?.unlock()
      const redis = await cli(['schema', 'redis', '--fencing-tokens'])
      expect(redis.code).toBe(2)
      expect(redis.stderr).toMatch(/--fencing-tokens applies to SQL stores/)
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${fenced}`)
    }
  }, 30_000)

  // Real time: keep-alive extends every lockAtMostFor / 2, and its minimum lockAtMostFor is 30 s.
  it('run --keep-alive extends the lock while the command runs, and releases it at the end', async () => {
    const name = `cli-keep-alive-${process.pid}`
    const lockUntil = async (): Promise<number | undefined> => {
      const row = (
        await db.query(
          `SELECT (extract(epoch FROM lock_until) * 1000)::float8 AS ms, lock_until > timezone('utc', statement_timestamp()) AS held FROM ${table} WHERE name = $1`,
          [name],
        )
      ).rows[0] as { ms: number; held: boolean } | undefined
      return row?.held ? row.ms : undefined
    }
    const runner = startCli([
      'run',
      '--url',
      url,
      '--table',
      table,
      '--name',
      name,
      '--lock-at-most-for',
      '30s',
      '--keep-alive',
      '--',
      'sleep',
      '18',
    ])
    expect(await waitFor(async () => (await lockUntil()) !== undefined, 10_000), runner.stderr()).toBe(true)
    const first = (await lockUntil())!
    // The first extension, 15 s in, moves lock_until about 15 s further.
    expect(await waitFor(async () => ((await lockUntil()) ?? 0) > first + 10_000, 20_000)).toBe(true)
    const run = await runner.done
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toBe('')
    expect(await lockUntil()).toBeUndefined()
  }, 45_000)
})
