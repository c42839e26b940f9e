import mysql from 'mysql2/promise'
import pg from 'pg'
import { connectOrSkip } from './backends.ts'

/** The PostgreSQL database of the tests: `SHEDLOCK_POSTGRES_URL`, by default the CI machine's. */
export const POSTGRES_URL = process.env.SHEDLOCK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
/** The MySQL/MariaDB database of the tests: `SHEDLOCK_MYSQL_URL`, by default the CI machine's. */
export const MYSQL_URL = process.env.SHEDLOCK_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'

/** A pg Pool of at most `max` connections that has answered a query; `undefined` (skipped) when unreachable and not required. */
export function postgresPoolOrSkip(max: number): Promise<pg.Pool | undefined> {
  return connectOrSkip('postgres', '127.0.0.1:5432 (SHEDLOCK_POSTGRES_URL)', () =>
    answering(new pg.Pool({ connectionString: POSTGRES_URL, max })),
  )
}

/** A mysql2 promise Pool of at most `connectionLimit` connections that has answered a query; `undefined` (skipped) when unreachable and not required. */
export function mysqlPoolOrSkip(connectionLimit: number): Promise<mysql.Pool | undefined> {
  return connectOrSkip('mysql', '127.0.0.1:3306 (SHEDLOCK_MYSQL_URL)', () =>
    answering(mysql.createPool({ uri: MYSQL_URL, connectionLimit })),
  )
}

/** Resolves to `pool` once it answers `SELECT 1`; otherwise ends it, so no socket keeps the test process alive. */
async function answering<P extends { query(sql: string): Promise<unknown>; end(): Promise<void> }>(
  pool: P,
): Promise<P> {
  try {
    await pool.query('SELECT 1')
    return pool
  } catch (error) {
    await pool.end()
    throw error
  }
}
