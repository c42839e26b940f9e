import type { SqliteDatabase } from 'shedlock/sqlite'

/** What the examples use of a SQLite database: what shedlock needs, plus `exec()` and `close()`. */
export interface ExampleDatabase extends SqliteDatabase {
  exec(sql: string): unknown
  close(): unknown
}

const BUSY_TIMEOUT_MS = 5_000

/**
 * Opens the SQLite file at `path` with Node's built-in `node:sqlite` (Node >= 22.13), or with
 * libsql (better-sqlite3's API, prebuilt: nothing to compile) on older Node. Either way in WAL mode with `synchronous = NORMAL`, waiting up to
 * 5 s for another process's write lock: several processes share the file.
 */
export async function openSqlite(path: string): Promise<ExampleDatabase> {
  // A variable specifier: @types/node 20 has no node:sqlite, and Node 20 has no such module.
  const builtin = 'node:sqlite'
  const sqlite = (await import(builtin).catch(() => undefined)) as
    | { DatabaseSync?: new (path: string, options: { timeout: number }) => ExampleDatabase }
    | undefined
  let database: ExampleDatabase
  if (sqlite?.DatabaseSync) {
    database = new sqlite.DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS })
  } else {
    const { default: Database } = await import('libsql')
    database = new Database(path, { timeout: BUSY_TIMEOUT_MS })
  }
  await useWal(database)
  // better-sqlite3's default in WAL mode; node:sqlite's FULL waits for an fsync on every commit.
  database.exec('PRAGMA synchronous = NORMAL')
  return database
}

/**
 * Switches the file to WAL, retrying while another process does the same. The busy timeout does
 * not cover this: a connection that must upgrade its read lock to switch the journal gets
 * SQLITE_BUSY at once when another one is already writing (SQLite's deadlock avoidance).
 */
async function useWal(database: ExampleDatabase): Promise<void> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS
  for (;;) {
    try {
      database.exec('PRAGMA journal_mode = WAL')
      return
    } catch (error) {
      const busy =
        error instanceof Error &&
        /database is locked|SQLITE_BUSY/i.test(`${error.message} ${(error as { code?: unknown }).code}`)
      if (!busy || Date.now() >= deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 30))
    }
  }
}
