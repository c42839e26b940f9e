import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { MYSQL_URL, mysqlPoolOrSkip, POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli } from './support/cli.ts'

// A read command on a lock table that does not exist says what doctor says (create it with
// shedlock init), not the provider's CREATE TABLE, which is advice for programs.
const temp = mkdtempSync(join(tmpdir(), 'shedlock-cli-missing-table-'))
afterAll(() => rmSync(temp, { recursive: true, force: true }))
const table = `shedlock_never_${process.pid}`

/** Whether a store of the test's servers answers; its pool is closed at once (the CLI opens its own). */
async function reachable(open: () => Promise<{ end(): Promise<void> } | undefined>): Promise<boolean> {
  const pool = await open()
  await pool?.end()
  return pool !== undefined
}

const stores: [string, string, boolean][] = [
  ['MariaDB', MYSQL_URL, await reachable(() => mysqlPoolOrSkip(1))],
  ['PostgreSQL', POSTGRES_URL, await reachable(() => postgresPoolOrSkip(1))],
  ['SQLite', `sqlite:${join(temp, 'locks.db')}`, true],
]

describe.each(stores)('%s, a --table that does not exist', (_, url, up) => {
  it.skipIf(!up)("list and unlock give doctor's advice: shedlock init, exit 1", async () => {
    if (url.startsWith('sqlite:')) expect((await cli(['init', '--url', url])).code).toBe(0)
    const store = ['--url', url, '--table', table]
    const doctor = await cli(['doctor', ...store, '--json'])
    const check = (JSON.parse(doctor.stdout) as { checks: { label: string; status: string; detail: string }[] })
      .checks[1]!
    expect(check).toMatchObject({ label: `table ${table}`, status: 'fail' })
    expect(check.detail).toBe(`does not exist; create it with: shedlock init --url ${url} --table ${table}`)
    for (const [command, ...args] of [['list'], ['list', '--json'], ['unlock', 'nightly', '--yes']]) {
      const run = await cli([command!, ...args, ...store])
      expect(run.code, run.stderr).toBe(1)
      expect(run.stdout).toBe('')
      expect(run.stderr).toBe(`shedlock ${command}: table ${table} ${check.detail}\n`)
    }
  })
})
