// Java ShedLock's Datastore format, both ways, on the emulator. `javaNode` does what Java
// ShedLock's DatastoreStorageAccessor (shedlock-provider-datastore) does, step by step, through
// the Node client: kind "lock", key name = lock name, Timestamp `lock_until` and `locked_at`,
// String `locked_by` = the host name; insert with `txn.add`, takeover in a transaction when
// `lock_until` is before now, rebuilding the entity from the one read (other properties kept),
// unlock and extend only for its own host name.
import assert from 'node:assert/strict'
import type { Datastore } from '@google-cloud/datastore'
import { describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { datastoreLockInspector, datastoreLockProvider } from '../../../src/providers/datastore/index.ts'
import { emulatorOrSkip } from './emulator.ts'

const emulator = await emulatorOrSkip()

const HOST = 'java-host'

/** Java ShedLock's DatastoreStorageAccessor, its default configuration. */
function javaNode(datastore: Datastore, namespace: string) {
  const key = (name: string) => datastore.key({ namespace, path: ['lock', name] })
  const inTransaction = async (work: (txn: ReturnType<Datastore['transaction']>) => Promise<boolean>) => {
    const txn = datastore.transaction()
    await txn.run()
    try {
      const result = await work(txn)
      await txn.commit()
      return result
    } catch {
      // Java: any DatastoreException means "no".
      return false
    }
  }
  const insert = (name: string, until: Date) =>
    inTransaction(async (txn) => {
      txn.insert({ key: key(name), data: { lock_until: until, locked_at: new Date(), locked_by: HOST } })
      return true
    })
  const updateExisting = (name: string, until: Date) =>
    inTransaction(async (txn) => {
      const [entity] = await txn.get(key(name), { wrapNumbers: true })
      if (!(entity?.lock_until instanceof Date) || !(entity.lock_until.getTime() < Date.now())) return false
      txn.update({ key: key(name), data: { ...entity, lock_until: until, locked_at: new Date(), locked_by: HOST } })
      return true
    })
  return {
    /** StorageBasedLockProvider: insert, else take over an expired record. */
    lock: async (name: string, until: Date) => (await insert(name, until)) || updateExisting(name, until),
    unlock: (name: string) =>
      inTransaction(async (txn) => {
        const [entity] = await txn.get(key(name), { wrapNumbers: true })
        if (entity?.locked_by !== HOST || !(entity.lock_until.getTime() >= Date.now())) return false
        txn.update({ key: key(name), data: { ...entity, lock_until: new Date() } })
        return true
      }),
  }
}

describe.skipIf(!emulator)('datastore: Java ShedLock’s entities, both ways (the Datastore emulator)', () => {
  const { datastore, namespace } = emulator!
  const key = (name: string) => datastore.key({ namespace, path: ['lock', name] })
  const read = async (name: string) =>
    (await datastore.get(key(name), { wrapNumbers: true }))[0] as Record<string | symbol, unknown> | undefined
  const provider = () => datastoreLockProvider({ datastore })
  const java = javaNode(datastore, namespace)
  const unique = (what: string) => `${what}-${Math.random().toString(36).slice(2)}`
  const inAMinute = () => new Date(Date.now() + 60_000)

  it("writes kind lock, key name = lock name, Timestamps lock_until and locked_at, String locked_by, and shedlock's Integer fencing_token", async () => {
    const name = unique('format')
    const configuration = lockConfiguration({ name, lockAtMostFor: '1h' })
    const before = Date.now()
    const lock = await provider().lock(configuration)
    assert.ok(lock)
    const entity = await read(name)
    assert.ok(entity)
    const stored = entity[datastore.KEY] as { kind: string; name: string; namespace: string }
    expect([stored.kind, stored.name, stored.namespace]).toEqual(['lock', name, namespace])
    expect(Object.keys(entity).sort()).toEqual(['fencing_token', 'lock_until', 'locked_at', 'locked_by'])
    // The client decodes only a timestampValue to a Date, and an integerValue to a wrapped Int.
    expect(entity.lock_until).toEqual(configuration.lockAtMostUntil)
    assert.ok(entity.locked_at instanceof Date)
    expect(entity.locked_at.getTime()).toBeGreaterThanOrEqual(before)
    expect(entity.locked_by).toBe(lock.lockedBy)
    expect(entity.fencing_token).toMatchObject({ type: 'DatastoreInt', value: String(lock.fencingToken) })
  })

  it('a lock Java holds reads as held by Java; ours cannot take it until Java unlocks it', async () => {
    const name = unique('java-holds')
    const until = inAMinute()
    expect(await java.lock(name, until)).toBe(true)
    expect(Object.keys((await read(name))!).sort()).toEqual(['lock_until', 'locked_at', 'locked_by'])
    expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
    const record = await datastoreLockInspector({ datastore }).get(name)
    expect(record).toMatchObject({ name, held: true, lockedBy: HOST, lockUntil: until })
    expect(await java.unlock(name)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 5))
    const ours = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(ours)
    // Java's record had no counter: ours starts from this node's clock in microseconds.
    expect(ours.fencingToken).toBeGreaterThan(BigInt(Date.now() - 60_000) * 1000n)
  })

  it('a lock we hold, Java cannot take (its insert and its takeover both refuse); once we unlock, it can', async () => {
    const name = unique('node-holds')
    const ours = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(ours)
    expect(await java.lock(name, inAMinute())).toBe(false)
    // Java unlocks only its own host's lock.
    expect(await java.unlock(name)).toBe(false)
    expect((await read(name))?.locked_by).toBe(ours.lockedBy)
    await ours.unlock()
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(await java.lock(name, inAMinute())).toBe(true)
    expect((await read(name))?.locked_by).toBe(HOST)
  })

  it("Java's takeover keeps our fencing_token, and our next lock counts on from it", async () => {
    const name = unique('token')
    const first = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(first?.fencingToken)
    await first.unlock()
    // A counter far above the clock's floor (as after many quick acquisitions), so that "one more" shows.
    const high = 9_000_000_000_000_000_000n
    const entity = (await read(name))!
    await datastore.update({ key: key(name), data: { ...entity, fencing_token: datastore.int(String(high)) } })
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(await java.lock(name, inAMinute())).toBe(true)
    expect((await read(name))?.fencing_token).toMatchObject({ value: String(high) })
    expect(await java.unlock(name)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 5))
    const next = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(next?.fencingToken).toBe(high + 1n)
    expect((await read(name))?.fencing_token).toMatchObject({ value: String(high + 1n) })
  })
})
