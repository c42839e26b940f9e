import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { mysqlRunsSchema, mysqlSchema } from '../../src/providers/mysql/index.ts'
import { postgresRunsSchema, postgresSchema } from '../../src/providers/postgres/index.ts'
import { sqliteRunsSchema, sqliteSchema } from '../../src/providers/sqlite/index.ts'
import { connectOrSkip } from '../helpers/backends.ts'
import { REDIS_URL } from '../helpers/kv-clients.ts'
import { cli, lines, MAIN } from './support/cli.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const temp = mkdtempSync(join(tmpdir(), 'shedlock-cli-main-'))
afterAll(() => rmSync(temp, { recursive: true, force: true }))
// No SHEDLOCK_URL from the environment of whoever runs the tests.
const noUrl = { SHEDLOCK_URL: undefined }
const COMMANDS = ['run', 'list', 'unlock', 'doctor', 'init', 'schema', 'history', 'status', 'demo']
const redisUrl = REDIS_URL
const redisUp = await connectOrSkip('redis', `${redisUrl} (SHEDLOCK_REDIS_URL), for the node-redis case`, async () => {
  const { hostname, port } = new URL(redisUrl)
  await new Promise<void>((resolve, reject) => {
    const socket = connect(Number(port || 6379), hostname, () => {
      socket.end()
      resolve()
    })
    socket.once('error', reject)
  })
  return true
})

describe('the bin', () => {
  // npm sets the bit at install only; a rebuild in a clone (npm test, npm pack) must keep it.
  it('dist/cli/main.js is executable after the build', () => {
    expect(statSync(MAIN).mode & 0o111).not.toBe(0)
  })
})

describe('help', () => {
  it('shedlock --help lists every command, the URL forms and the exit codes', async () => {
    const run = await cli(['--help'])
    expect(run.code).toBe(0)
    for (const name of COMMANDS) expect(run.stdout).toMatch(new RegExp(`^ {2}${name} +\\S`, 'm'))
    for (const scheme of [
      'postgres://',
      'mysql://',
      'sqlite:PATH',
      'redis://',
      'mongodb://',
      'dynamodb://',
      'etcd://',
      'zookeeper://',
      'nats://',
      'memcached://',
    ]) {
      expect(run.stdout).toContain(scheme)
    }
    expect(run.stdout).toContain('Exit codes: 0 ok, 1 failure, 2 usage error')
  })

  it.each(COMMANDS)(
    'shedlock %s --help describes the command and its exit codes, and touches no store',
    async (name) => {
      const run = await cli([name, '--help'], { env: { SHEDLOCK_URL: 'postgres://nobody@127.0.0.1:1/none' } })
      expect(run.code).toBe(0)
      expect(run.stderr).toBe('')
      expect(run.stdout).toMatch(new RegExp(`^Usage: shedlock ${name}\\b`))
      expect(run.stdout).toMatch(/^Exit codes: /m)
    },
  )

  it('run --help shows a crontab line', async () => {
    const run = await cli(['run', '--help'])
    expect(run.stdout).toMatch(
      /^ {2}SHEDLOCK_URL=\S+\n {2}0 2 \* \* \* shedlock run --name \S+ --lock-at-most-for \S+ .*-- \S+$/m,
    )
  })
})

describe('usage errors: one line on stderr, exit 2, before any store is touched', () => {
  const nowhere = 'sqlite:/nonexistent-dir/locks.db'
  it.each([
    [['list'], /^shedlock list: no store: pass --url URL or set SHEDLOCK_URL/],
    [
      ['list', '--url', 'ftp://user:ftp-s3cret@host/x'],
      /^shedlock list: unknown store URL "ftp:\/\/user:\*\*\*@host\/x": use postgres:\/\//,
    ],
    [['list', '--url', nowhere, '--format', 'xml'], /^shedlock list: --format must be table or json/],
    [['list', '--url', nowhere, '--bogus'], /^shedlock list: unknown option "--bogus" \(see/],
    [['list', '--url', nowhere, '--jsn'], /^shedlock list: unknown option "--jsn"; did you mean "--json"\? \(see/],
    [['list', '--url', nowhere, '--Prefx=a'], /^shedlock list: unknown option "--Prefx"; did you mean "--prefix"\?/],
    [
      ['list', '--url', nowhere, 'extra'],
      /^shedlock list: unexpected argument "extra": this command takes options only/,
    ],
    [['list', '--url'], /^shedlock list: --url needs a value/],
    [['list', '--url', nowhere, '--slots=yes'], /^shedlock list: --slots takes no value/],
    [
      ['history', '--url', nowhere, '-odd'],
      /^shedlock history: unknown option "-odd"; a name that starts with "-" goes after "--" \(see/,
    ],
    [
      ['list', '--url', 'postgres://u@127.0.0.1:1/db', '--table', 'locks; DROP TABLE x'],
      /^shedlock list: postgres: --table "locks; DROP TABLE x" is not a plain SQL identifier/,
    ],
    [['list', '--url', 'redis://127.0.0.1:1', '--table', 'x'], /^shedlock list: --table does not apply to redis URLs/],
    [
      ['list', '--url', 'etcd://127.0.0.1:1?bucket=x'],
      /^shedlock list: etcd URLs take only \?environment=, got \?bucket=/,
    ],
    [
      ['list', '--url', 'redis://127.0.0.1:1?environment=a:b'],
      /^shedlock list: redis: environment must be a non-empty string without ':'/,
    ],
    [['unlock', '--url', nowhere], /^shedlock unlock: name the lock: shedlock unlock NAME \[--url URL\]/],
    [['unlock', '--url', nowhere, '--name', ''], /^shedlock unlock: name the lock/],
    [['unlock', 'a', 'b', '--url', nowhere], /^shedlock unlock: one lock at a time: got "a", "b"/],
    [['unlock', 'a', '--url', nowhere, '--name', 'b'], /^shedlock unlock: one lock at a time: got "a", "b"/],
    [
      ['run', '--url', nowhere, '--name', '-odd', '--lock-at-most-for', '1m', '--', 'true'],
      /^shedlock run: --name needs a value; one that starts with "-" is written --name=-VALUE/,
    ],
    [['unlock', 'a', '--url', nowhere], /^shedlock unlock: refusing to release lock "a" without confirmation/],
    [
      ['run', '--url', nowhere, '--name', 'a', '--lock-at-most-for', '10m'],
      /^shedlock run: give the command to run after --/,
    ],
    [['run', '--url', nowhere, '--lock-at-most-for', '10m', '--', 'true'], /^shedlock run: --name NAME is required/],
    [['run', '--url', nowhere, '--name', 'a', '--', 'true'], /^shedlock run: --lock-at-most-for is required/],
    [
      ['run', '--url', nowhere, '--name', 'a', '--lock-at-most-for', 'soon', '--', 'true'],
      /^shedlock run: --lock-at-most-for: Invalid duration "soon"/,
    ],
    [
      ['run', '--url', nowhere, '--name', 'a', '--lock-at-most-for', '1m', '--lock-at-least-for', '2m', '--', 'true'],
      /^shedlock run: Lock "a": --lock-at-least-for \(2m\) is longer than --lock-at-most-for \(1m\)/,
    ],
    [
      ['run', '--url', nowhere, '--name', 'a', '--lock-at-most-for', '10s', '--keep-alive', '--', 'true'],
      /^shedlock run: --keep-alive needs --lock-at-most-for of at least 30s/,
    ],
    [['doctor', '--url', nowhere, '--max-offset', 'abc'], /^shedlock doctor: --max-offset: Invalid duration "abc"/],
    [['schema'], /^shedlock schema: name the store: shedlock schema postgres/],
    [['schema', 'oracle'], /^shedlock schema: unknown store "oracle"/],
    [['schema', 'redis', '--table', 'x'], /^shedlock schema: --table does not apply to redis/],
    [['schema', 'postgres', 'mysql'], /^shedlock schema: one STORE at a time/],
  ])('%j', async (args, message) => {
    const run = await cli(args, { env: noUrl })
    expect(run.code, run.stderr).toBe(2)
    expect(run.stdout).toBe('')
    expect(lines(run.stderr)).toHaveLength(1)
    expect(run.stderr).toMatch(message)
    expect(run.stderr).toMatch(/\(see shedlock \w+ --help\)\n$/)
    expect(run.stderr).not.toContain('s3cret')
  })
})

/** What `shedlock schema` prints for a SQL store: the lock table, then the run history's table. */
const withRuns = (ddl: string, runs: string): string =>
  `${ddl}\n-- The run history (optional; shedlock history, shedlock status):\n${runs}\n`

describe('schema', () => {
  it.each([
    ['postgres', withRuns(postgresSchema({ tableName: 'jobs_lock' }), postgresRunsSchema())],
    ['postgresql', withRuns(postgresSchema({ tableName: 'jobs_lock' }), postgresRunsSchema())],
    ['mysql', withRuns(mysqlSchema({ tableName: 'jobs_lock' }), mysqlRunsSchema())],
    ['mariadb', withRuns(mysqlSchema({ tableName: 'jobs_lock' }), mysqlRunsSchema())],
    ['sqlite', withRuns(sqliteSchema({ tableName: 'jobs_lock' }), sqliteRunsSchema())],
    ['postgres://app@db.internal/app', withRuns(postgresSchema({ tableName: 'jobs_lock' }), postgresRunsSchema())],
  ])('schema %s --table jobs_lock prints the lock table DDL, then the run history DDL', async (store, ddl) => {
    const run = await cli(['schema', store, '--table', 'jobs_lock'])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toBe(ddl)
  })

  it('takes the store from SHEDLOCK_URL when none is named', async () => {
    const run = await cli(['schema'], { env: { SHEDLOCK_URL: 'mariadb://root@127.0.0.1/test' } })
    expect(run.code).toBe(0)
    expect(run.stdout).toBe(withRuns(mysqlSchema(), mysqlRunsSchema()))
  })

  it('prints the commands that create a DynamoDB table, a MongoDB collection and a NATS bucket, and the key formats of the others', async () => {
    expect((await cli(['schema', 'dynamodb'])).stdout).toMatch(
      /^aws dynamodb create-table --table-name Shedlock \\\n {2}--attribute-definitions AttributeName=_id,AttributeType=S \\\n {2}--key-schema AttributeName=_id,KeyType=HASH \\\n {2}--billing-mode PAY_PER_REQUEST$/m,
    )
    expect((await cli(['schema', 'mongodb', '--table', 'locks'])).stdout).toContain('db.createCollection("locks")')
    expect((await cli(['schema', 'nats'])).stdout).toContain('nats kv add shedlock-locks --history 1')
    expect((await cli(['schema', 'redis'])).stdout).toContain('job-lock:<environment>:<name>')
    expect((await cli(['schema', 'etcd'])).stdout).toContain('shedlock:<environment>:<name>')
    expect((await cli(['schema', 'memcached'])).stdout).toContain('shedlock:<environment>:<name>')
    expect((await cli(['schema', 'zookeeper'])).stdout).toContain('/shedlock/<name>')
  })
})

describe('SHEDLOCK_URL', () => {
  it('is the store when --url is absent; --url wins over it', async () => {
    const file = join(temp, 'env.db')
    const missing = await cli(['list'], { env: { SHEDLOCK_URL: `sqlite:${file}` } })
    expect(missing.code).toBe(1)
    expect(missing.stderr).toBe(
      `shedlock list: no SQLite database at ${file}; create it (and the lock table) with: shedlock init --url sqlite:${file}\n`,
    )
    const other = join(temp, 'other.db')
    const wins = await cli(['list', '--url', `sqlite:${other}`], { env: { SHEDLOCK_URL: `sqlite:${file}` } })
    expect(wins.stderr).toContain(`no SQLite database at ${other}`)
    expect(existsSync(file) || existsSync(other)).toBe(false)
  })
})

describe('passwords in URLs never appear, in whole or in part', () => {
  // Unreachable stores (port 1): every command fails, and quotes the URL in its error. Each piece
  // of these passwords between their '@', ':' and '/' is distinctive, so finding one anywhere is a leak.
  const PIECES = ['Zq8', 'Wx3', 'Kv5', 'Jm2']
  const expectNoPiece = (run: { stdout: string; stderr: string }): void => {
    for (const piece of PIECES) {
      expect(run.stdout, run.stdout).not.toContain(piece)
      expect(run.stderr, run.stderr).not.toContain(piece)
    }
  }

  it.each([
    'postgres://app:Zq8@Wx3@127.0.0.1:1/db',
    'postgres://app:Zq8@Wx3:Kv5@127.0.0.1:1/db',
    'postgres://app:Zq8%40Wx3%2FKv5%3AJm2@127.0.0.1:1/db',
    'mysql://root:Zq8@Wx3:Kv5@127.0.0.1:1/test',
    'redis://:Zq8@Wx3:Kv5@127.0.0.1:1',
  ])('%s: list, list --json and doctor --json fail without it, from --url and from SHEDLOCK_URL', async (url) => {
    for (const [args, env] of [
      [['list', '--url', url], noUrl],
      [['list', '--json', '--url', url], noUrl],
      [['doctor', '--json', '--url', url], noUrl],
      [['list', '--json'], { SHEDLOCK_URL: url }],
    ] as const) {
      const run = await cli(args, { env })
      expect(run.code, run.stderr).toBe(1)
      expect(`${run.stdout}${run.stderr}`).toContain(':***@127.0.0.1:1')
      expectNoPiece(run)
    }
  })

  it('refuses a raw "/" in a password, which would make part of it the host: exit 2, naming the fix, the password hidden', async () => {
    for (const url of ['postgres://app:Zq8@Wx3:Kv5/Jm2@127.0.0.1:1/db', 'postgres://app:Zq8/Wx3@127.0.0.1:1/db']) {
      const run = await cli(['list', '--json', '--url', url], { env: noUrl })
      expect(run.code, run.stderr).toBe(2)
      expect(run.stderr).toMatch(
        /^shedlock list: "postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/db": the password holds a raw "\/", "\?" or "#", .*percent-encode them \(%2F, %3F, %23\)/,
      )
      expectNoPiece(run)
    }
  })
})

describe('history and status', () => {
  it('take --table as every command that takes --url does (their help lists it)', async () => {
    const url = `sqlite:${join(temp, 'history.db')}`
    const store = ['--url', url, '--table', 'jobs_lock', '--runs-table', 'jobs_runs']
    expect((await cli(['init', ...store])).code).toBe(0)
    for (const command of ['history', 'status'])
      expect((await cli([command, '--help'])).stdout).toContain('--table NAME')
    const history = await cli(['history', 'report', ...store, '--json'])
    expect(history.code, history.stderr).toBe(0)
    expect(JSON.parse(history.stdout)).toEqual({ task: 'report', runs: [] })
    // No run is no success: a named task without runs is stale.
    const status = await cli(['status', ...store, '--stale', 'report=1h', '--json'])
    expect(status.code, status.stderr).toBe(1)
    expect(JSON.parse(status.stdout).tasks).toMatchObject([{ name: 'report', state: 'stale', lastRun: null }])
  })
})

describe('missing drivers (the built bin copied where no package can be found)', () => {
  // dist/ and package.json alone, outside any node_modules: an import of a driver fails as it
  // does for a user who has not installed it.
  const copy = join(temp, 'shedlock')
  cpSync(join(root, 'dist'), join(copy, 'dist'), { recursive: true })
  cpSync(join(root, 'package.json'), join(copy, 'package.json'))
  const main = join(copy, 'dist/cli/main.js')
  // The user's project: an empty folder, run from (drivers are looked for there first).
  const project = join(temp, 'empty-project')
  mkdirSync(project, { recursive: true })
  const resolvable = (name: string): boolean => {
    try {
      createRequire(main).resolve(name)
      return true
    } catch {
      return false
    }
  }

  it('the copy resolves no package at all', () => {
    for (const name of [
      'pg',
      'mysql2',
      'ioredis',
      'redis',
      'mongodb',
      '@aws-sdk/client-dynamodb',
      'etcd3',
      'node-zookeeper-client',
      '@nats-io/kv',
      'memjs',
      'better-sqlite3',
      'libsql',
    ]) {
      expect(resolvable(name), name).toBe(false)
    }
  })

  it('help and schema work without any driver: the bin imports none at startup', async () => {
    expect((await cli(['--help'], { main })).code).toBe(0)
    const schema = await cli(['schema', 'postgres'], { main })
    expect(schema.code).toBe(0)
    expect(schema.stdout).toBe(withRuns(postgresSchema(), postgresRunsSchema()))
  })

  it.each([
    [
      'postgres://u:pg-s3cret@127.0.0.1:1/db',
      /^shedlock list: postgres:\/\/ URLs need the pg package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install pg in your project$/,
    ],
    [
      'mysql://u:my-s3cret@127.0.0.1:1/db',
      /^shedlock list: mysql:\/\/ URLs need the mysql2 package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install mysql2 in your project$/,
    ],
    [
      'redis://:rd-s3cret@127.0.0.1:1',
      /^shedlock list: redis:\/\/ URLs need the ioredis or the redis package, and neither is installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install ioredis in your project$/,
    ],
    [
      'mongodb://u:mg-s3cret@127.0.0.1:1/db',
      /^shedlock list: mongodb:\/\/ URLs need the mongodb package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install mongodb in your project$/,
    ],
    [
      'dynamodb://127.0.0.1:1',
      /^shedlock list: dynamodb:\/\/ URLs need the @aws-sdk\/client-dynamodb package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install @aws-sdk\/client-dynamodb in your project$/,
    ],
    [
      'etcd://127.0.0.1:1',
      /^shedlock list: etcd:\/\/ URLs need the etcd3 package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install etcd3 in your project$/,
    ],
    [
      'zookeeper://127.0.0.1:1',
      /^shedlock list: zookeeper:\/\/ URLs need the node-zookeeper-client package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install node-zookeeper-client in your project$/,
    ],
    [
      'nats://127.0.0.1:1',
      /^shedlock list: nats:\/\/ URLs need the @nats-io\/transport-node package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install @nats-io\/transport-node @nats-io\/kv in your project$/,
    ],
    [
      'memcached://127.0.0.1:1',
      /^shedlock list: memcached:\/\/ URLs need the memjs package, which is not installed: looked from .+ \(the current directory\), then from .+ \(shedlock's own folder\); run npm install memjs in your project$/,
    ],
  ])('%s: one line naming the package to install, exit 1', async (url, message) => {
    const run = await cli(['list', '--url', url], { main, cwd: project })
    expect(run.code).toBe(1)
    expect(lines(run.stderr)).toHaveLength(1)
    expect(run.stderr.trimEnd()).toMatch(message)
    expect(run.stderr).toContain(
      `looked from ${project} (the current directory), then from ${join(copy, 'dist', 'support')}/ (shedlock's own folder)`,
    )
    expect(run.stderr).not.toContain('s3cret')
  })

  it("a driver installed in the user's project is found, though shedlock's own folder has none", async () => {
    // A stand-in pg in the project's node_modules: its Pool says where it was loaded from.
    const withPg = join(temp, 'project-with-pg')
    mkdirSync(join(withPg, 'node_modules', 'pg'), { recursive: true })
    writeFileSync(join(withPg, 'package.json'), '{"name":"app","private":true}')
    writeFileSync(
      join(withPg, 'node_modules', 'pg', 'package.json'),
      '{"name":"pg","version":"8.0.0","main":"index.js"}',
    )
    writeFileSync(
      join(withPg, 'node_modules', 'pg', 'index.js'),
      "exports.Pool = class { constructor() { throw new Error('the pg of the project') } }\n",
    )
    // From a subfolder too: Node's resolution walks up to the project's node_modules.
    mkdirSync(join(withPg, 'scripts'), { recursive: true })
    for (const cwd of [withPg, join(withPg, 'scripts')]) {
      const run = await cli(['list', '--url', 'postgres://u@127.0.0.1:1/db'], { main, cwd })
      expect(run.code).toBe(1)
      expect(run.stderr).toContain('the pg of the project')
    }
  })

  it('sqlite: needs node:sqlite (Node >= 22.13), better-sqlite3 or libsql, and says so', async () => {
    const file = join(temp, 'no-driver.db')
    const run = await cli(['init', '--url', `sqlite:${file}`], { main, cwd: project })
    const nodeSqlite = await import('node:sqlite' as string).then(
      () => true,
      () => false,
    )
    if (nodeSqlite) {
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain('created table shedlock')
    } else {
      expect(run.code).toBe(1)
      expect(run.stderr).toMatch(
        /^shedlock init: no SQLite driver: install libsql \(`npm i libsql`, prebuilt, nothing to compile\) or better-sqlite3 \(`npm i better-sqlite3`\), or use Node >= 22\.13/,
      )
    }
  })

  it.skipIf(!redisUp)('with only node-redis (the redis package) installed, redis:// URLs use it', async () => {
    const modules = join(copy, 'node_modules')
    mkdirSync(modules, { recursive: true })
    symlinkSync(join(root, 'node_modules/redis'), join(modules, 'redis'))
    try {
      expect(resolvable('ioredis')).toBe(false)
      const run = await cli(
        [
          'doctor',
          '--url',
          `${redisUrl}${redisUrl.includes('?') ? '&' : '?'}environment=cli-node-redis-${process.pid}`,
        ],
        {
          main,
          cwd: project,
        },
      )
      expect(run.code, run.stdout + run.stderr).toBe(0)
      expect(run.stdout).toMatch(/^ {2}ok {4}reachable: Redis \S+ \(node-redis\)/m)
      expect(run.stdout).toMatch(/^ {2}ok {4}write: took lock .*, released it, removed its record$/m)
    } finally {
      rmSync(modules, { recursive: true, force: true })
    }
  })
})
