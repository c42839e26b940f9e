import type { SqlTableLimits } from '../../support/sql/sql-lock-provider.ts'
import { fencingTokenOf } from '../../support/sql/sql-lock-provider.ts'
import type { SqlTable } from '../../support/sql/sql-table.ts'

// What a statement resolves to: PostgresClient's (provider.ts) reply, restated here so that the
// provider's module, which imports this one, is not imported back.
interface QueryResult {
  rowCount: number | null
  rows?: unknown[]
}

/**
 * The lock statements of one PostgreSQL table, as builders over the time expressions (database
 * or app time); `guard` is the `requireSynchronousStandby` check, where it is on.
 */
export function postgresStatements(t: SqlTable, guard: string | undefined, lockWaitMs: number = LOCK_WAIT_MS) {
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  // With fencing tokens, a takeover adds 1 to the row's token, and the statement returns it: no
  // extra round trip. A row without a token (new, recreated after a delete, or inserted by Java
  // ShedLock, whose INSERT leaves the column NULL) starts above the floor, the database clock in
  // whole milliseconds times 1000: above every token the name had before (support/fencing.ts).
  // Without, the statement names exactly Java ShedLock's four columns and nothing more.
  const fencing = t.fencing
  const token = t.fencingColumn
  // Upsert-if-expired: a missing row is inserted, an expired one taken over, a held one left
  // alone. `from`: the rows to insert, `VALUES`, or a `SELECT` (guarded, or from the pair's claim).
  const upsertFrom = (from: string, returning: string): string =>
    `INSERT INTO ${t.table} AS t (${name}, ${lockUntil}, ${lockedAt}, ${lockedBy}${fencing ? `, ${token}` : ''}) ${from} ` +
    `ON CONFLICT (${name}) DO UPDATE SET ${lockUntil} = EXCLUDED.${lockUntil}, ${lockedAt} = EXCLUDED.${lockedAt}, ${lockedBy} = EXCLUDED.${lockedBy}` +
    `${fencing ? `, ${token} = COALESCE(t.${token} + 1, EXCLUDED.${token})` : ''} ` +
    `WHERE t.${lockUntil} <= EXCLUDED.${lockedAt}${returning}`
  const row = (nameSql: string, ownerSql: string, untilSql: string, nowSql: string): string =>
    `${nameSql}, ${untilSql}, ${nowSql}, ${ownerSql}${fencing ? `, ${FENCING_FLOOR}` : ''}`
  // The rows to insert come from a FROM item that first sets lock_timeout for this statement's
  // transaction only (set_config(..., true)): the row is produced, and the setting made, before
  // the insert meets a row another transaction is writing. So an acquire that meets a lock row
  // whose writer has not committed (say, its commit waits for a synchronous standby) fails with
  // 55P03 after lockWaitMs, read as "not acquired", instead of waiting with the connection.
  const noLongWait = `(SELECT set_config('lock_timeout', '${Math.max(1, Math.round(lockWaitMs))}ms', true)) AS wait`
  const guarded = (values: string): string =>
    `SELECT ${values} FROM ${noLongWait}${guard === undefined ? '' : ` WHERE ${guard}`}`
  return {
    upsert: (untilSql: string, nowSql: string): string =>
      upsertFrom(guarded(row('$1', '$2', untilSql, nowSql)), fencing ? ` RETURNING t.${token} AS fencing_token` : ''),
    // The paired acquire: the claim's upsert, and the task's from the claim's returned row, so
    // that the task's lock is only asked for once the claim is taken. One row per lock taken (so
    // that rowCount tells, for a client that returns no rows), with its token where fencing is
    // on. The task's upsert needs no guard: the claim's row passed it.
    pairOf: (claimUntil: string, task: readonly [string, string, string], nowSql: string): string => {
      const returning = ` RETURNING ${fencing ? `t.${token}` : '1'} AS taken`
      const [taskName, taskOwner, taskUntil] = task
      return (
        `WITH claim AS (${upsertFrom(guarded(row('$1', '$2', claimUntil, nowSql)), returning)}), ` +
        `task AS (${upsertFrom(`SELECT ${row(taskName, taskOwner, taskUntil, nowSql)} FROM claim`, returning)}) ` +
        "SELECT 'claim' AS what, taken FROM claim UNION ALL SELECT 'task', taken FROM task"
      )
    },
    // The paired acquire of many pairs (a tick's, batched): `input` a FROM item named i, one row
    // per pair, with its index k, the claim's name cn and owner co, the task's name tn and owner
    // tw; the untils are expressions over i. The claims first, then the tasks of the claims taken,
    // each in name order, so that two such statements lock rows in the same order and cannot
    // deadlock. One row per pair claimed: its index, and each lock's `taken` (NULL: not taken).
    pairsOf: (input: string, claimUntil: string, taskUntil: string, nowSql: string): string => {
      const returning = ` RETURNING t.${name} AS n, ${fencing ? `t.${token}` : '1'} AS taken`
      const where = guard === undefined ? '' : ` WHERE ${guard}`
      return (
        `WITH i AS (SELECT i.* FROM ${input}, ${noLongWait}), ` +
        `claim AS (${upsertFrom(`SELECT ${row('i.cn', 'i.co', claimUntil, nowSql)} FROM i${where} ORDER BY i.cn`, returning)}), ` +
        `task AS (${upsertFrom(`SELECT ${row('i.tn', 'i.tw', taskUntil, nowSql)} FROM i JOIN claim ON claim.n = i.cn ORDER BY i.tn`, returning)}) ` +
        'SELECT i.k, claim.taken AS claim, task.taken AS task FROM i JOIN claim ON claim.n = i.cn LEFT JOIN task ON task.n = i.tn'
      )
    },
    // The releases of many locks (a tick's task locks, batched): `input` a FROM item named i, one
    // row per lock with its name n and owner o; `untilSql` an expression over the row's t and the
    // input's row, `held`. The rows are locked in name order first, as the paired acquire takes
    // them, so that a batch of releases and a batch of acquires cannot deadlock. Owner-checked.
    releaseMany: (input: string, untilSql: string): string =>
      `WITH i AS (SELECT * FROM ${input}), ` +
      `held AS (SELECT t.${name} AS held_name, i.* FROM ${t.table} t JOIN i ON t.${name} = i.n AND t.${lockedBy} = i.o ORDER BY t.${name} FOR UPDATE OF t) ` +
      `UPDATE ${t.table} AS t SET ${lockUntil} = ${untilSql} FROM held WHERE t.${name} = held.held_name`,
    release: (untilSql: string): string =>
      `UPDATE ${t.table} SET ${lockUntil} = ${untilSql} WHERE ${name} = $1 AND ${lockedBy} = $2`,
    extension: (untilSql: string, nowSql: string): string =>
      `UPDATE ${t.table} SET ${lockUntil} = ${untilSql} WHERE ${name} = $1 AND ${lockedBy} = $2 AND ${lockUntil} > ${nowSql}${guard === undefined ? '' : ` AND ${guard}`}`,
  }
}

/**
 * How long an acquire waits for a lock row that another transaction is writing, in milliseconds:
 * a contender's acquire or release commits in a few milliseconds, so a longer wait means a
 * commit that hangs (a synchronous standby that does not answer, a transaction left open on the
 * row), which the lock is not free during anyway.
 */
export const LOCK_WAIT_MS = 1000

/**
 * The floor of a token that starts afresh: the database clock in microseconds since the epoch
 * (never below `fencingFloor()`'s milliseconds times 1000 at the same moment), plus 1. In whole
 * milliseconds, a row deleted and taken again within the millisecond of its last token repeated it.
 */
export const FENCING_FLOOR = `(floor(extract(epoch FROM statement_timestamp()) * 1000000)::bigint + 1)`

/** What a paired acquire's statement (`pairOf`) took: its rows, one per lock taken, the claim's first. */
export function pairedResult(result: QueryResult, fencing: boolean): readonly [boolean | bigint, boolean | bigint] {
  const taken = result.rowCount ?? 0
  if (!fencing) return [taken > 0, taken > 1]
  if (taken === 0) return [false, false]
  const tokenOf = (what: string): boolean | bigint => {
    const found = (result.rows as { what?: unknown; taken?: unknown }[] | undefined)?.find((r) => r.what === what)
    return found === undefined ? false : fencingTokenOf(found.taken)
  }
  return [tokenOf('claim'), tokenOf('task')]
}

/**
 * The declared length of the table's name column. to_regclass() resolves the name as the
 * statements do (search_path, schema-qualified, folded to lower case); unquoted column names fold
 * to lower case too. varchar(n) and char(n) store n + 4 in atttypmod; text and unbounded varchar
 * store -1.
 */
export async function readPostgresLimits(
  client: { query(text: string, values: unknown[]): Promise<QueryResult> },
  t: SqlTable,
): Promise<SqlTableLimits | undefined> {
  const { name } = t.columns
  const { rows } = await client.query(
    `SELECT CASE WHEN a.atttypid IN ('varchar'::regtype, 'bpchar'::regtype) AND a.atttypmod > 4 THEN a.atttypmod - 4 END AS max_length, ` +
      'format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = lower($2) AND a.attnum > 0 AND NOT a.attisdropped',
    [t.table, name],
  )
  // A client that returns no rows: no check, and no point in asking again.
  if (!Array.isArray(rows)) return {}
  const row = rows[0] as { max_length?: unknown; type?: unknown } | undefined
  // No such table or column: the acquire statement says so.
  if (!row) return undefined
  const max = row.max_length === null || row.max_length === undefined ? undefined : Number(row.max_length)
  return max === undefined
    ? {}
    : { maxNameLength: max, nameColumn: `column ${name} of ${t.table}, ${String(row.type)}` }
}
