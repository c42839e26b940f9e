import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'
import { ReplyCutter } from '../../support/sql/reply-cutter.ts'

// An acquire whose reply is lost after the server committed it (the pool's query_timeout, as
// docs/providers/postgres.md advises, or a reset link) is given back on a fresh connection; and an
// acquire that meets a row another transaction is still writing answers "not acquired" promptly,
// freeing its connection, rather than waiting for that commit.

const db = await postgresPoolOrSkip(2)
const table = uniqueTable('shedlock_pg_lost')
if (db) await db.query(postgresSchema({ tableName: table, fencingTokens: true }))
afterAll(async () => {
  await db?.query(`DROP TABLE IF EXISTS ${table}`)
  await db?.end()
})

const NOW = `timezone('utc', statement_timestamp())`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether the row of `name` is held now, on the server's clock. */
const held = async (name: string): Promise<boolean> =>
  (await db!.query(`SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > ${NOW}`, [name])).rowCount === 1

/** A pool of one connection through `proxy`, with the pool's own `query_timeout`, and one connection open. */
const poolThrough = async (proxy: ReplyCutter, queryTimeout: number): Promise<pg.Pool> => {
  const url = new URL(POSTGRES_URL)
  url.host = `127.0.0.1:${proxy.port}`
  const pool = new pg.Pool({ connectionString: url.toString(), max: 1, query_timeout: queryTimeout })
  pool.on('error', () => {})
  await pool.query('SELECT 1')
  return pool
}

describe.skipIf(!db)('postgres: a lost reply, a row being written', () => {
  for (const cut of ['query_timeout', 'reset'] as const) {
    it(`an acquire committed on the server whose reply is lost (${cut === 'reset' ? 'the connection reset after the commit' : "the pool's query_timeout while the reply never comes"}) is given back on a fresh connection`, async () => {
      const proxy = await ReplyCutter.start(Number(new URL(POSTGRES_URL).port || 5432))
      const pool = await poolThrough(proxy, 800)
      try {
        const provider = postgresLockProvider({ client: pool, tableName: table, fencingTokens: true, timeout: '5s' })
        const name = `lost-${cut}`
        // The first acquire reads the name column's length: done before the cut.
        await (await provider.lock(lockConfiguration({ name: `${name}-warm`, lockAtMostFor: '1m' })))!.unlock()
        if (cut === 'reset') proxy.resetAtNextReply()
        else proxy.dropReplies()
        const error = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        // The server committed it: the row is there, with this acquisition's owner.
        const { rows } = await db!.query(`SELECT locked_by FROM ${table} WHERE name = $1`, [name])
        expect(rows).toHaveLength(1)
        // Given back within a second or so, not held for lockAtMostFor (1 minute).
        const until = Date.now() + 3000
        while ((await held(name)) && Date.now() < until) await sleep(100)
        expect(await held(name)).toBe(false)
        // Free for another node at once.
        const other = postgresLockProvider({ client: db!, tableName: table, fencingTokens: true })
        expect(await other.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeDefined()
      } finally {
        await pool.end().catch(() => {})
        await proxy.close()
      }
    }, 20_000)
  }

  it('while another transaction writes the row (its commit waiting), an acquire answers "not acquired" within about a second and frees its connection', async () => {
    const name = 'being-written'
    const provider = postgresLockProvider({ client: db!, tableName: table, fencingTokens: true, timeout: '5s' })
    await (await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })))!.unlock()
    // A's transaction holds the row lock, as a commit waiting for a synchronous standby does.
    const a = new pg.Client({ connectionString: POSTGRES_URL })
    await a.connect()
    const b = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 })
    try {
      await a.query('BEGIN')
      await a.query(`UPDATE ${table} SET locked_by = 'a-committing' WHERE name = $1`, [name])
      const bProvider = postgresLockProvider({ client: b, tableName: table, fencingTokens: true, timeout: '5s' })
      const started = Date.now()
      const outcome = await bProvider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })).then(
        (lock) => ({ lock }),
        (error: unknown) => ({ error }),
      )
      const took = Date.now() - started
      expect(outcome).toEqual({ lock: undefined })
      expect(took).toBeLessThan(2500)
      // B's only connection is free again while A's transaction is still open.
      const ping = await Promise.race([b.query('SELECT 1 AS one'), sleep(1000).then(() => 'busy')])
      expect(ping).not.toBe('busy')
    } finally {
      await a.query('ROLLBACK').catch(() => {})
      await a.end()
      await b.end()
    }
  }, 20_000)
})
