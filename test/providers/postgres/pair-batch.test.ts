// The PostgreSQL provider's batched paired acquire (src/providers/postgres/pair-batch.ts), on the
// real server: a turn's pairs go as one statement; a batch that lands late is given back whole; a
// batch rolled back by a serialization failure is asked for again pair by pair; a client that
// returns no rows gets a statement per pair. The answers themselves are the conformance suite's
// ("pairs asked for in the same turn").
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LockConfiguration, lockConfiguration } from '../../../src/index.ts'
import { type LockProvider, lockPairOf, type PairedLocks } from '../../../src/core/lock-provider.ts'
import { type PostgresClient, postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { expectEachRejectedNaming } from '../../helpers/fail-closed.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

const pool = await postgresPoolOrSkip(8)

describe.skipIf(!pool)('postgres: paired acquires of one turn in one statement', () => {
  const db = pool!
  let table: string
  beforeAll(async () => {
    table = uniqueTable('shedlock_pg_batch')
    await db.query(postgresSchema({ tableName: table }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  // A client that records the statements it was given, and may hide the rows of their replies.
  const recording = (client: PostgresClient, hideRows = false) => {
    const sent: string[] = []
    const wrapped: PostgresClient = {
      async query(text, values) {
        sent.push(text)
        const result = await client.query(text, values)
        return hideRows ? { rowCount: result.rowCount } : result
      },
    }
    return { wrapped, sent }
  }
  const minute = (name: string): LockConfiguration => lockConfiguration({ name, lockAtMostFor: '1m' })
  let n = 0
  // `count` pairs of fresh names: a slot record and its task's lock each.
  const pairsOf = (count: number) =>
    Array.from({ length: count }, () => {
      const task = `batch-${process.pid}-${++n}`
      return { claim: `${task}@20260101T120000Z`, task }
    })
  const askAll = (provider: LockProvider, pairs: readonly { claim: string; task: string }[]) => {
    const pair = lockPairOf(provider)!
    return Promise.all(pairs.map(({ claim, task }) => pair(minute(claim), minute(task))))
  }
  const owner = async (name: string): Promise<string | undefined> =>
    ((await db.query(`SELECT locked_by FROM ${table} WHERE name = $1`, [name])).rows[0] as { locked_by?: string })
      ?.locked_by
  const releaseAll = (answers: readonly PairedLocks[]) =>
    Promise.all(answers.flatMap((answer) => answer.flatMap((h) => (h ? [h.unlock()] : []))))

  it("20 pairs asked for in one turn cost one statement, each taken by its own owner; their task locks' releases one more", async () => {
    const { wrapped, sent } = recording(db)
    const provider = postgresLockProvider({ client: wrapped, tableName: table })
    await (await provider.lock(minute(`warm-${process.pid}`)))!.unlock() // reads the table's limits
    sent.length = 0
    const pairs = pairsOf(20)
    const answers = await askAll(provider, pairs)
    expect(sent.length, sent.join('\n')).toBe(1)
    expect(sent[0]).toContain('json_to_recordset')
    expect(answers.every(([record, lock]) => record && lock)).toBe(true)
    const owners = await Promise.all(pairs.flatMap(({ claim, task }) => [owner(claim), owner(task)]))
    expect(new Set(owners).size, 'an owner per acquisition').toBe(40)
    // The task locks, released in one turn: one statement too, and each is free after it.
    sent.length = 0
    await Promise.all(answers.map(([, lock]) => lock!.unlock()))
    expect(sent.length, sent.join('\n')).toBe(1)
    const other = postgresLockProvider({ client: db, tableName: table })
    for (const { task } of pairs) await (await other.lock(minute(task)))!.unlock()
    await Promise.all(answers.map(([record]) => record!.unlock()))
  })

  it('a client that returns no rows gets one statement per pair, answered from its row counts', async () => {
    const { wrapped, sent } = recording(db, true)
    const provider = postgresLockProvider({ client: wrapped, tableName: table })
    await (await provider.lock(minute(`warm-rowless-${process.pid}`)))!.unlock()
    sent.length = 0
    const pairs = pairsOf(3)
    const holder = await postgresLockProvider({ client: db, tableName: table }).lock(minute(pairs[1]!.task))
    const answers = await askAll(provider, pairs)
    expect(sent.length).toBe(3)
    expect(answers.map(([record, lock]) => [record !== undefined, lock !== undefined])).toEqual([
      [true, true],
      [true, false],
      [true, true],
    ])
    await Promise.all([releaseAll(answers), holder!.unlock()])
  })

  it('a batch that commits after its timeout gives every pair back: another node takes them all', async () => {
    const pairs = pairsOf(3)
    // An expired record of the first pair, its row held by a transaction: the batch waits on it.
    const expired = await postgresLockProvider({ client: db, tableName: table }).lock(
      lockConfiguration({ name: pairs[0]!.claim, lockAtMostFor: 50 }),
    )
    expect(expired).toBeDefined()
    await new Promise((resolve) => setTimeout(resolve, 100))
    const commit = await holdRow(table, pairs[0]!.claim)
    const late = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 })
    try {
      const provider = postgresLockProvider({ client: late, tableName: table, timeout: '300ms' })
      await (await provider.lock(minute(`warm-late-${process.pid}`)))!.unlock()
      const pair = lockPairOf(provider)!
      const settled = await Promise.allSettled(pairs.map(({ claim, task }) => pair(minute(claim), minute(task))))
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected'])
      const before = await owner(pairs[0]!.claim)
      await commit()
      for (let i = 0; i < 50 && (await owner(pairs[0]!.claim)) === before; i++)
        await new Promise((r) => setTimeout(r, 100))
      expect(await owner(pairs[0]!.claim), 'the late batch never landed').not.toBe(before)
      const other = postgresLockProvider({ client: db, tableName: table })
      for (const name of pairs.flatMap(({ claim, task }) => [claim, task])) {
        let taken: Awaited<ReturnType<LockProvider['lock']>>
        for (let i = 0; i < 50 && !taken; i++) {
          taken = await other.lock(minute(name))
          if (!taken) await new Promise((r) => setTimeout(r, 100))
        }
        expect(taken, `the late batch kept "${name}"`).toBeDefined()
        await taken!.unlock()
      }
    } finally {
      await commit().catch(() => {})
      await late.end()
    }
  })

  it('every pair of a late batch rejects with LockProviderError naming its own lock', async () => {
    const pairs = pairsOf(2)
    const commit = await holdRow(table, pairs[0]!.claim, true)
    const late = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 })
    try {
      const provider = postgresLockProvider({ client: late, tableName: table, timeout: '300ms' })
      await (await provider.lock(minute(`warm-names-${process.pid}`)))!.unlock()
      const pair = lockPairOf(provider)!
      const settled = await Promise.allSettled(pairs.map(({ claim, task }) => pair(minute(claim), minute(task))))
      expectEachRejectedNaming(
        settled,
        pairs.map(({ claim }) => claim),
      )
    } finally {
      await commit()
      await late.end()
    }
  })

  it('a batch rolled back by a serialization failure is asked for again pair by pair, and takes them', async () => {
    const serializable = new pg.Pool({
      connectionString: POSTGRES_URL,
      max: 4,
      options: '-c default_transaction_isolation=serializable',
    })
    try {
      const { wrapped, sent } = recording(serializable)
      const provider = postgresLockProvider({ client: wrapped, tableName: table })
      await (await provider.lock(minute(`warm-ser-${process.pid}`)))!.unlock()
      const pairs = pairsOf(3)
      // An expired record, updated (still expired) by a transaction that commits while the batch
      // waits on its row: at serializable, the batch then fails with 40001.
      const expired = await postgresLockProvider({ client: db, tableName: table }).lock(
        lockConfiguration({ name: pairs[0]!.claim, lockAtMostFor: 50 }),
      )
      expect(expired).toBeDefined()
      await new Promise((resolve) => setTimeout(resolve, 100))
      const commit = await holdRow(table, pairs[0]!.claim, false, true)
      sent.length = 0
      const asked = askAll(provider, pairs)
      await new Promise((resolve) => setTimeout(resolve, 200))
      await commit()
      const answers = await asked
      expect(sent[0]).toContain('json_to_recordset')
      expect(sent.length, 'the batch, then a statement per pair').toBe(4)
      expect(answers.every(([record, lock]) => record && lock)).toBe(true)
      await releaseAll(answers)
    } finally {
      await serializable.end()
    }
  })
})

/**
 * Holds the row of `name` in an open transaction (inserting it first when `insert`; moving its
 * `lock_until` further into the past when `touch`); resolves to its commit (callable more than once).
 */
async function holdRow(table: string, name: string, insert = false, touch = false): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: POSTGRES_URL })
  await client.connect()
  await client.query('BEGIN')
  if (insert)
    await client.query(
      `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ($1, now() - interval '1 hour', now() - interval '1 hour', 'test')`,
      [name],
    )
  else await client.query(`SELECT * FROM ${table} WHERE name = $1 FOR UPDATE`, [name])
  if (touch)
    await client.query(`UPDATE ${table} SET lock_until = lock_until - interval '1 second' WHERE name = $1`, [name])
  let done: Promise<void> | undefined
  return () => {
    done ??= client.query('COMMIT').then(() => client.end())
    return done
  }
}
