import { LockConfigurationError } from '../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../core/lock-provider.ts'
import {
  createMysqlLockProvider,
  type MysqlAcquireMode,
  type MysqlLockProviderOptions,
} from '../providers/mysql/provider.ts'
import { postgresLockProvider } from '../providers/postgres/provider.ts'
import type { SqlLockProviderOptions } from '../support/sql/sql-lock-provider.ts'

// What the ORM adapters share: each turns its library's raw-SQL call into the small client the
// PostgreSQL or MySQL provider already takes, so the statements, formats and guarantees are the
// providers' own. No ORM is imported here or in the adapters: their instances are typed by the
// few members we call.

/** The SQL dialect of the database behind an ORM: `'mysql'` covers MySQL 8 and MariaDB 10.5+. */
export type OrmDialect = 'postgres' | 'mysql'

/** Options of the ORM adapters (`prismaLockProvider`, `knexLockProvider`, ...). */
export interface OrmLockProviderOptions extends SqlLockProviderOptions {
  /**
   * The database behind the instance. Give it when the adapter cannot tell (it names what it
   * could not read in its error). @default read from the instance
   */
  dialect?: OrmDialect
  /** MySQL/MariaDB only: see `mysqlLockProvider`'s `columnType`. @default read from the table */
  columnType?: MysqlLockProviderOptions['columnType']
  /** MySQL/MariaDB only, with `columnType`: see `mysqlLockProvider`'s `maxNameLength`. @default 64 */
  maxNameLength?: number
}

/** One statement's outcome as an adapter read it: the rows of a `SELECT`, or the count (and MySQL's `insertId`) of a write. */
export interface OrmStatementResult {
  rows?: Record<string, unknown>[]
  affectedRows?: number
  insertId?: unknown
}

/**
 * Runs one statement on a connection of its own, outside any transaction of the caller, and
 * commits it (autocommit). `sql` has the dialect's placeholders: `$1`, `$2`... on PostgreSQL,
 * `?` on MySQL. `kind` says whether rows (`SELECT`) or a count (a write) are wanted.
 */
export type OrmStatementRunner = (sql: string, values: unknown[], kind: 'rows' | 'write') => Promise<OrmStatementResult>

/**
 * Internal: the provider of `dialect` over `run`. `mysqlAcquire`: `'countOnly'` for a library
 * whose writes report a row count and no insertId (Prisma), see `MysqlAcquireMode`.
 */
export function ormSqlLockProvider(
  dialect: OrmDialect,
  runStatement: OrmStatementRunner,
  options: OrmLockProviderOptions,
  mysqlAcquire: MysqlAcquireMode = 'upsert',
): ExtensibleLockProvider & InspectableLockProvider {
  const run: OrmStatementRunner = async (sql, values, kind) => {
    try {
      return await runStatement(sql, values, kind)
    } catch (error) {
      throw withDriverCodes(error, dialect)
    }
  }
  // A write with RETURNING (PostgreSQL's acquire with fencingTokens) is run for its rows: the
  // row it returns is the acquisition, and its token.
  const kindOf = (sql: string): 'rows' | 'write' =>
    /^\s*(SELECT|WITH)\b/i.test(sql) || /\sRETURNING\s+[\w.]+(\s+AS\s+\w+)?\s*$/i.test(sql) ? 'rows' : 'write'
  if (dialect === 'postgres') {
    const client = {
      async query(text: string, values: unknown[]) {
        const kind = kindOf(text)
        const result = await run(text, values, kind)
        const rows = result.rows ?? []
        return { rows, rowCount: kind === 'rows' ? rows.length : (result.affectedRows ?? 0) }
      },
    }
    return postgresLockProvider({ ...options, client })
  }
  const client = {
    async query(sql: string, values: unknown[]): Promise<[unknown, unknown]> {
      const kind = kindOf(sql)
      const result = await run(sql, values, kind)
      return kind === 'rows'
        ? [result.rows ?? [], undefined]
        : [{ affectedRows: result.affectedRows ?? 0, insertId: result.insertId ?? 0 }, undefined]
    },
  }
  // The ORMs' replies to a compound statement are their own: slot runs take two statements here.
  return createMysqlLockProvider({ ...options, client }, mysqlAcquire, false)
}

/**
 * The ORM's error with the driver's `code` and `errno` on top, where the ORM wrapped them
 * (Sequelize's `parent`, Prisma's `meta.driverAdapterError.cause`, TypeORM's `driverError`): the
 * providers read them to tell a deadlock or serialization failure (not acquired; retried on
 * release), a duplicate key and a missing table (the error gives its DDL) from other failures.
 * Prisma gives a MySQL error number only as a string (`originalCode`): it becomes `errno`, which
 * the MySQL provider reads.
 */
function withDriverCodes(error: unknown, dialect: OrmDialect): unknown {
  if (!error || typeof error !== 'object') return error
  const e = error as Record<string, unknown> & { meta?: { driverAdapterError?: { cause?: unknown } } }
  const candidates = [e, e.parent, e.original, e.driverError, e.meta?.driverAdapterError?.cause, e.cause]
  for (const candidate of candidates) {
    if (!candidate || typeof candidate !== 'object') continue
    const { code, errno, originalCode } = candidate as { code?: unknown; errno?: unknown; originalCode?: unknown }
    // Prisma's own codes (P2010...) say only that a raw query failed.
    const driverCode =
      typeof originalCode === 'string'
        ? originalCode
        : typeof code === 'string' && !/^P\d{4}$/.test(code)
          ? code
          : undefined
    if (driverCode === undefined && typeof errno !== 'number') continue
    if (candidate === e) return error
    const number =
      typeof errno === 'number'
        ? errno
        : dialect === 'mysql' && driverCode !== undefined && /^\d+$/.test(driverCode)
          ? Number(driverCode)
          : undefined
    const wrapped = new Error(error instanceof Error ? error.message : String(error), { cause: error })
    return Object.assign(wrapped, { code: driverCode, errno: number })
  }
  return error
}

/** Internal: `options.dialect`, else what the adapter detected, else a `LockConfigurationError` naming the fix. */
export function chooseDialect(
  library: string,
  options: OrmLockProviderOptions | undefined,
  detected: string | undefined,
): OrmDialect {
  const given = options?.dialect
  if (given !== undefined) {
    if (given !== 'postgres' && given !== 'mysql')
      throw new LockConfigurationError(
        `${library}: dialect must be 'postgres' or 'mysql' (MySQL and MariaDB), got ${JSON.stringify(given)}`,
      )
    return given
  }
  if (detected === 'postgres' || detected === 'mysql') return detected
  throw new LockConfigurationError(
    detected === undefined
      ? `${library}: could not tell which database the instance talks to; pass { dialect: 'postgres' } or { dialect: 'mysql' }`
      : `${library}: the instance talks to ${detected}, which shedlock/orm does not support (PostgreSQL, MySQL and MariaDB only); use the shedlock provider of that store with its own driver`,
  )
}

/** Internal: PostgreSQL's `$1`-style placeholders rewritten as `?` (knex's), with the values in the order the `?` appear. */
export function questionMarks(sql: string, values: unknown[]): { sql: string; values: unknown[] } {
  const ordered: unknown[] = []
  const text = sql.replace(/\$(\d+)/g, (_, n: string) => {
    ordered.push(values[Number(n) - 1])
    return '?'
  })
  return { sql: text, values: ordered }
}

/** Internal: `?` placeholders rewritten as `$1`, `$2`... (Sequelize's bind parameters). The statements have no `?` inside literals. */
export function dollarNumbers(sql: string): string {
  let n = 0
  return sql.replace(/\?/g, () => `$${++n}`)
}

/** Internal: the error for a handle bound to a transaction or to one connection, naming the fix. */
export function transactionHandle(library: string, handle: string, root: string): LockConfigurationError {
  return new LockConfigurationError(
    `${library}: got ${handle}; a lock taken through it would join the transaction open on its connection, invisible to other nodes until it commits and gone if it rolls back. Pass ${root} instead: the provider runs each lock statement on its own connection, outside any transaction`,
  )
}
