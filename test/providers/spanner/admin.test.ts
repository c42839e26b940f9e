import type { Database } from '@google-cloud/spanner'
import { afterAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { spannerLockProvider } from '../../../src/providers/spanner/index.ts'
import { GOOGLE_TEST_PROJECT, SPANNER_TEST_INSTANCE } from '../../helpers/google-emulators.ts'
import { cli, type ListJson } from '../../cli/support/cli.ts'
import { cliBasics } from '../../cli/support/proof.ts'
import { emulatorSpanner } from './emulator.ts'

// The helper set SPANNER_EMULATOR_HOST in this process; the CLI processes inherit it. The
// database test-db of the command, created here when missing (the emulator keeps
// nothing across restarts); `shedlock init` creates the tables in it.
const DATABASE = 'test-db'
const made = emulatorSpanner && (await ensureDatabase())
const url = `spanner://${GOOGLE_TEST_PROJECT}/${SPANNER_TEST_INSTANCE}/${DATABASE}`

async function ensureDatabase(): Promise<Database> {
  const instance = emulatorSpanner!.instance(SPANNER_TEST_INSTANCE)
  const database = instance.database(DATABASE)
  const [exists] = await database.exists()
  if (!exists) {
    const [, operation] = await instance.createDatabase(DATABASE)
    await operation.promise()
  }
  return database
}

describe.skipIf(!made)('shedlock CLI on Cloud Spanner (the built bin, against the emulator)', () => {
  const database = made as Database
  const table = `shedlock_cli_${process.pid}`
  afterAll(async () => {
    // The tables stay (DDL is slow on the emulator); the rows of this run go.
    for (const name of [table, 'shedlock'])
      await database
        .runTransactionAsync(async (tx) => {
          await tx.runUpdate({ sql: `DELETE FROM ${name} WHERE STARTS_WITH(name, 'cli-${process.pid}')` })
          await tx.commit()
        })
        .catch(() => undefined)
    emulatorSpanner!.close()
  })

  cliBasics({
    kind: 'Cloud Spanner',
    args: ['--url', url, '--table', table],
    provider: () => spannerLockProvider({ database, tableName: table }),
    isHeld: async (name) => {
      const [rows] = await database.run({
        sql: `SELECT lock_until > CURRENT_TIMESTAMP() AS held FROM ${table} WHERE name = @name`,
        params: { name },
        json: true,
      })
      return (rows[0] as { held?: boolean } | undefined)?.held === true
    },
    init: {
      args: ['--url', url, '--table', `${table}_init`],
      first: new RegExp(`created table ${table}_init`),
      again: new RegExp(`table ${table}_init already exists`),
    },
  })

  it(`npx shedlock list --url ${url} reads Java's default table, shedlock`, async () => {
    const init = await cli(['init', '--url', url])
    expect(init.code, init.stderr).toBe(0)
    const name = `cli-${process.pid}-default`
    const lock = await spannerLockProvider({ database }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    try {
      const run = await cli(['list', '--url', url, '--json'])
      expect(run.code, run.stderr).toBe(0)
      const listed = JSON.parse(run.stdout) as ListJson
      expect(listed.locks.find((l) => l.name === name)).toMatchObject({ state: 'held', lockedBy: lock!.lockedBy })
    } finally {
      await lock?.unlock()
    }
  })

  it('a URL without instance and database, or with credentials, is a usage error (exit 2)', async () => {
    expect((await cli(['list', '--url', `spanner://${GOOGLE_TEST_PROJECT}/${SPANNER_TEST_INSTANCE}`])).code).toBe(2)
    expect((await cli(['list', '--url', `spanner://user:secret@${GOOGLE_TEST_PROJECT}/i/d`])).code).toBe(2)
  })

  it('a database that does not exist is a clear error naming it', async () => {
    const run = await cli(['list', '--url', `spanner://${GOOGLE_TEST_PROJECT}/${SPANNER_TEST_INSTANCE}/nope`])
    expect(run.code).not.toBe(0)
    expect(run.stderr).toMatch(/Database not found|nope/)
  })
})
