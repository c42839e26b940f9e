// Java ShedLock's Spanner format, both ways: rows written exactly as Java's SpannerStorageAccessor
// writes them (lukas-krecan/ShedLock, providers/spanner) are read as held and respected, and rows
// this provider writes are what Java's transactions read and respect.
import assert from 'node:assert/strict'
import { type Database, Spanner } from '@google-cloud/spanner'
import { afterAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { spannerLockInspector, spannerLockProvider, spannerSchema } from '../../../src/providers/spanner/index.ts'
import { ddlStatements, dropWhenIdle, emulatorSpanner, JAVA_DDL, newDatabase } from './emulator.ts'

const made = emulatorSpanner && (await newDatabase(emulatorSpanner))

interface JavaRow {
  name: string
  lock_until: Date
  locked_at: Date
  locked_by: string
}

describe.skipIf(!made)("spanner: Java ShedLock's format (emulator)", () => {
  const spanner = emulatorSpanner!
  const database = made as Database
  afterAll(() => dropWhenIdle(spanner, database))

  // Java's insertRecord and updateRecord: in one read-write transaction, readRow(name) of the four
  // columns; insert all four when there is no row, update all four when lock_until <= now (the
  // node's Timestamp.now()); lock_until is the configuration's lockAtMostUntil, locked_by the host.
  const javaLock = (name: string, lockAtMostForMs: number, host = 'java-host'): Promise<boolean> =>
    database.runTransactionAsync(async (tx) => {
      const [rows] = await tx.read('shedlock', {
        keys: [name],
        columns: ['name', 'lock_until', 'locked_by', 'locked_at'],
        json: true,
      })
      const found = rows[0] as JavaRow | undefined
      const now = Spanner.timestamp(Date.now())
      if (found && found.lock_until.getTime() > now.getTime()) {
        await tx.rollback()
        return false
      }
      const values = { name, lock_until: new Date(now.getTime() + lockAtMostForMs), locked_at: now, locked_by: host }
      if (found) tx.update('shedlock', values)
      else tx.insert('shedlock', values)
      await tx.commit()
      return true
    })
  // Java's unlock: lock_until = unlockTime, only when locked_by is this host.
  const javaUnlock = (name: string, unlockTime: Date, host = 'java-host'): Promise<boolean> =>
    database.runTransactionAsync(async (tx) => {
      const [rows] = await tx.read('shedlock', { keys: [name], columns: ['locked_by'], json: true })
      if ((rows[0] as { locked_by?: string } | undefined)?.locked_by !== host) {
        await tx.rollback()
        return false
      }
      tx.update('shedlock', { name, lock_until: unlockTime })
      await tx.commit()
      return true
    })
  const readRow = async (name: string): Promise<Record<string, unknown> | undefined> => {
    const [rows] = await database.run({
      sql: 'SELECT * FROM shedlock WHERE name = @name',
      params: { name },
      json: true,
    })
    return rows[0] as Record<string, unknown> | undefined
  }

  it("spannerSchema() is Java ShedLock's DDL (its integration test's), with IF NOT EXISTS", () => {
    const flat = (ddl: string) => ddl.replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').replace(/,\)/, ')')
    expect(flat(ddlStatements(spannerSchema())[0]!)).toBe(
      flat(JAVA_DDL).replace('CREATE TABLE', 'CREATE TABLE IF NOT EXISTS'),
    )
  })

  it('a row Java holds (microsecond timestamps) is read as held, refused, and left as it was', async () => {
    const name = `java-held-${Date.now()}`
    assert.equal(await javaLock(name, 3_600_000), true)
    const before = await readRow(name)
    expect(
      await spannerLockProvider({ database }).lock(lockConfiguration({ name, lockAtMostFor: '1m' })),
    ).toBeUndefined()
    expect(await readRow(name)).toEqual(before)
    const record = await spannerLockInspector({ database }).get(name)
    expect(record).toMatchObject({ name, held: true, lockedBy: 'java-host' })
    expect(record!.lockUntil!.getTime()).toBe((before!.lock_until as Date).getTime())
  })

  it('a row Java left expired is taken over in the same four columns; Java then respects it until it is released', async () => {
    const name = `java-expired-${Date.now()}`
    assert.equal(await javaLock(name, 1), true)
    await new Promise((resolve) => setTimeout(resolve, 20))
    const lock = await spannerLockProvider({ database }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(lock)
    const row = await readRow(name)
    expect(Object.keys(row!).sort()).toEqual(['lock_until', 'locked_at', 'locked_by', 'name'])
    expect(row!.lock_until).toBeInstanceOf(Date)
    expect(row!.locked_at).toBeInstanceOf(Date)
    expect(row!.locked_by).toBe(lock.lockedBy)
    // Java's own check (lock_until <= its now) refuses it, and its host-checked unlock leaves it.
    expect(await javaLock(name, 60_000)).toBe(false)
    expect(await javaUnlock(name, new Date())).toBe(false)
    await lock.unlock()
    expect(await javaLock(name, 60_000)).toBe(true)
    expect((await readRow(name))!.locked_by).toBe('java-host')
  })

  it('lockAtLeastFor: a released row stays held for Java too, until locked_at + lockAtLeastFor', async () => {
    const name = `java-least-${Date.now()}`
    const lock = await spannerLockProvider({ database }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '500ms' }),
    )
    assert.ok(lock)
    await lock.unlock()
    expect(await javaLock(name, 60_000)).toBe(false)
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(await javaLock(name, 60_000)).toBe(true)
  })

  it("Java's mutations leave the fencing column alone, and the count goes on above it", async () => {
    const name = `java-fenced-${Date.now()}`
    const fenced = spannerLockProvider({ database, tableName: 'shedlock_fenced', fencingTokens: true })
    const first = await fenced.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(first?.fencingToken)
    await first.unlock()
    // A Java node takes the row over: an update mutation of its four columns only.
    await database.table('shedlock_fenced').update({
      name,
      lock_until: new Date(Date.now() + 50),
      locked_at: new Date(),
      locked_by: 'java-host',
    })
    await new Promise((resolve) => setTimeout(resolve, 80))
    const second = await fenced.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(second?.fencingToken).toBe(first.fencingToken + 1n)
    await second?.unlock()
  })
})
