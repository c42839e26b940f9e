import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  type PostgresClient,
  postgresFencingColumnDdl,
  postgresLockProvider,
  postgresSchema,
} from '../../../src/providers/postgres/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { expectStrictlyIncreasing, fencingWorkers } from '../../helpers/fencing-workers.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { registerSuite } from '../../helpers/register-suite.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

// fencingTokens on PostgreSQL: the statements, the error for a table without the column, Java
// ShedLock's statements on the same table, several processes, and the paused holder.

const pool = await postgresPoolOrSkip(8)
const NOW = `timezone('utc', statement_timestamp())`

/** A token that started afresh: above the floor, the clock in milliseconds times 1000, as it was a minute ago. */
const expectAboveFloor = (token: bigint | undefined): void => {
  expect(token).toBeTypeOf('bigint')
  expect(token! > BigInt(Date.now() - 60_000) * 1000n).toBe(true)
  expect(token! <= BigInt(Date.now() + 60_000) * 1000n).toBe(true)
}

describe.skipIf(!pool)('postgres fencing tokens', () => {
  const db = pool!
  const tables: string[] = []
  const newTable = async (fencingTokens = true): Promise<string> => {
    const table = uniqueTable('shedlock_pg_fence')
    tables.push(table)
    await db.query(postgresSchema({ tableName: table, fencingTokens }))
    return table
  }
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  describe('app time', () => {
    let table = ''
    beforeAll(async () => {
      table = await newTable()
    })
    registerSuite(
      lockProviderSuite({
        provider: () => postgresLockProvider({ client: db, tableName: table, useDbTime: false, fencingTokens: true }),
        isLocked: async (name) =>
          (await db.query(`SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > ${NOW}`, [name])).rowCount === 1,
        extensible: true,
        fencing: true,
      }).filter((c) => c.group === 'fencing'),
    )
  })

  /** A client that records the statements and runs them on the pool. */
  const recording = (): PostgresClient & { texts: string[] } => {
    const texts: string[] = []
    return {
      texts,
      query: async (text, values) => {
        texts.push(text)
        return db.query(text, values)
      },
    }
  }

  it("without fencingTokens the acquire statement is the one before tokens, byte for byte (Java ShedLock's four columns)", async () => {
    const table = await newTable(false)
    const client = recording()
    const lock = await postgresLockProvider({ client, tableName: table }).lock(
      lockConfiguration({ name: 'plain', lockAtMostFor: '1m' }),
    )
    expect(lock?.fencingToken).toBeUndefined()
    expect(client.texts.filter((text) => text.startsWith('INSERT'))).toEqual([
      `INSERT INTO ${table} AS t (name, lock_until, locked_at, locked_by) SELECT $1, ${NOW} + $3::float8 * interval '1 second', ${NOW}, $2 ` +
        "FROM (SELECT set_config('lock_timeout', '1000ms', true)) AS wait " +
        'ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by ' +
        'WHERE t.lock_until <= EXCLUDED.locked_at',
    ])
  })

  it('with fencingTokens: one statement per acquire, which counts the token up and returns it, and nothing more per release', async () => {
    const table = await newTable()
    const client = recording()
    const provider = postgresLockProvider({ client, tableName: table, fencingTokens: true })
    const tokens: bigint[] = []
    for (let i = 0; i < 3; i++) {
      const lock = await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))
      tokens.push(lock!.fencingToken!)
      expect(await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))).toBeUndefined()
      await lock!.unlock()
    }
    expectAboveFloor(tokens[0])
    expect(tokens).toEqual([tokens[0], tokens[0]! + 1n, tokens[0]! + 2n])
    // After the one read of the name column's length: acquire, refused acquire, release, three times.
    expect(client.texts.slice(1).map((text) => text.split(' ')[0])).toEqual(
      Array(3).fill(['INSERT', 'INSERT', 'UPDATE']).flat(),
    )
    const { rows } = await db.query(`SELECT fencing_token FROM ${table} WHERE name = 'counted'`)
    expect(rows[0].fencing_token).toBe(String(tokens[2]))
  })

  it('custom column names, the token column included', async () => {
    const table = uniqueTable('shedlock_pg_fence_cols')
    tables.push(table)
    const columnNames = { name: 'id', lockUntil: 'until_at', lockedAt: 'at', lockedBy: 'who', fencingToken: 'fence' }
    await db.query(postgresSchema({ tableName: table, columnNames, fencingTokens: true }))
    const provider = postgresLockProvider({ client: db, tableName: table, columnNames, fencingTokens: true })
    const first = await provider.lock(lockConfiguration({ name: 'cols', lockAtMostFor: '1m' }))
    await first!.unlock()
    const second = await provider.lock(lockConfiguration({ name: 'cols', lockAtMostFor: '1m' }))
    expectAboveFloor(first?.fencingToken)
    expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
    expect((await db.query(`SELECT fence FROM ${table} WHERE id = 'cols'`)).rows[0].fence).toBe(
      String(second!.fencingToken),
    )
  })

  it('a table without the column: the acquire rejects with LockProviderError naming the table and the lock and giving the ALTER TABLE, which fixes it', async () => {
    const table = await newTable(false)
    const provider = postgresLockProvider({ client: db, tableName: table, fencingTokens: true })
    const error = await provider.lock(lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' })).catch((e) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toBe(
      `postgres: could not acquire lock "no-column": table ${table} has no fencing_token column, which fencingTokens: true needs (Java ShedLock's table lacks it). Add it (Java ShedLock keeps working: the column is nullable and its statements leave it alone) with:\n` +
        `ALTER TABLE ${table} ADD COLUMN fencing_token BIGINT NULL;\nor create the provider without fencingTokens`,
    )
    expect(postgresFencingColumnDdl({ tableName: table })).toBe(
      `ALTER TABLE ${table} ADD COLUMN fencing_token BIGINT NULL;`,
    )
    await db.query(postgresFencingColumnDdl({ tableName: table }))
    const lock = await provider.lock(lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' }))
    expectAboveFloor(lock?.fencingToken)
  })

  it("Java ShedLock's statements on a table with the column: they leave it alone, and Node's next token is one more than Node's last", async () => {
    const table = await newTable()
    const provider = postgresLockProvider({ client: db, tableName: table, fencingTokens: true })
    // Java ShedLock's PostgreSQL statements with usingDbTime() (PostgresSqlServerTimeStatementsSource),
    // its parameters inlined: the insert-or-take-over-if-expired, and the unlock.
    const javaNow = "timezone('utc', CURRENT_TIMESTAMP)"
    const javaLock = (name: string, seconds: number) =>
      db.query(
        `INSERT INTO ${table}(name, lock_until, locked_at, locked_by) VALUES($1, ${javaNow} + make_interval(secs => $2), ${javaNow}, 'java-host') ` +
          `ON CONFLICT (name) DO UPDATE SET lock_until = ${javaNow} + make_interval(secs => $2), locked_at = ${javaNow}, locked_by = 'java-host' ` +
          `WHERE ${table}.name = $1 AND ${table}.lock_until <= ${javaNow}`,
        [name, seconds],
      )
    const javaUnlock = (name: string) =>
      db.query(
        `UPDATE ${table} SET lock_until = CASE WHEN locked_at + make_interval(secs => 0) > ${javaNow} THEN locked_at + make_interval(secs => 0) ELSE ${javaNow} END WHERE name = $1 AND locked_by = 'java-host'`,
        [name],
      )
    const tokenInTable = async (name: string): Promise<unknown> =>
      (await db.query(`SELECT fencing_token FROM ${table} WHERE name = $1`, [name])).rows[0]?.fencing_token
    // Java creates the row: NULL, and Node's takeover starts above the floor.
    expect((await javaLock('mixed', 60)).rowCount).toBe(1)
    expect(await tokenInTable('mixed')).toBeNull()
    expect(await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))).toBeUndefined()
    await javaUnlock('mixed')
    const first = await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))
    expectAboveFloor(first?.fencingToken)
    // Java respects Node's lock, then takes the row after Node's release, leaving the token as it was.
    expect((await javaLock('mixed', 60)).rowCount).toBe(0)
    await first!.unlock()
    expect((await javaLock('mixed', 60)).rowCount).toBe(1)
    expect(await tokenInTable('mixed')).toBe(String(first!.fencingToken))
    await javaUnlock('mixed')
    const second = await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))
    expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
  })

  it("a row deleted (removeExpired(), by hand, or by hand and then Java's INSERT): the next token is still greater than every earlier one", async () => {
    const table = await newTable()
    const provider = postgresLockProvider({ client: db, tableName: table, fencingTokens: true })
    const inspector = provider.inspector()
    const tokens: bigint[] = []
    const takeAndRelease = async (): Promise<void> => {
      const lock = await provider.lock(lockConfiguration({ name: 'deleted', lockAtMostFor: '1m' }))
      tokens.push(lock!.fencingToken!)
      await lock!.unlock()
    }
    // Counted up a few times, so that a restart at 1 (or at any count below) would show.
    for (let i = 0; i < 3; i++) await takeAndRelease()
    // Another task's expired row goes with the call too: removeExpired() deletes every expired row.
    await takeAndRelease()
    expect(await inspector.removeExpired()).toBe(1)
    await takeAndRelease()
    await db.query(`DELETE FROM ${table} WHERE name = 'deleted'`)
    await takeAndRelease()
    await db.query(`DELETE FROM ${table} WHERE name = 'deleted'`)
    await db.query(
      `INSERT INTO ${table}(name, lock_until, locked_at, locked_by) VALUES('deleted', ${NOW}, ${NOW}, 'java-host')`,
    )
    await takeAndRelease()
    // Deleted and taken again within one millisecond of its last token: a floor in whole
    // milliseconds would repeat it.
    for (let i = 0; i < 200; i++) {
      await db.query(`DELETE FROM ${table} WHERE name = 'deleted'`)
      await takeAndRelease()
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!, `token ${i}: ${tokens}`).toBe(true)
  })

  it('1,000 acquisitions from 4 processes (releases, extensions, expiries and takeovers): every token is new, each greater than all before it in holding order', async () => {
    const table = await newTable()
    const outcome = await fencingWorkers({
      workerProvider: `
import pg from 'pg'
import { postgresLockProvider } from 'shedlock/postgres'
const client = new pg.Pool({ connectionString: ${JSON.stringify(POSTGRES_URL)}, max: 2 })
export const provider = postgresLockProvider({ client, tableName: ${JSON.stringify(table)}, fencingTokens: true })
export const close = () => client.end()
`,
    })
    expectStrictlyIncreasing(outcome)
  }, 240_000)

  it('a holder paused (SIGSTOP) past lockAtMostFor: the node that took over writes with a greater token, and the resumed holder is refused', async () => {
    const table = await newTable()
    const outcome = await pausedHolder({
      holderProvider: `
import pg from 'pg'
import { postgresLockProvider } from 'shedlock/postgres'
export const provider = postgresLockProvider({ client: new pg.Pool({ connectionString: ${JSON.stringify(POSTGRES_URL)}, max: 1 }), tableName: ${JSON.stringify(table)}, fencingTokens: true })
`,
      taker: postgresLockProvider({ client: db, tableName: table, fencingTokens: true }),
    })
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.takerToken > outcome.holderToken).toBe(true)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
