import { type Clock, systemClock } from '../../core/clock.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { retryConcurrencyFailures } from '../../support/sql/concurrency-retry.ts'
import {
  lockAtLeastAnchor,
  type SqlAccessor,
  type SqlLockProviderOptions,
  type SqlTableLimits,
  fencingTokenOf,
  sqlLockProvider,
} from '../../support/sql/sql-lock-provider.ts'
import { sqlTable, utcTimestamp } from '../../support/sql/sql-table.ts'
import { type PostgresRowsClient, postgresLockInspector } from './inspector.ts'
import { type PostgresPairParts, postgresPairs, postgresReleases } from './pair-batch.ts'
import { postgresStatements, readPostgresLimits } from './statements.ts'
import { DB_NOW, describePostgresError, PROVIDER } from './table.ts'

/**
 * The part of a `pg` Pool (node-postgres 8) that this provider calls. We don't import `pg`: any
 * client with this `query` works. Pass a Pool, so that every lock statement runs on its own
 * connection, outside any transaction of yours. `rows` is read from the query that finds the
 * `name` column's length (a client that returns no `rows` gets no name-length check) and, with
 * `fencingTokens`, from each acquire (`INSERT … RETURNING`), which then needs them.
 */
export interface PostgresClient {
  query(text: string, values: unknown[]): Promise<{ rowCount: number | null; rows?: unknown[] }>
}

/** @deprecated Renamed to {@link PostgresClient}; this alias goes in the next major. */
export type PostgresQueryable = PostgresClient

/** Options of {@link postgresLockProvider}. */
export interface PostgresLockProviderOptions extends SqlLockProviderOptions {
  /** Your `pg` Pool. The provider never opens connections of its own. */
  client: PostgresClient
  /**
   * Replication-safe acquisition: every acquire and extend statement checks, in the same
   * statement and session, that its commit waits for a synchronous standby, and fails with
   * `LockProviderError` (the task does not run) when it would not: `synchronous_standby_names`
   * empty, the session's `synchronous_commit` `off` or `local`, a `statement_timeout` (whose
   * cancel ends the wait for the standby and reports the commit as done), or no standby in
   * `sync` or `quorum` state in `pg_stat_replication` (the role needs `pg_read_all_stats`, or
   * `pg_monitor`, to see it). So a lock row that a promoted standby lacks was never handed out.
   * @default false
   */
  requireSynchronousStandby?: boolean
}

/**
 * Locks in a PostgreSQL table in Java ShedLock's format (create it with {@link postgresSchema}),
 * through your `pg` Pool: one upsert per acquire attempt, one `UPDATE` per release, and a slot
 * run's record and task lock in one statement. Extensible; the database clock decides expiry
 * unless `useDbTime: false`. Sessions at `repeatable read` or `serializable` work: a
 * serialization failure or deadlock on acquire means "not acquired".
 *
 * ```ts
 * import pg from 'pg'
 * import { postgresLockProvider } from 'shedlock/postgres'
 * const provider = postgresLockProvider({ client: new pg.Pool({ connectionString }) })
 * ```
 *
 * A name longer than the `name` column rejects with `LockConfigurationError` before the acquire
 * statement is sent. See docs/providers/postgres.md.
 *
 * @throws LockConfigurationError for table or column names that are not plain SQL identifiers.
 */
export function postgresLockProvider(
  options: PostgresLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { client } = options ?? {}
  if (!client || typeof client.query !== 'function') {
    throw new LockConfigurationError('postgres: pass your pg Pool as { client } (an object with query(text, values))')
  }
  const t = sqlTable(PROVIDER, options)
  const clock = options.clock ?? systemClock
  const useDbTime = options.useDbTime ?? true
  const rowCount = async (text: string, values: unknown[]): Promise<number> =>
    (await client.query(text, values)).rowCount ?? 0
  // Whether the client returns rows, as the limits' query found (it runs before the first acquire).
  let returnsRows = false
  const guard = requireSynchronousStandby(options.requireSynchronousStandby)
  const parts: AccessorParts = {
    // Built once: built per acquisition they cost 1.5–2.5 µs of client CPU a lock (bench overhead, 16 callers).
    statements: postgresStatements(t, guard),
    clock,
    lockedAt: t.columns.lockedAt,
    readLimits: () =>
      readPostgresLimits(
        {
          query: async (text, values) => {
            const result = await client.query(text, values)
            returnsRows = Array.isArray(result.rows)
            return result
          },
        },
        t,
      ),
    // A serialization failure or deadlock on acquire: another contender is writing the row right
    // now, and this statement rolled back, so nothing was written: not acquired.
    // With fencing tokens, the statement returns the row's new token (no row: not acquired).
    acquiring: async (text, values) => {
      try {
        const result = await client.query(text, values)
        if (!t.fencing || (result.rowCount ?? 0) === 0) return (result.rowCount ?? 0) > 0
        return fencingTokenOf((result.rows?.[0] as { fencing_token?: unknown } | undefined)?.fencing_token)
      } catch (error) {
        // 55P03: the row is being written by a transaction that has not committed within
        // LOCK_WAIT_MS (statements.ts): another node is taking or releasing it.
        if (isAcquireConflict(error)) return false
        throw error
      }
    },
    // Unlock and extend are idempotent and must not be lost to a rolled-back statement.
    retrying: (text, values) => retryConcurrencyFailures(() => rowCount(text, values), isConcurrencyFailure),
    pairs: {
      query: (text, values) => client.query(text, values),
      fencing: t.fencing,
      isConcurrencyFailure: isAcquireConflict,
      returnsRows: () => returnsRows,
    },
  }
  const accessor = useDbTime ? dbTimeAccessor(parts) : appTimeAccessor(parts)
  const inspect = { client: client as PostgresRowsClient, tableName: t.table, columnNames: t.columns }
  // Not a spread: the provider's paired acquisition is a property a spread does not copy.
  return Object.assign(sqlLockProvider(PROVIDER, accessor, options, describePostgresError(t)), {
    inspector: () => postgresLockInspector(inspect),
  })
}

/** What the accessors of both time modes are made of (see postgresLockProvider). */
interface AccessorParts {
  readonly statements: ReturnType<typeof postgresStatements>
  readonly clock: Clock
  readonly lockedAt: string
  readonly readLimits: () => Promise<SqlTableLimits | undefined>
  /** Runs an acquire statement: `false`, or `true` / the fencing token. */
  readonly acquiring: (text: string, values: unknown[]) => Promise<boolean | bigint>
  /** Runs a release or an extension, retrying concurrency failures: the rows it changed. */
  readonly retrying: (text: string, values: unknown[]) => Promise<number>
  readonly pairs: PostgresPairParts
}

// A float8 number of seconds times an interval, not make_interval(), which CockroachDB lacks:
// the same statements serve PostgreSQL and CockroachDB (Java ShedLock 7.3 casts for CockroachDB).
const untilIn = (secondsSql: string): string => `${DB_NOW} + ${secondsSql}::float8 * interval '1 second'`

/** The statements with the database's clock: every deadline is now() plus a number of seconds. */
function dbTimeAccessor({
  statements,
  clock,
  lockedAt,
  readLimits,
  acquiring,
  retrying,
  pairs,
}: AccessorParts): SqlAccessor {
  const { upsert, pairOf, pairsOf, release, releaseMany, extension } = statements
  const acquire = upsert(untilIn('$3'), DB_NOW)
  const extend = extension(untilIn('$3'), DB_NOW)
  const unlockFromLockedAt = release(`GREATEST(${lockedAt} + $3::float8 * interval '1 second', ${DB_NOW})`)
  const unlockFromNow = release(`GREATEST(${untilIn('$3')}, ${DB_NOW})`)
  const unlock: SqlAccessor['unlock'] = async (current, owner, acquired) => {
    const anchor = lockAtLeastAnchor(current, acquired, clock)
    await retrying(anchor.from === 'lockedAt' ? unlockFromLockedAt : unlockFromNow, [
      current.name,
      owner,
      anchor.seconds,
    ])
  }
  const acquireOne: SqlAccessor['acquire'] = (c, owner) => acquiring(acquire, [c.name, owner, c.lockAtMostFor / 1000])
  return {
    readLimits,
    replyLost: postgresReplyLost,
    acquire: acquireOne,
    acquirePair: postgresPairs(
      pairs,
      { acquire: acquireOne, unlock },
      {
        text: pairOf(untilIn('$3'), ['$4', '$5', untilIn('$6')], DB_NOW),
        values: ({ first: a, firstOwner, second: b, secondOwner }) => [
          a.name,
          firstOwner,
          a.lockAtMostFor / 1000,
          b.name,
          secondOwner,
          b.lockAtMostFor / 1000,
        ],
      },
      {
        text: pairsOf(
          'json_to_recordset($1::json) AS i(k int, cn text, co text, cs float8, tn text, tw text, ts float8)',
          untilIn('i.cs'),
          untilIn('i.ts'),
          DB_NOW,
        ),
        row: (r, k) => ({
          k,
          cn: r.first.name,
          co: r.firstOwner,
          cs: r.first.lockAtMostFor / 1000,
          tn: r.second.name,
          tw: r.secondOwner,
          ts: r.second.lockAtMostFor / 1000,
        }),
        extra: () => [],
      },
    ),
    extend: async (next, owner) => (await retrying(extend, [next.name, owner, next.lockAtMostFor / 1000])) > 0,
    unlock,
    unlockInBatch: postgresReleases(retrying, unlock, {
      text: releaseMany(
        'json_to_recordset($1::json) AS i(n text, o text, l boolean, s float8)',
        `GREATEST(CASE WHEN held.l THEN t.${lockedAt} ELSE ${DB_NOW} END + held.s * interval '1 second', ${DB_NOW})`,
      ),
      row: (current, owner, acquired) => {
        const anchor = lockAtLeastAnchor(current, acquired, clock)
        return { n: current.name, o: owner, l: anchor.from === 'lockedAt', s: anchor.seconds }
      },
    }),
  }
}

/** The statements with this process's clock (`useDbTime: false`): deadlines are sent as UTC timestamps. */
function appTimeAccessor({ statements, clock, readLimits, acquiring, retrying, pairs }: AccessorParts): SqlAccessor {
  const { upsert, pairOf, pairsOf, release, releaseMany, extension } = statements
  const acquire = upsert('$3::timestamp', '$4::timestamp')
  const extend = extension('$3::timestamp', '$4::timestamp')
  const at = (date: Date): string => utcTimestamp(date.getTime())
  const releasedUntil = (current: LockConfiguration): string =>
    utcTimestamp(Math.max(clock.now(), current.lockAtLeastUntil.getTime()))
  const releaseOne = release('$3::timestamp')
  const unlock: SqlAccessor['unlock'] = async (current, owner) => {
    await retrying(releaseOne, [current.name, owner, releasedUntil(current)])
  }
  const acquireOne: SqlAccessor['acquire'] = (c, owner) =>
    acquiring(acquire, [c.name, owner, at(c.lockAtMostUntil), utcTimestamp(clock.now())])
  return {
    readLimits,
    replyLost: postgresReplyLost,
    acquire: acquireOne,
    acquirePair: postgresPairs(
      pairs,
      { acquire: acquireOne, unlock },
      {
        text: pairOf('$3::timestamp', ['$5', '$6', '$7::timestamp'], '$4::timestamp'),
        values: ({ first: a, firstOwner, second: b, secondOwner }) => [
          a.name,
          firstOwner,
          at(a.lockAtMostUntil),
          utcTimestamp(clock.now()),
          b.name,
          secondOwner,
          at(b.lockAtMostUntil),
        ],
      },
      {
        text: pairsOf(
          'json_to_recordset($1::json) AS i(k int, cn text, co text, cu timestamp, tn text, tw text, tu timestamp)',
          'i.cu',
          'i.tu',
          '$2::timestamp',
        ),
        row: (r, k) => ({
          k,
          cn: r.first.name,
          co: r.firstOwner,
          cu: at(r.first.lockAtMostUntil),
          tn: r.second.name,
          tw: r.secondOwner,
          tu: at(r.second.lockAtMostUntil),
        }),
        extra: () => [utcTimestamp(clock.now())],
      },
    ),
    extend: async (next, owner) =>
      (await retrying(extend, [next.name, owner, at(next.lockAtMostUntil), utcTimestamp(clock.now())])) > 0,
    unlock,
    unlockInBatch: postgresReleases(retrying, unlock, {
      text: releaseMany('json_to_recordset($1::json) AS i(n text, o text, u timestamp)', 'held.u'),
      row: (current, owner) => ({ n: current.name, o: owner, u: releasedUntil(current) }),
    }),
  }
}

/** What starts the message of a failed replication check, inside PostgreSQL's cast error; see {@link describePostgresError}. */
export const REPLICATION_CHECK = 'shedlock requireSynchronousStandby: '

/**
 * The check of `requireSynchronousStandby`, a boolean SQL expression that raises an error naming
 * the problem: PostgreSQL has no RAISE outside PL/pgSQL, so the message is cast to an integer,
 * which fails with it. `current_setting()` is stable, so the planner cannot fold the cast away
 * and raise it when the check passes.
 */
function requireSynchronousStandby(on: unknown): string | undefined {
  if (on === undefined || on === false) return undefined
  if (on !== true)
    throw new LockConfigurationError(
      `postgres: requireSynchronousStandby must be true or false, got ${JSON.stringify(on)}`,
    )
  const fail = (problem: string): string =>
    `(${sqlText(REPLICATION_CHECK + problem)} || current_setting('synchronous_commit'))::int = 0`
  return (
    '(SELECT CASE ' +
    `WHEN current_setting('synchronous_standby_names') = '' THEN ${fail('synchronous_standby_names is empty, so commits do not wait for a standby; synchronous_commit=')} ` +
    `WHEN current_setting('synchronous_commit') NOT IN ('on', 'remote_write', 'remote_apply') THEN ${fail("the session's commits do not wait for the standby; set synchronous_commit to on, remote_write or remote_apply instead of ")} ` +
    `WHEN current_setting('statement_timeout') <> '0' THEN ${fail("statement_timeout is set, and its cancel ends a commit's wait for the standby while reporting the commit as done; set statement_timeout to 0 for the lock pool; synchronous_commit=")} ` +
    `WHEN NOT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) THEN ${fail('no synchronous standby is connected (none in sync or quorum state in pg_stat_replication; the role needs pg_read_all_stats to see them); synchronous_commit=')} ` +
    'ELSE true END)'
  )
}

function sqlText(text: string): string {
  return `'${text.replaceAll("'", "''")}'`
}

/** A serialization failure (40001, at `repeatable read` or `serializable`) or a deadlock (40P01): the statement rolled back. */
function isConcurrencyFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === '40001' || code === '40P01'
}

/** A concurrency failure, or 55P03: a lock row another transaction is writing did not come free within `LOCK_WAIT_MS`. */
function isAcquireConflict(error: unknown): boolean {
  return isConcurrencyFailure(error) || (error as { code?: unknown } | null)?.code === '55P03'
}

/**
 * Whether an acquire's error may hide a commit: anything but the server's own error reply, which
 * carries a SQLSTATE and a severity (pg's DatabaseError) and means the statement rolled back. A
 * pool's `query_timeout` ("Query read timeout"), a connection that ended or was reset: the
 * statement may have committed, or may still.
 */
export function postgresReplyLost(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as { code?: unknown; severity?: unknown }
  return !(typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string')
}
