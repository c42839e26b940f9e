import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import { sqlLockInspector } from '../../support/sql/sql-inspector.ts'
import { type SqlTableOptions, sqlTable } from '../../support/sql/sql-table.ts'
import { DB_NOW, DB_NOW_MS, epochMs } from '../../support/sql/sqlite-dialect.ts'
import { type D1LockDatabase, describeD1Error, NOT_A_BINDING, PROVIDER } from './table.ts'

/** Options of {@link d1LockInspector}: the provider's binding and table options. */
export interface D1LockInspectorOptions extends SqlTableOptions {
  /** Your D1 binding, e.g. `env.DB` (the provider's). */
  database: D1LockDatabase
}

/**
 * Reads and force-releases the locks of a D1 lock table, in the provider's format: for
 * dashboards, health endpoints and operators. Times are read on SQLite's `'now'` inside D1, the
 * clock the provider decides expiry on. One statement per call.
 *
 * A force-release sets `lock_until` to now and `locked_by` to `"released"` (the row stays, as
 * released rows do), so that the holder can no longer release, extend or re-hold it.
 *
 * ```ts
 * import { d1LockInspector } from 'shedlock/cloudflare-d1'
 * declare const env: { DB: Parameters<typeof d1LockInspector>[0]['database'] }
 * const inspector = d1LockInspector({ database: env.DB })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError when `database` is not a D1 binding, or for table or column names that are not plain SQL identifiers.
 */
export function d1LockInspector(options: D1LockInspectorOptions): LockInspector {
  const { database } = options ?? {}
  if (!database || typeof database.prepare !== 'function') throw new LockConfigurationError(NOT_A_BINDING)
  const table = sqlTable(PROVIDER, options)
  return sqlLockInspector({
    provider: PROVIDER,
    clock: "the D1 database's clock (SQLite's 'now' on its primary)",
    table,
    query: async (sql, params) =>
      (
        await database
          .prepare(sql)
          .bind(...(params as string[]))
          .all()
      ).results as Record<string, unknown>[],
    execute: async (sql, params) =>
      Number(
        (
          await database
            .prepare(sql)
            .bind(...(params as string[]))
            .run()
        ).meta.changes,
      ),
    dbNow: () => DB_NOW,
    nowMs: () => DB_NOW_MS,
    epochMs,
    // The stored text itself: what the provider wrote, compared as written.
    text: (column) => column,
    describe: describeD1Error(table),
  })
}
