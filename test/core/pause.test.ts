// A pause (issue 46): the task's lock held by "paused by …", as `shedlock pause` writes it. The
// executor tells it from a run by one read of the lock after a lost attempt, on the real
// PostgreSQL with its run ledger: plain runs, slot runs (skipped, not owed), catch-ups.
import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createLockingTaskExecutor,
  type LockConfiguration,
  type LockingTaskExecutorListener,
  lockConfiguration,
} from '../../src/index.ts'
import { describePause, isPauseHolder, pauseHolder, pauseOf } from '../../src/core/pause.ts'
import {
  postgresLockInspector,
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../src/providers/postgres/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { postgresPoolOrSkip } from '../helpers/sql-pools.ts'

describe('pause holders', () => {
  const record = (lockedBy: string, held = true) => ({
    name: 'report',
    lockUntil: new Date('2030-01-01T00:00:00Z'),
    lockedAt: new Date('2026-12-07T00:00:00Z'),
    lockedBy,
    held,
    remainingMs: 1,
  })

  it('reads who and why back from the holder a provider stored (with its owner suffix), or as written', () => {
    const holder = pauseHolder('alice@ops', 'deploy of 4.2')
    expect(holder).toBe('paused by alice@ops — deploy of 4.2')
    expect(pauseOf(record(`${holder}:4242:0123456789ab`))).toEqual({
      by: 'alice@ops',
      reason: 'deploy of 4.2',
      until: new Date('2030-01-01T00:00:00Z'),
    })
    expect(pauseOf(record(pauseHolder('bob')))).toMatchObject({ by: 'bob', reason: undefined })
  })

  it('is no pause when the lock is free, or held by a run', () => {
    expect(pauseOf(record(pauseHolder('bob'), false))).toBeUndefined()
    expect(pauseOf(record('web-1:77:0123456789ab'))).toBeUndefined()
    expect(pauseOf(undefined)).toBeUndefined()
    expect(isPauseHolder('paused-by-nobody')).toBe(false)
  })

  it('keeps the holder within 200 characters, cutting the reason first; a separator in a name cannot fake a reason', () => {
    expect(pauseHolder('carol', 'x'.repeat(500))).toHaveLength(200)
    expect(pauseHolder('d'.repeat(300))).toHaveLength(200)
    expect(pauseOf(record(pauseHolder('eve — not a reason')))).toMatchObject({
      by: 'eve - not a reason',
      reason: undefined,
    })
    expect(describePause({ by: 'alice', reason: 'deploy', until: new Date('2030-01-01T00:00:00Z') })).toBe(
      'paused by alice (deploy) until 2030-01-01T00:00:00.000Z',
    )
  })
})

const pool = await postgresPoolOrSkip(4)

describe.skipIf(!pool)('a paused task on PostgreSQL', () => {
  const db = pool!
  const table = uniqueTable('shedlock_pause')
  const runs = `${table}_runs`
  const provider = postgresLockProvider({ client: db, tableName: table })
  const inspector = postgresLockInspector({ client: db, tableName: table })
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

  /** Pauses `name` as `shedlock pause` does: its lock, taken by a provider whose holder is the pause. */
  async function pause(name: string, reason?: string, forMs = 3_600_000): Promise<void> {
    await setUp()
    const pausing = postgresLockProvider({ client: db, tableName: table, lockedBy: pauseHolder('alice', reason) })
    const taken = await pausing.lock(lockConfiguration({ name, lockAtMostFor: forMs, lockAtLeastFor: forMs }))
    expect(taken, `the pause of ${name} took its lock`).toBeDefined()
  }

  function paused(): { events: string[]; listener: LockingTaskExecutorListener } {
    const events: string[] = []
    const listener: LockingTaskExecutorListener = {
      onLockNotAcquired: () => void events.push('not-acquired'),
      onTaskPaused: (_: LockConfiguration, p) => void events.push(`paused: ${p.by} ${p.reason ?? ''}`.trim()),
      onSlotSkipped: () => void events.push('slot-skipped'),
      onSlotOwed: () => void events.push('slot-owed'),
    }
    return { events, listener }
  }

  it("skips a plain run with reason 'paused' and tells the listener who paused it and why; resumed, it runs", async () => {
    const name = `pause-plain-${randomUUID().slice(0, 8)}`
    await pause(name, 'deploy')
    const { events, listener } = paused()
    const executor = createLockingTaskExecutor(provider, { listener })
    let ran = 0
    const request = { name, lockAtMostFor: '10s' } as const
    expect(await executor.executeWithLock(() => ran++, request)).toEqual({ executed: false, reason: 'paused' })
    expect(events).toEqual(['not-acquired', 'paused: alice deploy'])
    expect(await inspector.release(name)).toBe(true)
    expect(await executor.executeWithLock(() => ran++, request)).toEqual({ executed: true, result: 0 })
    expect(ran).toBe(1)
    await executor.close()
  })

  it("a lock held by a run is still 'held', not 'paused'", async () => {
    const name = `pause-held-${randomUUID().slice(0, 8)}`
    await setUp()
    expect(await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeDefined()
    const executor = createLockingTaskExecutor(provider)
    expect(await executor.executeWithLock(() => 1, { name, lockAtMostFor: '10s' })).toEqual({
      executed: false,
      reason: 'held',
    })
    await executor.close()
  })

  it('a slot due during a pause is skipped on record, with the pause as its cause, and is not owed: it never runs after resume', async () => {
    const name = `pause-slot-${randomUUID().slice(0, 8)}`
    await pause(name, 'maintenance')
    const { events, listener } = paused()
    const executor = createLockingTaskExecutor(provider, { listener, runLedger: ledger })
    const other = createLockingTaskExecutor(provider, { runLedger: ledger })
    const slot = new Date(Math.floor(Date.now() / 1000) * 1000 - 5_000)
    const request = { name, lockAtMostFor: '10s', slot } as const
    let ran = 0
    expect(await executor.executeWithLock(() => ran++, request)).toEqual({ executed: false, reason: 'paused' })
    expect(await other.executeWithLock(() => ran++, request)).toEqual({ executed: false, reason: 'slot-done' })
    expect(events).toEqual(['not-acquired', 'paused: alice maintenance', 'slot-skipped'])
    const [row] = await ledger.history(name)
    expect(row).toMatchObject({ outcome: 'skipped', slot, error: { type: 'Paused' } })
    expect(row!.error!.message).toMatch(/^paused by alice \(maintenance\) until /)
    const records = await inspector.list({ prefix: `${name}@` })
    expect(
      records.locks
        .filter((r) => r.held)
        .map((r) => r.name)
        .filter((n) => n.includes('@o')),
      'owed records',
    ).toEqual([])
    expect(await inspector.release(name)).toBe(true)
    // Resumed: the slot stays done; the next one runs.
    expect(await other.executeWithLock(() => ran++, request)).toEqual({ executed: false, reason: 'slot-done' })
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(ran).toBe(0)
    const next = { ...request, slot: new Date(slot.getTime() + 1000) }
    expect(await other.executeWithLock(() => ran++, next)).toEqual({ executed: true, result: 0 })
    await Promise.all([executor.close(), other.close()])
  })

  it("a slot skipped because a run held the lock (overlap 'skip') records that run's holder", async () => {
    const name = `pause-skip-holder-${randomUUID().slice(0, 8)}`
    await setUp()
    const holding = postgresLockProvider({ client: db, tableName: table, lockedBy: 'worker-7' })
    expect(await holding.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeDefined()
    const executor = createLockingTaskExecutor(provider, { runLedger: ledger })
    const slot = new Date(Math.floor(Date.now() / 1000) * 1000)
    const result = await executor.executeWithLock(() => 1, { name, lockAtMostFor: '10s', slot, overlap: 'skip' })
    expect(result).toEqual({ executed: false, reason: 'held' })
    const [row] = await ledger.history(name)
    expect(row).toMatchObject({ outcome: 'skipped', error: { type: 'LockHeld' } })
    expect(row!.error!.message).toMatch(/^the lock was held by worker-7:\d+:[0-9a-f]{12}$/)
    await executor.close()
  })

  it("a catch-up that finds the task paused owes nothing, returns 'paused' and does not try again", async () => {
    const name = `pause-catch-up-${randomUUID().slice(0, 8)}`
    await setUp()
    const base = Math.floor(Date.now() / 1000) * 1000 - 30_000
    const executor = createLockingTaskExecutor(provider, { runLedger: ledger })
    expect(
      (await executor.executeWithLock(() => 1, { name, lockAtMostFor: '1s', slot: new Date(base) })).executed,
    ).toBe(true)
    await pause(name)
    const fireTimes = (from: Date, to: Date) =>
      Array.from({ length: 30 }, (_, k) => new Date(base + k * 1000)).filter((t) => t >= from && t <= to)
    let ran = 0
    const result = await executor.catchUp(
      () => void ran++,
      { name, lockAtMostFor: '10s' },
      {
        policy: 'all',
        within: '1h',
        fireTimes,
      },
    )
    expect(result.outcome).toBe('paused')
    expect(result.notRun).toEqual([])
    expect(await inspector.release(name)).toBe(true)
    // No retry left behind: after the resume, nothing ran by itself.
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    expect(ran).toBe(0)
    const records = await inspector.list({ prefix: `${name}@` })
    expect(records.locks.filter((r) => r.held && r.name.includes('@o')).length, 'owed records').toBe(0)
    await executor.close()
  })
})
