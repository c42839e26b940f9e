// The catch-up's recovery paths (issue 26) on the real PostgreSQL: what the in-memory tests of
// catch-up.test.ts show, where the store's own round trips, row states and pool matter.
import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, LockProviderError, type LockProvider, lockConfiguration } from '../../src/index.ts'
import {
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../src/providers/postgres/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'

const pool = await postgresPoolOrSkip(6)
const SECOND = 1000
const everySecond = (from: Date, to: Date): Date[] => {
  const out: Date[] = []
  for (let t = Math.ceil(from.getTime() / SECOND) * SECOND; t <= to.getTime(); t += SECOND) out.push(new Date(t))
  return out
}
const lastSecond = (): Date => new Date(Math.floor(Date.now() / SECOND) * SECOND)

describe.skipIf(!pool)('catchUp on PostgreSQL', () => {
  const db = pool!
  const table = uniqueTable('shedlock_catchup')
  const runs = `${table}_runs`
  const provider = postgresLockProvider({ client: db, tableName: table })
  const ledger = postgresRunLedger({ client: db, tableName: runs })
  let ready: Promise<unknown> | undefined
  const setUp = () =>
    (ready ??= db
      .query(postgresSchema({ tableName: table }))
      .then(() => db.query(postgresRunsSchema({ tableName: runs }))))
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.query(`DROP TABLE IF EXISTS ${runs}`)
    await db.end()
  })
  const isHeld = async (name: string) =>
    (
      await db.query(`SELECT 1 FROM ${table} WHERE name = $1 AND lock_until > timezone('utc', statement_timestamp())`, [
        name,
      ])
    ).rowCount === 1

  /** The task ran at a slot `back` seconds ago; every slot since was missed. */
  async function ranAt(name: string, back: number, on: LockProvider = provider) {
    await setUp()
    const slot = new Date(lastSecond().getTime() - back * SECOND)
    const first = await createLockingTaskExecutor(on).executeWithLock(() => 'ran', { name, lockAtMostFor: '2s', slot })
    expect(first.executed).toBe(true)
    return slot
  }

  it("'once' over 3,000 missed one-second slots under a 2 s lock: one run, on a fresh lock no other node can take", async () => {
    // A name of its own per attempt: a retry must not find the first attempt's slot records.
    const name = `once-3000-${randomUUID()}`
    await ranAt(name, 3000)
    const observed: { left: number; others: boolean }[] = []
    const nodes = [
      createLockingTaskExecutor(provider, { runLedger: ledger }),
      createLockingTaskExecutor(provider, { runLedger: ledger }),
    ]
    let settled = 0
    const results = await Promise.all(
      nodes.map((node) =>
        node
          .catchUp(
            async ({ configuration, signal }) => {
              signal.throwIfAborted()
              const other = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
              observed.push({ left: configuration.lockAtMostUntil.getTime() - Date.now(), others: other !== undefined })
              // The run ends once the other node has had its look (at most 1 s, within the 2 s
              // lock): a run that ended before the other looked would leave it nothing missed.
              for (let i = 0; i < 20 && settled === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50))
            },
            { name, lockAtMostFor: '2s' },
            { policy: 'once', within: '1h', fireTimes: everySecond },
          )
          .finally(() => settled++),
      ),
    )
    expect(results.map((r) => r.outcome).sort()).toEqual(['held', 'ran'])
    // The node that found the lock held catches up again once it frees (issue 41): by then only
    // the seconds since are missed. No run ever shares the lock.
    await Promise.all(nodes.map((node) => node.close()))
    expect(observed.length).toBeGreaterThanOrEqual(1)
    for (const seen of observed) expect(seen.others).toBe(false)
    expect(observed[0]!.left).toBeGreaterThan(0)
    const ran = results.find((r) => r.outcome === 'ran')!
    expect(ran.missed.length).toBeGreaterThanOrEqual(3000)
    expect(ran.ran).toEqual([ran.missed.at(-1)])
  })

  it("the README's shutdown (close(), then pool.end()) during a catch-up leaves its lock released", async () => {
    const name = 'shutdown'
    await ranAt(name, 5)
    const own = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 })
    const executor = createLockingTaskExecutor(postgresLockProvider({ client: own, tableName: table }))
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    const catchingUp = executor.catchUp(
      async ({ signal }) => {
        started()
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      },
      { name, lockAtMostFor: '1m' },
      { policy: 'all', within: '1h', fireTimes: everySecond },
    )
    await running
    await executor.close().then(() => own.end())
    expect(await isHeld(name)).toBe(false)
    const result = await catchingUp
    expect(result.ran).toHaveLength(1)
    expect(result.notRun.length).toBeGreaterThan(0)
  })

  it('a slot fired during a catch-up is owed and runs on the firing node once the catch-up ends, once', async () => {
    const name = 'fired-during'
    await ranAt(name, 4)
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const ran: number[] = []
    let entered!: () => void
    const inside = new Promise<void>((resolve) => (entered = resolve))
    const catchingUp = createLockingTaskExecutor(provider).catchUp(
      async ({ slot }) => {
        ran.push(slot!.getTime())
        entered()
        await gate
      },
      { name, lockAtMostFor: '1m' },
      { policy: 'once', within: '1h', fireTimes: everySecond },
    )
    await inside
    const slot = new Date(lastSecond().getTime() + SECOND)
    const fired = createLockingTaskExecutor(provider).executeWithLock(({ slot }) => void ran.push(slot!.getTime()), {
      name,
      lockAtMostFor: '1m',
      slot,
    })
    // Owed, not skipped: it runs on the firing node once the catch-up releases the lock.
    expect(await fired).toEqual({ executed: false, reason: 'owed' })
    release()
    await catchingUp
    for (let i = 0; i < 100 && !ran.includes(slot.getTime()); i++)
      await new Promise((resolve) => setTimeout(resolve, 100))
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(ran.filter((t) => t === slot.getTime())).toHaveLength(1)
  })

  it('a claim given back after the store failed on the task lock is run by a later catch-up', async () => {
    const name = 'given-back'
    const last = await ranAt(name, 3)
    let fail = true
    const failing: LockProvider = {
      ...provider,
      lock: async (configuration) => {
        if (fail && configuration.name === name) throw new Error('connection reset')
        return provider.lock(configuration)
      },
    }
    const slot = new Date(last.getTime() + SECOND)
    await expect(
      createLockingTaskExecutor(failing).executeWithLock(() => 'never', { name, lockAtMostFor: '1m', slot }),
    ).rejects.toThrow(LockProviderError)
    fail = false
    const result = await createLockingTaskExecutor(provider).catchUp(
      () => {},
      { name, lockAtMostFor: '1m' },
      { policy: 'all', within: '1h', fireTimes: everySecond },
    )
    expect(result.ran[0]).toEqual(slot)
  })
})
