// The `requireSemiSync` option: an acquisition is kept only if semi-synchronous replication
// acknowledged it.
import type { LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { SqlAccessor } from '../../support/sql/sql-lock-provider.ts'
import { storeError } from '../../support/store-errors.ts'
import { type MysqlClient, PROVIDER } from './table.ts'

/**
 * `acquire`, with the semi-sync status read before and after it: a lock acquired while semi-sync
 * was off, or while a commit went unacknowledged, is given back with `giveBack` (an owner-checked
 * release to now: the row stays, so its fencing token is not lost) and the acquire rejects.
 */
export function semiSyncAcquire(
  client: MysqlClient,
  acquire: SqlAccessor['acquire'],
  giveBack: (c: LockConfiguration, owner: string) => Promise<void>,
): SqlAccessor['acquire'] {
  return async (c, owner) => {
    const before = await semiSyncState(client)
    if (before.problem !== undefined) throw semiSyncError(c, `${before.problem}; nothing was written`)
    const acquired = await acquire(c, owner)
    if (acquired === false) return false
    const after = await semiSyncState(client).catch((error: unknown) => ({
      problem: `its status could not be read (${String(error)})`,
      noTx: undefined,
    }))
    if (after.problem === undefined && after.noTx === before.noTx) return acquired
    // Maybe on the primary alone: a failover could grant it again. Given back, not run.
    await giveBack(c, owner).catch(() => {})
    const why =
      after.problem ??
      `a commit went unacknowledged meanwhile (Rpl_semi_sync_master_no_tx ${before.noTx} -> ${after.noTx}: a replica did not answer within rpl_semi_sync_master_timeout)`
    throw semiSyncError(c, `${why}; the lock was given back`)
  }
}

/** The semi-sync status of the server: `problem` says why a commit may not be on a replica. */
async function semiSyncState(client: MysqlClient): Promise<{ problem?: string; noTx?: number }> {
  // MariaDB and MySQL before 8.0.26 say master, later MySQL source.
  const [rows] = await client.query(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_no_tx', 'Rpl_semi_sync_source_status', 'Rpl_semi_sync_source_no_tx')",
    [],
  )
  const status = new Map<string, string>()
  for (const row of Array.isArray(rows) ? (rows as { Variable_name?: unknown; Value?: unknown }[]) : []) {
    status.set(String(row.Variable_name).toLowerCase().replace('_source_', '_master_'), String(row.Value))
  }
  const on = status.get('rpl_semi_sync_master_status')
  const noTx = Number(status.get('rpl_semi_sync_master_no_tx'))
  if (on === undefined)
    return {
      problem:
        'the server has no semi-synchronous replication (no Rpl_semi_sync_master_status; MySQL needs the rpl_semi_sync_source plugin)',
    }
  if (on !== 'ON')
    return {
      problem:
        'semi-synchronous replication is off (Rpl_semi_sync_master_status OFF: rpl_semi_sync_master_enabled is off, or no replica acknowledged in time and the primary went on asynchronously)',
      noTx,
    }
  return { noTx }
}

function semiSyncError(c: LockConfiguration, why: string): LockProviderError {
  return storeError(PROVIDER, 'acquire', c.name, `requireSemiSync is on, but ${why}; the task was not run`, undefined)
}
