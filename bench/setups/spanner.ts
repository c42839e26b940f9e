import { type Database, Spanner, type Transaction } from '@google-cloud/spanner'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import {
  spannerLockProvider,
  spannerRunLedger,
  spannerRunsSchema,
  spannerSchema,
} from '../../src/providers/spanner/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  chunks,
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

// One lock operation is one read-write transaction, taken with getTransaction() (its read and its
// commit or rollback are methods of the transaction, uncounted); run() is a single-use query (the
// provider's one read of the name column's length).
const COUNT: CountSpec = { count: ['getTransaction', 'run'] }
const PROJECT = 'test-project'
const INSTANCE = 'test-instance'

/**
 * The provider's transaction, directly: read the row and CURRENT_TIMESTAMP() in the provider's one
 * query, insert or update it when missing or expired on the database's clock, else roll back;
 * release: read, and update if ours.
 * Retries aborted transactions as the provider does, so that both pay the emulator's aborts alike.
 */
function rawSpanner(database: Database, table: string): RawOperations {
  const inTransaction = async <T>(body: (tx: Transaction) => Promise<T>) => {
    for (let attempt = 0; ; attempt++) {
      const [tx] = await database.getTransaction()
      try {
        return await body(tx)
      } catch (error) {
        if ((error as { code?: unknown }).code !== 10) throw error
      } finally {
        tx.end()
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(200, 10 * 2 ** attempt) * (0.5 + Math.random())))
    }
  }
  // The provider's read: the row and the database's now in one query, whether or not the row exists.
  const sql = `SELECT CURRENT_TIMESTAMP() AS db_now, t.lock_until, t.locked_by FROM UNNEST([1]) AS one LEFT JOIN ${table} AS t ON t.name = @name`
  const read = async (tx: Transaction, name: string) => {
    const [rows] = await tx.run({ sql, params: { name }, json: true })
    return rows[0] as { db_now: Date; lock_until: Date | null; locked_by: string | null }
  }
  return {
    async acquire(name) {
      const owner = rawOwner()
      const taken = await inTransaction(async (tx) => {
        const row = await read(tx, name)
        const now = row.db_now.getTime()
        if (row.lock_until && row.lock_until.getTime() > now) {
          await tx.rollback()
          return false
        }
        const values = { name, lock_until: new Date(now + 60_000), locked_at: new Date(now), locked_by: owner }
        if (row.lock_until) tx.update(table, values)
        else tx.insert(table, values)
        await tx.commit()
        return true
      })
      if (!taken) return undefined
      return {
        async release() {
          await inTransaction(async (tx) => {
            const row = await read(tx, name)
            if (row.locked_by !== owner) return void (await tx.rollback())
            tx.update(table, { name, lock_until: row.db_now })
            await tx.commit()
          })
        },
      }
    },
  }
}

/** Google's Spanner emulator at `SPANNER_EMULATOR_HOST` (default 127.0.0.1:9010, scripts/services.sh), a database of the run's own. */
export async function spannerSetup(context: SetupContext): Promise<StoreSetup> {
  // Never the real service from the bench: the emulator, with the session settings it needs.
  process.env.SPANNER_EMULATOR_HOST ??= '127.0.0.1:9010'
  process.env.METADATA_SERVER_DETECTION ??= 'none'
  process.env.GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS ??= 'false'
  process.env.GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW ??= 'false'
  const clients: Spanner[] = []
  const open = (): Database => {
    const client = new Spanner({ projectId: PROJECT })
    clients.push(client)
    return client.instance(INSTANCE).database(`b${context.runId}`.slice(0, 30))
  }
  const instance = new Spanner({ projectId: PROJECT })
  clients.push(instance)
  const ddl = (table: string) => spannerSchema({ tableName: table, fencingTokens: true }).replace(/;$/, '')
  const [created, operation] = await instance.instance(INSTANCE).createDatabase(`b${context.runId}`.slice(0, 30), {
    schema: [
      ddl('shedlock'),
      ddl('shedlock_small'),
      ddl('shedlock_large'),
      ...spannerRunsSchema()
        .split(/;\n?/)
        .filter((s) => s.trim() !== ''),
    ],
  })
  await operation.promise()
  const database = open()
  const fill = async (table: string, names: readonly string[]): Promise<void> => {
    const until = new Date(Date.now() + 3_600_000)
    await inParallel(chunks(names, 1_000), 1, async (slice) => {
      await database
        .table(table)
        .upsert(slice.map((name) => ({ name, lock_until: until, locked_at: new Date(), locked_by: 'another-node' })))
    })
  }
  const drain = async (table: string): Promise<void> => {
    await database.runPartitionedUpdate({ sql: `DELETE FROM ${table} WHERE true` })
  }

  return {
    name: 'spanner',
    versions: {
      server: `Spanner emulator (google-cloud-cli-spanner-emulator), ${process.env.SPANNER_EMULATOR_HOST}`,
      client: `@google-cloud/spanner ${packageVersion('@google-cloud/spanner')}, one client, multiplexed sessions off`,
    },
    notes: [
      "Google's emulator, one process in memory on loopback, one read-write transaction at a time (it aborts the others): its figures show the client-side cost, not Spanner's latency, TrueTime or contention (docs/providers/spanner.md)",
    ],
    provider: spannerLockProvider({ database }),
    raw: rawSpanner(database, 'shedlock'),
    counted() {
      const { client: counted, counter } = countingProxy(database, COUNT)
      return {
        provider: spannerLockProvider({ database: counted }),
        raw: rawSpanner(counted, 'shedlock'),
        counter,
        runLedger: spannerRunLedger({ database: counted }),
      }
    },
    async separateNode() {
      const own = open()
      // The first request opens the channel and the session pool: not part of the race.
      const warm = await spannerLockProvider({ database: own }).lock(
        lockConfiguration({ name: `${context.runId}-warm-${clients.length}`, lockAtMostFor: 60_000 }),
      )
      await warm?.unlock()
      const { client: counted, counter } = countingProxy(own, COUNT)
      return {
        provider: spannerLockProvider({ database: counted }),
        counter,
        close: async () => void (await own.close()),
      }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const table = `shedlock_${label}`
      return {
        provider: spannerLockProvider({ database, tableName: table }),
        fill: (names) => fill(table, names),
        drain: () => drain(table),
      }
    },
    async close() {
      try {
        await created.delete().catch(() => {})
      } finally {
        for (const client of clients) client.close()
      }
    },
  }
}
