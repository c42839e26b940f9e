import { LockConfigurationError } from '../../core/errors.ts'

/** Column names of the lock table; ShedLock's defaults are `name`, `lock_until`, `locked_at`, `locked_by`. */
export interface SqlColumnNames {
  name: string
  lockUntil: string
  lockedAt: string
  lockedBy: string
  /**
   * The fencing token column, used only with `fencingTokens: true` (Java ShedLock's table has no
   * such column). @default "fencing_token"
   */
  fencingToken?: string
}

/** Table and column options shared by the SQL providers and their schema helpers. */
export interface SqlTableOptions {
  /** Lock table, optionally schema-qualified (`ops.shedlock`). Plain SQL identifiers only. @default "shedlock" */
  tableName?: string
  /** Column names, for a table that does not use ShedLock's. Plain SQL identifiers only. */
  columnNames?: Partial<SqlColumnNames>
  /**
   * Fencing tokens (docs/fencing.md). For a provider: every acquisition sets the row's
   * `fencing_token` column (`columnNames.fencingToken`) to its previous value plus one, in the
   * statement that takes the lock, and hands that number to the lock as `fencingToken` (a bigint,
   * strictly increasing per lock name; no extra round trip). A row without a token (new,
   * recreated after a delete, or inserted by Java ShedLock) starts at the floor: the database's
   * clock in whole milliseconds since the epoch times 1000, plus 1, above every token the name had
   * unless that clock went back by more than the time between the two acquisitions. The table needs
   * the column: a table without it makes every acquire reject with `LockProviderError` giving the
   * `ALTER TABLE` that adds it. For a schema helper: the DDL includes the column (`BIGINT NULL`).
   * Off by default because Java ShedLock's table lacks the column; Java's statements leave it as
   * it is. @default false
   */
  fencingTokens?: boolean
}

/** A validated table: every name is a plain identifier, safe to put into SQL text. */
export interface SqlTable {
  /** As given, possibly `schema.table`. */
  readonly table: string
  /** The table name without its schema, for `ON CONFLICT` aliases and catalog queries. */
  readonly bareTable: string
  readonly schema: string | undefined
  /** The four columns Java ShedLock's table has (no `fencingToken` key: see {@link SqlTable.fencingColumn}). */
  readonly columns: Readonly<Omit<SqlColumnNames, 'fencingToken'>>
  /** The fencing token column's name, given or `fencing_token`; used only when {@link SqlTable.fencing} is on. */
  readonly fencingColumn: string
  /** Whether `fencingTokens: true` was given. */
  readonly fencing: boolean
}

export const DEFAULT_COLUMNS: SqlTable['columns'] = Object.freeze({
  name: 'name',
  lockUntil: 'lock_until',
  lockedAt: 'locked_at',
  lockedBy: 'locked_by',
})

// Names are interpolated into SQL text, so only plain identifiers pass: never quote, never escape.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

/**
 * Validates table and column names.
 * @throws LockConfigurationError naming the provider and the bad value.
 */
export function sqlTable(provider: string, options: SqlTableOptions = {}): SqlTable {
  const table = options.tableName ?? 'shedlock'
  const parts = typeof table === 'string' ? table.split('.') : []
  if (parts.length < 1 || parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) {
    throw new LockConfigurationError(
      `${provider}: tableName ${JSON.stringify(table)} is not a plain SQL identifier; use letters, digits and underscores (at most 63), optionally prefixed by a schema, e.g. "shedlock" or "ops.shedlock"`,
    )
  }
  const { fencingToken: fencingColumn = DEFAULT_FENCING_COLUMN, ...named } = options.columnNames ?? {}
  const columns = { ...DEFAULT_COLUMNS, ...named }
  for (const [key, value] of Object.entries({ ...columns, fencingToken: fencingColumn })) {
    if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
      throw new LockConfigurationError(
        `${provider}: columnNames.${key} ${JSON.stringify(value)} is not a plain SQL identifier; use letters, digits and underscores (at most 63)`,
      )
    }
  }
  if (new Set(Object.values(columns).map((c) => c.toLowerCase())).size !== 4) {
    throw new LockConfigurationError(
      `${provider}: columnNames must be four different columns, got ${JSON.stringify(columns)}`,
    )
  }
  const fencing = options.fencingTokens ?? false
  if (typeof fencing !== 'boolean')
    throw new LockConfigurationError(
      `${provider}: fencingTokens must be true or false, got ${JSON.stringify(options.fencingTokens)}`,
    )
  if (fencing && Object.values(columns).some((c) => c.toLowerCase() === fencingColumn.toLowerCase()))
    throw new LockConfigurationError(
      `${provider}: columnNames.fencingToken ${JSON.stringify(fencingColumn)} is one of the lock columns ${JSON.stringify(columns)}; name a column of its own`,
    )
  const [first, second] = parts as [string, string | undefined]
  return Object.freeze({
    table,
    bareTable: second ?? first,
    schema: second === undefined ? undefined : first,
    columns: Object.freeze(columns),
    fencingColumn,
    fencing,
  })
}

/** The fencing token column's default name. */
export const DEFAULT_FENCING_COLUMN = 'fencing_token'

/** The options that name `t`'s table and columns again, e.g. for a schema helper's DDL in an error message. */
export function tableOptions(t: SqlTable): SqlTableOptions {
  return {
    tableName: t.table,
    columnNames: { ...t.columns, fencingToken: t.fencingColumn },
    fencingTokens: t.fencing,
  }
}

/**
 * The statement that adds the fencing token column to an existing lock table: a nullable column,
 * so Java ShedLock's statements, which name their four columns, keep working. `type`: `BIGINT`,
 * or SQLite's `INTEGER` (the same 64-bit integer).
 */
export function addFencingColumnDdl(t: SqlTable, type: 'BIGINT' | 'INTEGER' = 'BIGINT'): string {
  return `ALTER TABLE ${t.table} ADD COLUMN ${t.fencingColumn} ${type} NULL;`
}

/**
 * Whether a driver's message says the fencing token column is missing, when the provider uses
 * it: PostgreSQL's `column "fencing_token" ... does not exist`, MySQL's `Unknown column
 * 'fencing_token'`, SQLite's `no such column: fencing_token` or `has no column named fencing_token`.
 */
export function lacksFencingColumn(t: SqlTable, message: string): boolean {
  if (!t.fencing) return false
  // The column, maybe quoted or qualified, after "column", "column:" or "column named".
  const column = new RegExp(`\\bcolumn(?::| named)? ['"\`]?(?:[a-z0-9_]+\\.)?${t.fencingColumn.toLowerCase()}\\b`)
  return column.test(message.toLowerCase())
}

/** The advice for a table without the fencing token column: what to run, in `ddl`. */
export function missingFencingColumn(t: SqlTable, ddl: string): string {
  return `table ${t.table} has no ${t.fencingColumn} column, which fencingTokens: true needs (Java ShedLock's table lacks it). Add it (Java ShedLock keeps working: the column is nullable and its statements leave it alone) with:\n${ddl}\nor create the provider without fencingTokens`
}

/** A UTC timestamp as SQL text, `YYYY-MM-DD HH:MM:SS.mmm`: what every dialect here parses, and sorts as text in time order. */
export function utcTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 23)
}
