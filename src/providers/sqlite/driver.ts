import { CliError } from '../../support/admin-errors.ts'
import type { SqliteRowsDatabase } from './inspector.ts'
import { importDriver } from '../../support/import-driver.ts'

/** The SQLite drivers the CLI can use, most preferred first. */
export type SqliteDriverName = 'node:sqlite' | 'better-sqlite3' | 'libsql'

/** An open connection: what the provider and the inspector need, plus `exec` and `close`. */
export interface SqliteConnection extends SqliteRowsDatabase {
  exec(sql: string): unknown
  close(): unknown
}

/** A loaded driver. */
export interface SqliteDriver {
  readonly name: SqliteDriverName
  /** Opens (creating if needed) the file, with a 5 s busy timeout. */
  open(path: string): SqliteConnection
}

/** Busy timeout of every connection the CLI opens: a process that meets another's write waits this long. */
export const BUSY_TIMEOUT_MS = 5000

export const NO_DRIVER_MESSAGE =
  'no SQLite driver: install libsql (`npm i libsql`, prebuilt, nothing to compile) or better-sqlite3 (`npm i better-sqlite3`), or use Node >= 22.13 (which has node:sqlite)'

type Constructor = new (path: string, options?: { timeout?: number }) => SqliteConnection

const LOADERS: Record<SqliteDriverName, () => Promise<SqliteDriver>> = {
  'node:sqlite': loadNodeSqlite,
  'better-sqlite3': loadBetterSqlite3,
  libsql: loadLibsql,
}

/**
 * Loads a SQLite driver lazily: `only` if given, else `node:sqlite` when this Node has it
 * (>= 22.13), else `better-sqlite3` (the app may already have it), else `libsql`. Nothing is
 * imported until this is called.
 * @throws CliError with {@link NO_DRIVER_MESSAGE} when none loads.
 */
export async function loadSqliteDriver(only?: SqliteDriverName): Promise<SqliteDriver> {
  const reasons: string[] = []
  for (const name of only ? [only] : (['node:sqlite', 'better-sqlite3', 'libsql'] as const)) {
    try {
      return await LOADERS[name]()
    } catch (error) {
      reasons.push(`${name}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`)
    }
  }
  throw new CliError(`${NO_DRIVER_MESSAGE} (${reasons.join('; ')})`)
}

async function loadNodeSqlite(): Promise<SqliteDriver> {
  // A variable specifier: @types/node 20 does not declare node:sqlite, and bundlers leave it alone.
  const specifier = 'node:sqlite'
  const { DatabaseSync } = (await importQuietly(specifier)) as { DatabaseSync: Constructor }
  return {
    name: 'node:sqlite',
    open(path) {
      // node:sqlite waits 0 ms for a busy database unless told; the pragma works on every version.
      const database = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS })
      database.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`)
      return database
    },
  }
}

async function loadBetterSqlite3(): Promise<SqliteDriver> {
  // From the user's project first, as every CLI driver (support/import-driver.ts).
  const Database = (await importDriver<{ default: Constructor }>('better-sqlite3', 'better-sqlite3', 'sqlite:')).default
  // The import succeeds even when the native binary does not match this Node; opening loads it.
  new Database(':memory:').close()
  return { name: 'better-sqlite3', open: (path) => new Database(path, { timeout: BUSY_TIMEOUT_MS }) }
}

async function loadLibsql(): Promise<SqliteDriver> {
  const specifier = 'libsql'
  const Database = ((await import(specifier)) as { default: Constructor }).default
  // The binary comes prebuilt in a per-platform package (@libsql/<platform>): opening loads it.
  new Database(':memory:').close()
  // libsql waits 0 ms for a busy database unless given a timeout (better-sqlite3: 5 s).
  return { name: 'libsql', open: (path) => new Database(path, { timeout: BUSY_TIMEOUT_MS }) }
}

/** Imports without printing node:sqlite's "SQLite is an experimental feature" warning (Node 22). */
async function importQuietly(specifier: string): Promise<unknown> {
  const emitWarning = process.emitWarning
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]): void {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: unknown } | undefined)?.type
    const text = typeof warning === 'string' ? warning : warning.message
    const experimental =
      type === 'ExperimentalWarning' || (warning instanceof Error && warning.name === 'ExperimentalWarning')
    if (experimental && /sqlite/i.test(text)) return
    ;(emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest)
  } as typeof process.emitWarning
  try {
    return await import(specifier)
  } finally {
    process.emitWarning = emitWarning
  }
}
