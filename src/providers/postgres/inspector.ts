import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import { sqlLockInspector } from '../../support/sql/sql-inspector.ts'
import { type SqlTableOptions, sqlTable } from '../../support/sql/sql-table.ts'
import { DB_NOW, DB_NOW_MS, describePostgresError, epochMs, numbered, PROVIDER } from './table.ts'

/** The part of a `pg` Pool (node-postgres 8) that {@link postgresLockInspector} calls. */
export interface PostgresRowsClient {
  query(text: string, values: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>
}

/** @deprecated Renamed to {@link PostgresRowsClient}; this alias goes in the next major. */
export type PostgresRowsQueryable = PostgresRowsClient

/** Options of {@link postgresLockInspector}: the provider's client and table options. */
export interface PostgresLockInspectorOptions extends SqlTableOptions {
  /** Your `pg` Pool (the provider's). */
  client: PostgresRowsClient
}

/**
 * Reads and force-releases the locks of a PostgreSQL lock table, in the provider's format: for
 * dashboards, health endpoints and operators. Times are read on the PostgreSQL server's clock, the
 * one the provider decides expiry on. A force-release sets `lock_until` to now and `locked_by` to
 * `"released"` (the row stays, as released rows do), so the holder can no longer touch it.
 *
 * ```ts
 * import { postgresLockInspector } from 'shedlock/postgres'
 * const inspector = postgresLockInspector({ client: pool })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing client or table or column names that are not plain SQL identifiers.
 */
export function postgresLockInspector(options: PostgresLockInspectorOptions): LockInspector {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError('postgres: pass your pg Pool as { client } (an object with query(text, values))')
  }
  const table = sqlTable(PROVIDER, options)
  return sqlLockInspector({
    provider: PROVIDER,
    clock: "the PostgreSQL server's clock",
    table,
    query: async (sql, params) => (await client.query(numbered(sql), [...params])).rows,
    execute: async (sql, params) => (await client.query(numbered(sql), [...params])).rowCount ?? 0,
    dbNow: () => DB_NOW,
    releasedUntil: (now) => `date_trunc('milliseconds', ${now})`,
    nowMs: () => DB_NOW_MS,
    epochMs,
    text: (column) => `${column}::text`,
    describe: describePostgresError(table),
  })
}
