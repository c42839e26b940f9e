import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import {
  type SqliteDatabase,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../src/providers/sqlite/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import { packageVersion, type RawOperations, rawOwner, type SetupContext, type StoreSetup } from './setup.ts'

// A statement's run() is the store call; prepare() happens once per provider.
const COUNT: CountSpec = { count: ['run'], follow: ['prepare'] }
const FORMAT = `'%Y-%m-%d %H:%M:%f'`
const NOW = `strftime(${FORMAT}, 'now')`

/** The provider's statements (database time, the default), prepared once and run directly. */
function rawSqlite(database: SqliteDatabase, table: string): RawOperations {
  const acquire = database.prepare(
    `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES (?, strftime(${FORMAT}, 'now', ?), ${NOW}, ?) ` +
      `ON CONFLICT(name) DO UPDATE SET lock_until = excluded.lock_until, locked_at = excluded.locked_at, locked_by = excluded.locked_by ` +
      `WHERE lock_until <= excluded.locked_at`,
  )
  const release = database.prepare(
    `UPDATE ${table} SET lock_until = MAX(strftime(${FORMAT}, locked_at, ?), ${NOW}) WHERE name = ? AND locked_by = ?`,
  )
  return {
    async acquire(name) {
      const owner = rawOwner()
      if (Number(acquire.run(name, '+60.000 seconds', owner).changes) === 0) return undefined
      return {
        async release() {
          release.run('+0.000 seconds', name, owner)
        },
      }
    },
  }
}

/** A SQLite file in a temporary folder (WAL), through node:sqlite where Node has it, else better-sqlite3, else libsql (the CLI's choice). */
export async function sqliteSetup(context: SetupContext): Promise<StoreSetup> {
  const driver = await loadSqliteDriver()
  const folder = mkdtempSync(join(tmpdir(), `shedlock-bench-${context.runId}-`))
  const file = join(folder, 'locks.sqlite')
  const connections: SqliteConnection[] = []
  const open = (): SqliteConnection => {
    const connection = driver.open(file)
    connections.push(connection)
    return connection
  }
  const database = open()
  database.exec('PRAGMA journal_mode = WAL')
  const newTable = (suffix: string): string => {
    const table = `shedlock_${suffix}`
    database.exec(sqliteSchema({ tableName: table }))
    return table
  }
  const table = newTable('main')
  const runs = `${table}_runs`
  database.exec(sqliteRunsSchema({ tableName: runs }))
  const version = String(
    (database.prepare('SELECT sqlite_version() AS v') as unknown as { get(): { v: string } }).get().v,
  )

  return {
    name: 'sqlite',
    versions: {
      server: `SQLite ${version} (a file in ${tmpdir()}, WAL)`,
      client:
        driver.name === 'node:sqlite'
          ? `node:sqlite (Node ${process.versions.node})`
          : `${driver.name} ${packageVersion(driver.name)}`,
    },
    notes: ['synchronous driver: a statement blocks the event loop, so 16 callers run one after another'],
    provider: sqliteLockProvider({ database, tableName: table }),
    raw: rawSqlite(database, table),
    counted() {
      const { client, counter } = countingProxy(database, COUNT)
      return {
        provider: sqliteLockProvider({ database: client, tableName: table }),
        raw: rawSqlite(client, table),
        counter,
        runLedger: sqliteRunLedger({ database: client, tableName: runs }),
      }
    },
    async separateNode() {
      const own = open()
      const { client, counter } = countingProxy(own, COUNT)
      return {
        provider: sqliteLockProvider({ database: client, tableName: table }),
        counter,
        close: async () => void own.close(),
      }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const spaceTable = newTable(label)
      return {
        provider: sqliteLockProvider({ database, tableName: spaceTable }),
        async fill(names) {
          const insert = database.prepare(
            `INSERT INTO ${spaceTable} (name, lock_until, locked_at, locked_by) VALUES (?, strftime(${FORMAT}, 'now', '+3600 seconds'), ${NOW}, 'another-node')`,
          )
          database.exec('BEGIN')
          for (const name of names) insert.run(name)
          database.exec('COMMIT')
          database.exec(`ANALYZE ${spaceTable}`)
        },
        async drain() {
          database.exec(`DELETE FROM ${spaceTable}`)
        },
      }
    },
    async close() {
      for (const c of connections) {
        try {
          c.close()
        } catch {
          // Already closed.
        }
      }
      rmSync(folder, { recursive: true, force: true })
    },
  }
}
