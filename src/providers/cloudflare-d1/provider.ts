import { systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { type SqlLockProviderOptions, sqlLockProvider } from '../../support/sql/sql-lock-provider.ts'
import { sqlTable } from '../../support/sql/sql-table.ts'
import { preparedOnce, sqliteAccessor } from '../../support/sql/sqlite-dialect.ts'
import { d1LockInspector } from './inspector.ts'
import { type D1LockDatabase, type D1LockStatement, describeD1Error, NOT_A_BINDING, PROVIDER } from './table.ts'

/** Options of {@link d1LockProvider}. */
export interface D1LockProviderOptions extends SqlLockProviderOptions {
  /** Your D1 binding, e.g. `env.DB` in a Worker. */
  database: D1LockDatabase
}

/**
 * Locks in a Cloudflare D1 table in Java ShedLock's layout (create it with {@link d1Schema}),
 * the SQL of `shedlock/sqlite` sent to D1 through your binding: one round trip from the Worker
 * per acquire, release or extend. Extensible; with `useDbTime` (the default) expiry is decided on
 * SQLite's `'now'` on D1's primary, one clock for every Worker (keep it: a Worker's `Date.now()`
 * stands still while code runs). Pass the binding itself, not a `withSession()` session.
 *
 * ```ts
 * import { d1LockProvider } from 'shedlock/cloudflare-d1'
 * import { createLockingTaskExecutor } from 'shedlock'
 * type D1 = Parameters<typeof d1LockProvider>[0]['database']
 * export default {
 *   async scheduled(_controller: unknown, env: { DB: D1 }): Promise<void> {
 *     const executor = createLockingTaskExecutor(d1LockProvider({ database: env.DB }))
 *     await executor.executeWithLock(async () => {}, { name: 'nightly-report', lockAtMostFor: '10m' })
 *   },
 * }
 * ```
 *
 * See docs/providers/cloudflare-d1.md.
 *
 * @throws LockConfigurationError when `database` is not a D1 binding, for an empty `lockedBy`,
 *   or for table or column names that are not plain SQL identifiers.
 */
export function d1LockProvider(options: D1LockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  const { database } = options ?? {}
  if (!database || typeof database.prepare !== 'function') throw new LockConfigurationError(NOT_A_BINDING)
  const t = sqlTable(PROVIDER, options)
  const clock = options.clock ?? systemClock

  // D1 prepares without a round trip; a statement is kept per kind and bound anew for each call.
  const statement = preparedOnce((sql): D1LockStatement => database.prepare(sql))
  const accessor = sqliteAccessor(
    t,
    options.useDbTime ?? true,
    async (kind, sql, params) =>
      Number(
        (
          await statement(kind, sql)
            .bind(...params)
            .run()
        ).meta.changes,
      ),
    clock,
    // The RETURNING row comes back with the write: one round trip, as without tokens.
    async (kind, sql, params) =>
      (
        await statement(kind, sql)
          .bind(...params)
          .all()
      ).results[0] as Record<string, unknown> | undefined,
  )
  const inspect = { database, tableName: t.table, columnNames: t.columns }
  return {
    ...sqlLockProvider(PROVIDER, accessor, options, describeD1Error(t)),
    inspector: () => d1LockInspector(inspect),
  }
}
