import advisoryLockModule from 'advisory-lock'
import pg from 'pg'
import {
  postgresLockProvider,
  type PostgresClient,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../src/providers/postgres/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  packageVersion,
  type Peer,
  type RawOperations,
  rawOwner,
  redactUrl,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['query'] }
const NOW = `timezone('utc', statement_timestamp())`
// The pool of the run: 16 callers plus the odd extra query.
const POOL_SIZE = 20

/** The provider's statements (database time, the default), issued through `client.query` directly. */
function rawPostgres(client: PostgresClient, table: string): RawOperations {
  const acquire =
    `INSERT INTO ${table} AS t (name, lock_until, locked_at, locked_by) VALUES ($1, ${NOW} + make_interval(secs => $3), ${NOW}, $2) ` +
    `ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by ` +
    `WHERE t.lock_until <= EXCLUDED.locked_at`
  const release = `UPDATE ${table} SET lock_until = GREATEST(locked_at + make_interval(secs => $3), ${NOW}) WHERE name = $1 AND locked_by = $2`
  return {
    async acquire(name) {
      const owner = rawOwner()
      const { rowCount } = await client.query(acquire, [name, owner, 60])
      if (!rowCount) return undefined
      return {
        async release() {
          await client.query(release, [name, owner, 0])
        },
      }
    },
  }
}

async function openPool(url: string, max: number): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: url, max })
  try {
    await pool.query('SELECT 1')
  } catch (error) {
    await pool.end()
    throw error
  }
  return pool
}

/** PostgreSQL at `SHEDLOCK_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`), through a `pg` Pool. */
export async function postgresSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  const pool = await openPool(url, POOL_SIZE)
  const tables: string[] = []
  const newTable = async (suffix: string): Promise<string> => {
    const table = `shedlock_bench_${context.runId}_${suffix}`
    tables.push(table)
    await pool.query(postgresSchema({ tableName: table }))
    return table
  }
  const table = await newTable('main')
  const runs = `${table}_runs`
  tables.push(runs)
  await pool.query(postgresRunsSchema({ tableName: runs }))
  const server = String((await pool.query('SHOW server_version')).rows[0]?.server_version)

  return {
    name: 'postgres',
    versions: {
      server: `PostgreSQL ${server}`,
      client: `pg ${packageVersion('pg')}, Pool of ${POOL_SIZE}`,
      url: redactUrl(url),
    },
    notes: [],
    provider: postgresLockProvider({ client: pool, tableName: table }),
    raw: rawPostgres(pool, table),
    counted() {
      const { client, counter } = countingProxy(pool, COUNT)
      return {
        provider: postgresLockProvider({ client, tableName: table }),
        raw: rawPostgres(client, table),
        counter,
        runLedger: postgresRunLedger({ client, tableName: runs }),
      }
    },
    async separateNode() {
      const own = await openPool(url, 1)
      const { client, counter } = countingProxy(own, COUNT)
      return { provider: postgresLockProvider({ client, tableName: table }), counter, close: () => own.end() }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const spaceTable = await newTable(label)
      return {
        provider: postgresLockProvider({ client: pool, tableName: spaceTable }),
        async fill(names) {
          await pool.query(
            `INSERT INTO ${spaceTable} (name, lock_until, locked_at, locked_by) SELECT n, ${NOW} + interval '1 hour', ${NOW}, 'another-node' FROM unnest($1::text[]) AS n`,
            [names],
          )
          await pool.query(`ANALYZE ${spaceTable}`)
        },
        async drain() {
          await pool.query(`TRUNCATE ${spaceTable}`)
        },
      }
    },
    async peers(): Promise<Peer[]> {
      // advisory-lock takes a connection string and opens a new connection for every lock, by design.
      const mutex = advisoryLockModule.default(url)
      const names = new Map<number, ReturnType<typeof mutex>>()
      return [
        {
          label: 'advisory-lock',
          description: `advisory-lock ${packageVersion('advisory-lock')}, tryLock() + unlock (a new connection per lock)`,
          maxConcurrency: 1,
          async operation(worker) {
            let lock = names.get(worker)
            if (!lock) {
              lock = mutex(`${context.runId}-advisory-${worker}`)
              names.set(worker, lock)
            }
            const release = await lock.tryLock()
            if (!release) throw new Error('advisory-lock: tryLock() found an uncontended lock held')
            await release()
          },
          async close() {},
        },
      ]
    },
    async close() {
      try {
        for (const t of tables) await pool.query(`DROP TABLE IF EXISTS ${t}`)
      } finally {
        await pool.end()
      }
    },
  }
}
