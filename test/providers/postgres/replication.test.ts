// requireSynchronousStandby and read-only servers, against the shared PostgreSQL (no standby).
// The same options against a real primary and synchronous standby: test/ha (npm run test:ha).
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await postgresPoolOrSkip(4)
const config = (name: string) => lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: 0 })

describe.runIf(pool)('postgres: replication', () => {
  const db = pool!
  const table = uniqueTable('shedlock_pg_repl')
  const pools: pg.Pool[] = []
  beforeAll(async () => {
    await db.query(postgresSchema({ tableName: table }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    for (const p of pools) await p.end()
    await db.end()
  })

  it('requireSynchronousStandby refuses a server without a synchronous standby, naming why, and writes nothing', async () => {
    const provider = postgresLockProvider({ client: db, tableName: table, requireSynchronousStandby: true })
    const error = await provider.lock(config('sync-required')).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toMatch(
      /^postgres: could not acquire lock "sync-required": requireSynchronousStandby is on, but synchronous_standby_names is empty, so commits do not wait for a standby; synchronous_commit=on; the task was not run$/,
    )
    const { rowCount } = await db.query(`SELECT 1 FROM ${table} WHERE name = $1`, ['sync-required'])
    expect(rowCount).toBe(0)
    // Off (the default), the same server grants it.
    const lock = await postgresLockProvider({ client: db, tableName: table }).lock(config('sync-required'))
    expect(lock).toBeDefined()
    await lock!.unlock()
  })

  it('requireSynchronousStandby must be a boolean', () => {
    expect(() => postgresLockProvider({ client: db, requireSynchronousStandby: 'yes' as never })).toThrow(
      LockConfigurationError,
    )
  })

  it('a read-only server (a standby, a demoted primary) rejects with a LockProviderError that says so', async () => {
    // default_transaction_read_only fails writes with the SQLSTATE a hot standby answers (25006).
    const readOnly = new pg.Pool({
      connectionString: POSTGRES_URL,
      max: 1,
      options: '-c default_transaction_read_only=on',
    })
    pools.push(readOnly)
    const error = await postgresLockProvider({ client: readOnly, tableName: table })
      .lock(config('read-only'))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toMatch(
      /could not acquire lock "read-only": the server is read-only \(cannot execute INSERT in a read-only transaction\): a standby, or a primary that was demoted; the task was not run\. Point the pool at the primary/,
    )
  })
})
