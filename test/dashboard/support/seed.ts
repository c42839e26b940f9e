import { createLockingTaskExecutor, type LockingTaskExecutor, lockConfiguration } from '../../../src/index.ts'
import type { RunLedger, RunRecord } from '../../../src/core/run-ledger.ts'
import { slotRecordName } from '../../../src/core/slots.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../../src/providers/sqlite/driver.ts'
import {
  sqliteLockInspector,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../../src/providers/sqlite/index.ts'

// A store as an operator finds it: runs recorded by real executors on three nodes (ok, failed,
// lock lost, a slot skipped because the lock was held, slots missed and caught up, a run still
// holding its lock), and older history written through the run ledger itself.

const MINUTE = 60_000
const HOUR = 60 * MINUTE

/** A seeded SQLite store, with a run that holds its lock until `stop()`. */
export interface SeededStore {
  readonly file: string
  readonly ledger: RunLedger
  readonly inspector: ReturnType<typeof sqliteLockInspector>
  /** Every run of `name` in the ledger, newest first. */
  runs(name: string): Promise<RunRecord[]>
  /** Ends the run still holding "report" and closes the connection. */
  stop(): Promise<void>
}

/** The secret that the failure of "billing" carries in a URL; no page may show it. */
export const SECRET = 'hunter2-do-not-show'

async function open(
  file: string,
): Promise<{ db: SqliteConnection; ledger: RunLedger; executor: (node: string) => LockingTaskExecutor }> {
  const db = (await loadSqliteDriver()).open(file)
  db.exec(sqliteSchema())
  db.exec(sqliteRunsSchema())
  const ledger = sqliteRunLedger({ database: db })
  const executor = (node: string) =>
    createLockingTaskExecutor(sqliteLockProvider({ database: db, lockedBy: node }), {
      runLedger: ledger,
      // Every start written at once: the page shows report's run in progress as running.
      recordRunningAfter: 0,
    })
  return { db, ledger, executor }
}

/** The main store: tasks report, billing, cleanup, sync and nightly-export on node-a, node-b and node-c. */
export async function seedMain(file: string): Promise<SeededStore> {
  const { db, ledger, executor } = await open(file)
  const nodeA = executor('node-a')
  const nodeB = executor('node-b')
  const nodeC = executor('node-c')
  const now = Date.now()
  const past = (name: string, node: string, startedAt: number, outcome: 'ok' | 'failed', slot?: number) =>
    ledger.record({
      name,
      slot: slot === undefined ? undefined : new Date(slot),
      node: `${node}:4242:00000000000${Math.floor(startedAt / 1000) % 10}`,
      startedAt: new Date(startedAt),
      finishedAt: new Date(startedAt + 1500),
      outcome,
      durationMs: 1500,
      error: outcome === 'failed' ? { type: 'TimeoutError', message: 'upstream did not answer in 30 s' } : undefined,
    })
  // Older history of the day.
  for (let h = 20; h >= 2; h -= 3)
    await past('report', h % 2 === 0 ? 'node-a' : 'node-b', now - h * HOUR, h === 5 ? 'failed' : 'ok', now - h * HOUR)
  await past('billing', 'node-b', now - 3 * HOUR, 'ok')
  await past('sync', 'node-c', now - 4 * HOUR, 'ok')
  // Older than a day: stale under a 26 h maximum age.
  await past('nightly-export', 'node-a', now - 50 * HOUR, 'ok')

  // billing: fails, with a connection URL (and its password) in the message.
  await nodeB
    .executeWithLock(
      () => {
        throw new Error(`could not connect to postgres://billing:${SECRET}@db.internal/billing`)
      },
      { name: 'billing', lockAtMostFor: '1m' },
    )
    .catch(() => undefined)

  // sync: its lock expires while it runs (lock lost).
  await nodeC.executeWithLock(
    ({ signal }) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })),
    {
      name: 'sync',
      lockAtMostFor: '1s',
    },
  )

  // cleanup: ran at its slot 30 minutes ago; every node was down for the 4 next slots (every 5 min,
  // the schedule ends 10 minutes ago); a catch-up with policy 'once' runs the latest and records
  // the older ones as skipped.
  const s0 = Math.floor((now - 30 * MINUTE) / MINUTE) * MINUTE
  const provider = sqliteLockProvider({ database: db, lockedBy: 'node-b' })
  await provider.lock(lockConfiguration({ name: slotRecordName('cleanup', new Date(s0)), lockAtMostFor: '24h' }))
  await past('cleanup', 'node-b', s0, 'ok', s0)
  const fireTimes = function* (from: Date, to: Date): Iterable<Date> {
    for (let t = s0; t <= Math.min(to.getTime(), s0 + 20 * MINUTE); t += 5 * MINUTE)
      if (t >= from.getTime()) yield new Date(t)
  }
  const caught = await nodeA.catchUp(
    () => undefined,
    { name: 'cleanup', lockAtMostFor: '1m' },
    { policy: 'once', within: '1h', fireTimes },
  )
  if (caught.ran.length !== 1)
    throw new Error(`seed: the catch-up of cleanup ran ${caught.ran.length} slots, expected 1 (${caught.outcome})`)

  // report: node-a runs this minute's slot and holds the lock; node-c's next slot finds it held and
  // is skipped (overlap 'skip': by default it would be owed, and run once the lock frees).
  let finish: () => void = () => undefined
  const holding = new Promise<void>((resolve) => (finish = resolve))
  const slot = new Date(Math.floor(Date.now() / 1000) * 1000)
  let started: () => void = () => undefined
  const running = new Promise<void>((resolve) => (started = resolve))
  const held = nodeA.executeWithLock(
    async () => {
      started()
      await holding
    },
    { name: 'report', lockAtMostFor: '10m', slot },
  )
  await running
  const skipped = await nodeC.executeWithLock(() => undefined, {
    name: 'report',
    lockAtMostFor: '10m',
    slot: new Date(slot.getTime() + 1000),
    overlap: 'skip',
  })
  if (skipped.executed) throw new Error('seed: the second slot of report ran while the lock was held')

  return {
    file,
    ledger,
    inspector: sqliteLockInspector({ database: db }),
    runs: (name) => ledger.history(name, { limit: 1000 }),
    stop: async () => {
      finish()
      await held.catch(() => undefined)
      for (const e of [nodeA, nodeB, nodeC]) await e.close()
      db.close()
    },
  }
}

/** A second store: one healthy task on node-d, and a lock held by a job that records no runs. */
export async function seedSecond(file: string): Promise<SeededStore> {
  const { db, ledger, executor } = await open(file)
  const nodeD = executor('node-d')
  await nodeD.executeWithLock(() => undefined, { name: 'mailer', lockAtMostFor: '1m' })
  const provider = sqliteLockProvider({ database: db, lockedBy: 'maintenance-host' })
  await provider.lock(lockConfiguration({ name: 'maintenance', lockAtMostFor: '30m' }))
  return {
    file,
    ledger,
    inspector: sqliteLockInspector({ database: db }),
    runs: (name) => ledger.history(name, { limit: 1000 }),
    stop: async () => {
      await nodeD.close()
      db.close()
    },
  }
}
