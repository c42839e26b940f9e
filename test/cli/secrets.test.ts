import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mysqlRunsSchema, mysqlSchema } from '../../src/providers/mysql/index.ts'
import { postgresRunsSchema, postgresSchema } from '../../src/providers/postgres/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { MYSQL_URL, mysqlPoolOrSkip, POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli, lines } from './support/cli.ts'

// pg and mysql2 take a raw space in a password: no part of it may be printed.
const PASSWORD = 'correct horse staple'
const PIECES = /correct|horse|staple/

/** `url` (the tests' database) for `user` with `password`, written raw. */
function withPassword(url: string, user: string, password: string): string {
  const parsed = new URL(url)
  return `${parsed.protocol}//${user}:${password}@${parsed.host}${parsed.pathname}`
}

/** The output of a CLI run, both streams: where a password must not be. */
function printed(run: { stdout: string; stderr: string }): string {
  return run.stdout + run.stderr
}

const pg = await postgresPoolOrSkip(1)

describe.skipIf(!pg)('a password with spaces on PostgreSQL: list, status and their errors mask all of it', () => {
  const db = pg!
  const [locks, runs] = [uniqueTable('shedlock_cli_sp_locks'), uniqueTable('shedlock_cli_sp_runs')]
  const user = new URL(POSTGRES_URL).username || 'postgres'
  // The test server trusts loopback: the password is sent, and ignored.
  const url = withPassword(POSTGRES_URL, user, PASSWORD)
  beforeAll(async () => {
    await db.query(postgresSchema({ tableName: locks }))
    await db.query(postgresRunsSchema({ tableName: runs }))
  })
  afterAll(async () => {
    for (const table of [locks, runs]) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  it('list and list --json name the store with the password masked', async () => {
    const text = await cli(['list', '--url', url, '--table', locks])
    expect(text.code, text.stderr).toBe(0)
    expect(lines(text.stdout)[0]).toMatch(new RegExp(`^PostgreSQL postgres://${user}:\\*\\*\\*@.*: 0 locks`))
    const json = await cli(['list', '--url', url, '--table', locks, '--json'])
    expect(json.code, json.stderr).toBe(0)
    expect(JSON.parse(json.stdout).store).toMatch(new RegExp(`^postgres://${user}:\\*\\*\\*@`))
    for (const run of [text, json]) expect(printed(run)).not.toMatch(PIECES)
  })

  it('status --json: the store field masked, as the dashboard prints it', async () => {
    const run = await cli(['status', '--url', url, '--table', locks, '--runs-table', runs, '--json'])
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout)).toMatchObject({
      store: expect.stringMatching(/^PostgreSQL postgres:\/\/\S+:\*\*\*@/),
    })
    expect(printed(run)).not.toMatch(PIECES)
  })

  it('a refused login names the URL masked', async () => {
    const run = await cli(['list', '--url', withPassword(POSTGRES_URL, 'no_such_role_sp', PASSWORD)])
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/^shedlock list: cannot reach PostgreSQL at postgres:\/\/no_such_role_sp:\*\*\*@/)
    expect(printed(run)).not.toMatch(PIECES)
  })
})

const maria = await mysqlPoolOrSkip(1)

describe.skipIf(!maria)('a password with spaces on MariaDB/MySQL: list and "Access denied" mask all of it', () => {
  const db = maria!
  const user = `shedlock_sp_${process.pid}`
  const [locks, runs] = [uniqueTable('shedlock_cli_sp_locks'), uniqueTable('shedlock_cli_sp_runs')]
  const database = new URL(MYSQL_URL).pathname.slice(1)
  beforeAll(async () => {
    await db.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${PASSWORD}'`)
    await db.query(`GRANT ALL ON \`${database}\`.* TO '${user}'@'%'`)
    await db.query(mysqlSchema({ tableName: locks }))
    await db.query(mysqlRunsSchema({ tableName: runs }))
  })
  afterAll(async () => {
    await db.query(`DROP USER IF EXISTS '${user}'@'%'`)
    for (const table of [locks, runs]) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  it('list and status with the right password: the URL masked', async () => {
    const url = withPassword(MYSQL_URL, user, PASSWORD)
    const list = await cli(['list', '--url', url, '--table', locks])
    expect(list.code, list.stderr).toBe(0)
    expect(lines(list.stdout)[0]).toMatch(new RegExp(`^(MySQL|MariaDB) mysql://${user}:\\*\\*\\*@.*: 0 locks`))
    const status = await cli(['status', '--url', url, '--runs-table', runs, '--json'])
    expect(status.code, status.stderr).toBe(0)
    expect(JSON.parse(status.stdout).store).toMatch(new RegExp(`^(MySQL|MariaDB) mysql://${user}:\\*\\*\\*@`))
    for (const run of [list, status]) expect(printed(run)).not.toMatch(PIECES)
  })

  it('a wrong password with spaces: "Access denied", the URL masked', async () => {
    const run = await cli(['list', '--url', withPassword(MYSQL_URL, user, 'wrong horse staple'), '--table', locks])
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(
      new RegExp(
        `^shedlock list: cannot reach MySQL at mysql://${user}:\\*\\*\\*@\\S+: Access denied for user '${user}'@`,
      ),
    )
    expect(printed(run)).not.toMatch(/wrong|horse|staple/)
  })

  it('a "%" that is not a percent escape: a usage error naming the masked URL and the fix, not "URI malformed"', async () => {
    const url = withPassword(MYSQL_URL, user, 'Pw%zz9Q')
    const run = await cli(['list', '--url', url, '--table', locks])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe(
      `shedlock list: "${withPassword(MYSQL_URL, user, '***')}": the password holds a "%" that is not a percent escape (% and two hexadecimal digits), at its character 3; percent-encode a "%" that stands for itself as %25 (see shedlock list --help)\n`,
    )
    const encoded = await cli(['list', '--url', withPassword(MYSQL_URL, user, 'Pw%25zz9Q'), '--table', locks])
    expect(encoded.stderr).toMatch(/Access denied/)
    for (const output of [run, encoded]) expect(printed(output)).not.toMatch(/zz9Q/)
  })
})
