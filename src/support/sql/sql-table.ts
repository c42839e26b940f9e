import { LockConfigurationError } from '../../core/errors.ts'

/** Column names of the lock table; ShedLock's defaults are `name`, `lock_until`, `locked_at`, `locked_by`. */
export interface SqlColumnNames {
  name: string
  lockUntil: string
  lockedAt: string
  lockedBy: string
}

/** Table and column options shared by the SQL providers and their schema helpers. */
export interface SqlTableOptions {
  /** Lock table, optionally schema-qualified (`ops.shedlock`). Plain SQL identifiers only. @default "shedlock" */
  tableName?: string
  /** Column names, for a table that does not use ShedLock's. Plain SQL identifiers only. */
  columnNames?: Partial<SqlColumnNames>
}

/** A validated table: every name is a plain identifier, safe to put into SQL text. */
export interface SqlTable {
  /** As given, possibly `schema.table`. */
  readonly table: string
  /** The table name without its schema, for `ON CONFLICT` aliases and catalog queries. */
  readonly bareTable: string
  readonly schema: string | undefined
  readonly columns: Readonly<SqlColumnNames>
}

export const DEFAULT_COLUMNS: Readonly<SqlColumnNames> = Object.freeze({
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
  const columns = { ...DEFAULT_COLUMNS, ...options.columnNames }
  for (const [key, value] of Object.entries(columns)) {
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
  const [first, second] = parts as [string, string | undefined]
  return Object.freeze({
    table,
    bareTable: second ?? first,
    schema: second === undefined ? undefined : first,
    columns: Object.freeze(columns),
  })
}

/** A UTC timestamp as SQL text, `YYYY-MM-DD HH:MM:SS.mmm`: what every dialect here parses, and sorts as text in time order. */
export function utcTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 23)
}
