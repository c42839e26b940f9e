import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { hostname, tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type BetterSqlite3 from 'better-sqlite3'
import Libsql from 'libsql'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { type SqliteDatabase, sqliteLockProvider, sqliteSchema } from '../../../src/providers/sqlite/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { type NodeProcess, startNode } from '../../helpers/processes.ts'
import { registerSuite } from '../../helpers/register-suite.ts'
import type { NodeSqliteModule } from './drivers.ts'

// ---- the two drivers ----

type BetterSqlite3Constructor = typeof BetterSqlite3

/** One open connection, driver-neutral for the tests; `database` is the driver's own object. */
interface Connection {
  database: SqliteDatabase
  exec(sql: string): void
  get(sql: string, ...params: string[]): Record<string, unknown> | undefined
  run(sql: string, ...params: string[]): void
  close(): void
}

interface Driver {
  name: 'better-sqlite3' | 'node:sqlite' | 'libsql'
  /** Why the driver's tests are skipped on this Node, or undefined when they run. */
  skip: string | undefined
  /** `timeoutMs` is the busy timeout. */
  open(file: string, timeoutMs?: number): Connection
}

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number)
const nodeSqliteRequired = major > 22 || (major === 22 && minor >= 13)
const require = createRequire(import.meta.url)

async function loadBetterSqlite3(): Promise<Driver> {
  let Database: BetterSqlite3Constructor
  try {
    Database = (await import('better-sqlite3')).default
    new Database(':memory:').close() // loads the native binary
  } catch (error) {
    // Not a devDependency (npm ci would compile it): its tests run where it is installed, e.g.
    // `npm i --no-save better-sqlite3`. libsql, which has its API, runs on every Node line.
    const why = oneLine(error)
    const skip = `better-sqlite3 is not installed, or its native binary does not load on Node ${process.version} (libsql, with the same API, is tested instead): ${why}`
    console.warn(`SKIPPED better-sqlite3 tests: ${skip}`)
    return { name: 'better-sqlite3', skip, open: () => assert.fail(skip) }
  }
  return {
    name: 'better-sqlite3',
    skip: undefined,
    open(file, timeoutMs = 5000) {
      const db = new Database(file, { timeout: timeoutMs })
      return {
        database: db,
        exec: (sql) => void db.exec(sql),
        get: (sql, ...params) => db.prepare<string[], Record<string, unknown>>(sql).get(...params),
        run: (sql, ...params) => void db.prepare(sql).run(...params),
        close: () => void db.close(),
      }
    },
  }
}

async function loadNodeSqlite(): Promise<Driver> {
  const specifier = 'node:sqlite'
  let sqlite: NodeSqliteModule
  try {
    sqlite = await import(/* @vite-ignore */ specifier)
  } catch (error) {
    if (nodeSqliteRequired)
      throw new Error(`node:sqlite is required on Node ${process.version} and did not load: ${oneLine(error)}`, {
        cause: error,
      })
    const skip = `node:sqlite does not exist on Node ${process.version} (it needs Node >= 22.13; libsql is tested instead)`
    console.warn(`SKIPPED node:sqlite tests: ${skip}`)
    return { name: 'node:sqlite', skip, open: () => assert.fail(skip) }
  }
  return {
    name: 'node:sqlite',
    skip: undefined,
    open(file, timeoutMs = 5000) {
      const db = new sqlite.DatabaseSync(file, { timeout: timeoutMs })
      // The timeout option came with Node 22.16; the pragma works on every version.
      db.exec(`PRAGMA busy_timeout = ${timeoutMs}`)
      return {
        database: db,
        exec: (sql) => db.exec(sql),
        get: (sql, ...params) => db.prepare(sql).get(...params),
        run: (sql, ...params) => void db.prepare(sql).run(...params),
        close: () => db.close(),
      }
    },
  }
}

/** libsql: better-sqlite3's API over a prebuilt binary (Node-API, so one build loads on every Node line). Never skipped. */
function loadLibsql(): Driver {
  return {
    name: 'libsql',
    skip: undefined,
    open(file, timeoutMs = 5000) {
      // libsql's busy timeout is 0 ms unless given (better-sqlite3's is 5 s).
      const db = new Libsql(file, { timeout: timeoutMs })
      return {
        database: db,
        exec: (sql) => void db.exec(sql),
        get: (sql, ...params) => db.prepare(sql).get(...params) as Record<string, unknown> | undefined,
        run: (sql, ...params) => void db.prepare(sql).run(...params),
        close: () => void db.close(),
      }
    },
  }
}

function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').trim().slice(0, 400)
}

const drivers = [await loadBetterSqlite3(), await loadNodeSqlite(), loadLibsql()]

// ---- helpers ----

const NOW = `strftime('%Y-%m-%d %H:%M:%f', 'now')`
const TIMESTAMP = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/
const workDir = mkdtempSync(join(tmpdir(), 'shedlock-sqlite-test-'))
afterAll(() => rmSync(workDir, { recursive: true, force: true }))

let files = 0
const newFile = (): string => join(workDir, `db-${++files}.sqlite`)

/** A fresh WAL database file with a lock table, on a connection that is closed after the file's tests. */
function openWithTable(driver: Driver, table = 'shedlock', columnNames?: Record<string, string>): Connection {
  const connection = driver.open(newFile())
  connection.exec('PRAGMA journal_mode = WAL')
  connection.exec(sqliteSchema({ tableName: table, columnNames }))
  opened.push(connection)
  return connection
}
const opened: Connection[] = []
afterAll(() => {
  for (const c of opened) {
    try {
      c.close()
    } catch {
      // already closed by a test
    }
  }
})

const msOf = (text: unknown): number => Date.parse(`${String(text).replace(' ', 'T')}Z`)

for (const driver of drivers) {
  describe.skipIf(driver.skip !== undefined)(
    `sqlite with ${driver.name}${driver.skip ? ` (skipped: ${driver.skip})` : ''}`,
    () => {
      for (const [useDbTime, fencing] of [
        [true, false],
        [false, false],
        [true, true],
      ] as const) {
        describe(`${useDbTime ? 'database time' : 'app time'}${fencing ? ', fencing tokens' : ''}`, () => {
          let db: Connection
          let file = ''
          beforeAll(() => {
            file = newFile()
            db = driver.open(file)
            opened.push(db)
            db.exec('PRAGMA journal_mode = WAL')
            db.exec(sqliteSchema({ fencingTokens: fencing }))
          })
          // No maxNameLength: SQLite does not enforce the length of a VARCHAR (or any TEXT), so no name is too long.
          registerSuite(
            lockProviderSuite({
              provider: () => sqliteLockProvider({ database: db.database, useDbTime, fencingTokens: fencing }),
              isLocked: async (name) =>
                db.get(`SELECT 1 AS held FROM shedlock WHERE name = ? AND lock_until > ${NOW}`, name) !== undefined,
              deleteRecord: async (name) => {
                db.run('DELETE FROM shedlock WHERE name = ?', name)
              },
              unreachableProvider: () => {
                const closed = driver.open(file)
                closed.close()
                return sqliteLockProvider({ database: closed.database, useDbTime })
              },
              extensible: true,
              slots: { inspector: true },
              fencing,
            }),
          )
        })
      }

      describe('storage format', () => {
        it('writes UTC text timestamps (YYYY-MM-DD HH:MM:SS.SSS) and a locked_by that starts with the host name, whatever the process time zone', async () => {
          const db = openWithTable(driver)
          const previous = process.env.TZ
          process.env.TZ = 'America/Los_Angeles'
          try {
            for (const useDbTime of [true, false]) {
              const name = `format-${useDbTime}`
              const lock = await sqliteLockProvider({ database: db.database, useDbTime }).lock(
                lockConfiguration({ name, lockAtMostFor: '1h' }),
              )
              assert.ok(lock)
              const row = db.get('SELECT lock_until, locked_at, locked_by FROM shedlock WHERE name = ?', name)
              assert.ok(row)
              expect(row.lock_until).toMatch(TIMESTAMP)
              expect(row.locked_at).toMatch(TIMESTAMP)
              expect(String(row.locked_by).startsWith(`${hostname()}:${process.pid}:`)).toBe(true)
              expect(Math.abs(msOf(row.locked_at) - Date.now())).toBeLessThan(5_000)
              expect(Math.abs(msOf(row.lock_until) - msOf(row.locked_at) - 3_600_000)).toBeLessThan(5_000)
              await lock.unlock()
              const released = db.get('SELECT lock_until, locked_at FROM shedlock WHERE name = ?', name)
              expect(released?.lock_until).toMatch(TIMESTAMP)
              expect(msOf(released?.lock_until)).toBeGreaterThanOrEqual(msOf(released?.locked_at))
            }
          } finally {
            if (previous === undefined) delete process.env.TZ
            else process.env.TZ = previous
          }
        })

        it('respects a lock written in ShedLock format by another program and takes over an expired one', async () => {
          const db = openWithTable(driver)
          db.exec(
            `INSERT INTO shedlock VALUES ('java-held', strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour'), ${NOW}, 'java-host'), ` +
              `('java-expired', strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 day'), strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 day'), 'java-host')`,
          )
          for (const useDbTime of [true, false]) {
            const provider = sqliteLockProvider({ database: db.database, useDbTime })
            expect(await provider.lock(lockConfiguration({ name: 'java-held', lockAtMostFor: '1m' }))).toBeUndefined()
            const lock = await provider.lock(lockConfiguration({ name: 'java-expired', lockAtMostFor: '1m' }))
            assert.ok(lock, `useDbTime ${useDbTime}: the expired row was not taken over`)
            await lock.unlock()
          }
          expect(db.get(`SELECT locked_by FROM shedlock WHERE name = 'java-held'`)?.locked_by).toBe('java-host')
          expect(db.get(`SELECT locked_by FROM shedlock WHERE name = 'java-expired'`)?.locked_by).not.toBe('java-host')
        })

        it("decides expiry on SQLite's clock (this host's): an app clock an hour ahead cannot take a held lock", async () => {
          const db = openWithTable(driver)
          const name = 'skewed'
          const honest = await sqliteLockProvider({ database: db.database }).lock(
            lockConfiguration({ name, lockAtMostFor: '10m' }),
          )
          assert.ok(honest)
          const ahead = { now: () => Date.now() + 3_600_000 }
          const skewed = (useDbTime: boolean) =>
            sqliteLockProvider({ database: db.database, clock: ahead, useDbTime }).lock(
              lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }),
            )
          expect(await skewed(true)).toBeUndefined()
          // With app time the skewed node believes the lock expired: the risk the README states.
          expect(await skewed(false)).toBeDefined()
        })

        it('works with custom table and column names', async () => {
          const columnNames = { name: 'lock_name', lockUntil: 'until_ts', lockedAt: 'at_ts', lockedBy: 'owner' }
          const db = openWithTable(driver, 'my_locks', columnNames)
          const provider = sqliteLockProvider({ database: db.database, tableName: 'my_locks', columnNames })
          const lock = await provider.lock(lockConfiguration({ name: 'custom', lockAtMostFor: '1m' }))
          assert.ok(lock)
          expect(db.get(`SELECT owner FROM my_locks WHERE lock_name = 'custom' AND until_ts > ${NOW}`)).toBeDefined()
          expect(await provider.lock(lockConfiguration({ name: 'custom', lockAtMostFor: '1m' }))).toBeUndefined()
          const extended = await lock.extend('2m', 0)
          assert.ok(extended)
          await extended.unlock()
          expect(
            db.get(`SELECT 1 AS held FROM my_locks WHERE lock_name = 'custom' AND until_ts > ${NOW}`),
          ).toBeUndefined()
        })
      })

      describe('statements', () => {
        it('prepares each statement once per provider, on first use', async () => {
          const db = openWithTable(driver)
          const prepared: string[] = []
          const counting: SqliteDatabase = {
            prepare: (sql) => {
              prepared.push(sql)
              return db.database.prepare(sql)
            },
          }
          const provider = sqliteLockProvider({ database: counting })
          expect(prepared).toEqual([])
          for (let i = 0; i < 3; i++) {
            const lock = await provider.lock(lockConfiguration({ name: 'once', lockAtMostFor: '1m' }))
            assert.ok(lock)
            expect(await provider.lock(lockConfiguration({ name: 'once', lockAtMostFor: '1m' }))).toBeUndefined()
            const extended = await lock.extend('1m', 0)
            assert.ok(extended)
            await extended.unlock()
          }
          expect(prepared).toHaveLength(3)
          expect(prepared.filter((sql) => sql.startsWith('INSERT'))).toHaveLength(1)
        })

        it('a missing table rejects with LockProviderError that names the lock and gives the DDL; once created, the same provider works', async () => {
          const db = driver.open(newFile())
          opened.push(db)
          const provider = sqliteLockProvider({ database: db.database, tableName: 'later_table' })
          const error = await provider
            .lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' }))
            .catch((e: unknown) => e)
          assert.ok(error instanceof LockProviderError, `expected LockProviderError, got ${String(error)}`)
          expect(error.message).toMatch(
            /^sqlite: could not acquire lock "needs-table": table later_table does not exist/,
          )
          expect(error.message).toContain('CREATE TABLE IF NOT EXISTS later_table')
          expect(error.provider).toBe('sqlite')
          expect(error.lockName).toBe('needs-table')
          expect(error.cause).toBeDefined()
          // The failed prepare was not cached.
          db.exec(sqliteSchema({ tableName: 'later_table' }))
          const lock = await provider.lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' }))
          assert.ok(lock)
          await lock.unlock()
        })

        it('a table without the expected columns rejects with LockProviderError about the columns', async () => {
          const db = driver.open(newFile())
          opened.push(db)
          db.exec('CREATE TABLE shedlock (id TEXT PRIMARY KEY, until TEXT)')
          const error = await sqliteLockProvider({ database: db.database })
            .lock(lockConfiguration({ name: 'columns', lockAtMostFor: '1m' }))
            .catch((e: unknown) => e)
          assert.ok(error instanceof LockProviderError)
          expect(error.message).toMatch(
            /^sqlite: could not acquire lock "columns": table shedlock does not have the expected columns \(name, lock_until, locked_at, locked_by\)/,
          )
        })

        it('a table whose name column is not unique rejects with LockProviderError about the primary key', async () => {
          const db = driver.open(newFile())
          opened.push(db)
          db.exec('CREATE TABLE shedlock (name TEXT, lock_until TEXT, locked_at TEXT, locked_by TEXT)')
          const error = await sqliteLockProvider({ database: db.database })
            .lock(lockConfiguration({ name: 'no-pk', lockAtMostFor: '1m' }))
            .catch((e: unknown) => e)
          assert.ok(error instanceof LockProviderError)
          expect(error.message).toContain('with name as primary key')
        })

        it('a closed database rejects with LockProviderError saying so', async () => {
          const db = openWithTable(driver)
          const provider = sqliteLockProvider({ database: db.database })
          const lock = await provider.lock(lockConfiguration({ name: 'closing', lockAtMostFor: '1m' }))
          assert.ok(lock)
          db.close()
          // A statement prepared before the close (acquire), one never prepared (unlock), a new provider: all say "closed".
          // Except libsql's prepared statement, which keeps its own handle on the connection and still
          // runs after close(): it writes the lock for real, so nothing runs unlocked.
          if (driver.name === 'libsql') {
            const late = await provider.lock(lockConfiguration({ name: 'closing-2', lockAtMostFor: '1m' }))
            expect(late).toBeDefined()
            expect(await provider.lock(lockConfiguration({ name: 'closing-2', lockAtMostFor: '1m' }))).toBeUndefined()
          } else {
            await assert.rejects(
              provider.lock(lockConfiguration({ name: 'closing-2', lockAtMostFor: '1m' })),
              /^LockProviderError: sqlite: could not acquire lock "closing-2": the database is closed/,
            )
          }
          await assert.rejects(
            lock.unlock(),
            /^LockProviderError: sqlite: could not release lock "closing": the database is closed/,
          )
          await assert.rejects(
            sqliteLockProvider({ database: db.database }).lock(
              lockConfiguration({ name: 'closing-3', lockAtMostFor: '1m' }),
            ),
            /the database is closed/,
          )
        })

        it('another writer holding the database, with no busy timeout, rejects with LockProviderError about SQLITE_BUSY', async () => {
          const holder = openWithTable(driver)
          const file = holder.get('PRAGMA database_list')?.file
          assert.equal(typeof file, 'string')
          const impatient = driver.open(String(file), 0)
          opened.push(impatient)
          const provider = sqliteLockProvider({ database: impatient.database })
          holder.exec('BEGIN IMMEDIATE')
          try {
            const error = await provider
              .lock(lockConfiguration({ name: 'busy', lockAtMostFor: '1m' }))
              .catch((e: unknown) => e)
            assert.ok(error instanceof LockProviderError, `expected LockProviderError, got ${String(error)}`)
            expect(error.message).toMatch(
              /^sqlite: could not acquire lock "busy": the database is locked by another writer; set a busy timeout/,
            )
          } finally {
            holder.exec('COMMIT')
          }
          const lock = await provider.lock(lockConfiguration({ name: 'busy', lockAtMostFor: '1m' }))
          assert.ok(lock)
          await lock.unlock()
        })
      })

      describe('processes', () => {
        it('three processes racing for one lock per round, sharing one database file: exactly one winner per round', async () => {
          const db = openWithTable(driver)
          const file = String(db.get('PRAGMA database_list')?.file)
          const rounds = 40
          const prefix = `race-${process.pid}-${Date.now()}`
          const children = Array.from({ length: 3 }, () =>
            startNode(
              [
                '--disable-warning=ExperimentalWarning',
                raceChild(),
                driver.name,
                driver.name === 'node:sqlite' ? '' : require.resolve(driver.name),
                file,
                prefix,
                String(rounds),
              ],
              { ipc: true },
            ),
          )
          try {
            const ready = children.map((child) => nextMessage(child))
            await Promise.all(ready)
            const startAt = Date.now() + 200
            const results = children.map((child) => nextMessage(child))
            for (const { child } of children) child.send({ startAt })
            const wins = (await Promise.all(results)) as Array<{ wins: boolean[] }>
            for (let round = 0; round < rounds; round++) {
              const winners = wins.filter((w) => w.wins[round]).length
              expect(winners, `round ${round}: ${winners} processes got the lock`).toBe(1)
            }
            for (let round = 0; round < rounds; round++) {
              expect(
                db.get(`SELECT 1 AS held FROM shedlock WHERE name = ? AND lock_until > ${NOW}`, `${prefix}-${round}`),
                `round ${round}: no row`,
              ).toBeDefined()
            }
          } finally {
            for (const { child } of children) if (child.exitCode === null) child.kill()
          }
        }, 60_000)
      })

      describe('bad input', () => {
        it('rejects table and column names that are not plain identifiers before any statement', () => {
          const database: SqliteDatabase = {
            prepare: () => {
              throw new Error('no statement may be prepared')
            },
          }
          for (const tableName of [
            'shedlock; DROP TABLE users',
            'a.b.c',
            '"quoted"',
            '[bracketed]',
            '',
            'x'.repeat(64),
            "shedlock' --",
          ]) {
            expect(() => sqliteLockProvider({ database, tableName })).toThrow(LockConfigurationError)
          }
          expect(() => sqliteLockProvider({ database, columnNames: { lockedBy: 'by--' } })).toThrow(
            /columnNames.lockedBy/,
          )
          expect(() => sqliteSchema({ tableName: 'x y' })).toThrow(LockConfigurationError)
        })

        it('rejects a missing or wrong database option', () => {
          // @ts-expect-error the database is required
          expect(() => sqliteLockProvider({})).toThrow(
            /pass your open better-sqlite3 Database, libsql Database or node:sqlite DatabaseSync/,
          )
          // @ts-expect-error not a database
          expect(() => sqliteLockProvider({ database: {} })).toThrow(LockConfigurationError)
        })
      })
    },
  )
}

describe('sqliteSchema', () => {
  it('is the ShedLock table with TEXT times, with the configured names', () => {
    expect(sqliteSchema()).toBe(
      'CREATE TABLE IF NOT EXISTS shedlock (\n  name TEXT NOT NULL PRIMARY KEY,\n  lock_until TEXT NOT NULL,\n  locked_at TEXT NOT NULL,\n  locked_by TEXT NOT NULL\n);',
    )
    expect(sqliteSchema({ tableName: 'aux.locks', columnNames: { lockedBy: 'owner' } })).toContain(
      'CREATE TABLE IF NOT EXISTS aux.locks (',
    )
    expect(sqliteSchema({ columnNames: { lockedBy: 'owner' } })).toContain('  owner TEXT NOT NULL\n')
  })
})

// ---- the race's child process ----

let childScript: string | undefined

/**
 * The child script, and the provider transpiled to plain JavaScript beside it (children are plain
 * Node processes, which cannot load the TypeScript sources on Node 20).
 */
function raceChild(): string {
  if (childScript) return childScript
  const srcDir = fileURLToPath(new URL('../../../src/', import.meta.url))
  const outDir = join(workDir, 'js')
  const sources = [
    ...walk(join(srcDir, 'core')),
    ...walk(join(srcDir, 'support')),
    ...walk(join(srcDir, 'providers', 'sqlite')),
  ]
  for (const source of sources) {
    const { outputText } = ts.transpileModule(readFileSync(source, 'utf8'), {
      fileName: source,
      compilerOptions: {
        target: ts.ScriptTarget.ES2023,
        module: ts.ModuleKind.ESNext,
        verbatimModuleSyntax: true,
        rewriteRelativeImportExtensions: true,
      },
    })
    const target = join(outDir, relative(srcDir, source)).replace(/\.ts$/, '.js')
    mkdirSync(dirname(target), { recursive: true })
    writeFileSync(target, outputText)
  }
  const script = join(workDir, 'race-child.mjs')
  writeFileSync(
    script,
    `
import { createRequire } from 'node:module'
const { sqliteLockProvider } = await import(${JSON.stringify(pathToFileURL(join(outDir, 'providers', 'sqlite', 'index.js')).href)})
const { lockConfiguration } = await import(${JSON.stringify(pathToFileURL(join(outDir, 'core', 'lock-configuration.js')).href)})
const [driver, driverPath, file, prefix, rounds] = process.argv.slice(2)
let database
if (driver === 'better-sqlite3' || driver === 'libsql') {
  const Database = createRequire(import.meta.url)(driverPath)
  database = new Database(file, { timeout: 5000 })
} else {
  const { DatabaseSync } = await import('node:sqlite')
  database = new DatabaseSync(file)
  database.exec('PRAGMA busy_timeout = 5000')
}
const provider = sqliteLockProvider({ database })
process.once('message', async ({ startAt }) => {
  const wins = []
  for (let round = 0; round < Number(rounds); round++) {
    const at = startAt + round * 25
    if (Date.now() < at) await new Promise((resolve) => setTimeout(resolve, at - Date.now()))
    wins.push((await provider.lock(lockConfiguration({ name: prefix + '-' + round, lockAtMostFor: '5m' }))) !== undefined)
  }
  process.send({ wins }, () => process.disconnect())
})
process.send({ ready: true })
`,
  )
  childScript = script
  return script
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? walk(path) : entry.name.endsWith('.ts') ? [path] : []
  })
}

function nextMessage({ child, stderr }: NodeProcess): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`child exited with code ${code} before answering:\n${stderr()}`))
    child.once('exit', onExit)
    child.once('message', (message) => {
      child.off('exit', onExit)
      resolve(message)
    })
  })
}
