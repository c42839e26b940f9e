import assert from 'node:assert/strict'
import type { LockRecord } from '../core/lock-inspector.ts'
import { type InspectorSuiteContext, lockName, take } from './inspector-support.ts'

/** What the inspector reads of what the provider wrote: `get()` and `list()`. */
export function inspectorReadCases(suite: InspectorSuiteContext): void {
  const { add, inspector, node, canList, keepsLockedBy, keepsLockUntil, g, tolerance } = suite
  const checkRecord = (record: LockRecord | undefined, name: string, until: number): LockRecord => {
    assert.ok(record, `get("${name}") found no record of a held lock`)
    assert.equal(record.name, name)
    assert.equal(record.held, true, `a held lock reads as free: ${JSON.stringify(record)}`)
    if (keepsLockUntil) {
      assert.ok(record.lockUntil instanceof Date, 'lockUntil is not a Date')
      assert.ok(
        Math.abs(record.lockUntil.getTime() - until) <= tolerance,
        `lockUntil ${record.lockUntil.toISOString()} is not the holder's lockAtMostUntil ${new Date(until).toISOString()}`,
      )
      assert.ok(
        record.remainingMs !== undefined && record.remainingMs > 0,
        `remainingMs of a held lock is ${record.remainingMs}`,
      )
    }
    if (keepsLockedBy) assert.ok(record.lockedBy && record.lockedBy.length > 0, 'the holder is not reported')
    return record
  }

  add('get: undefined for a name never locked', 10_000, async () => {
    assert.equal(await inspector.get(lockName()), undefined)
  })

  add('get: a held lock, with its holder and expiry as the provider wrote them', 10_000, async () => {
    const name = lockName()
    const lockAtMostFor = 60_000 + g
    const lock = await take(await node(), name, lockAtMostFor)
    const until = Date.now() + lockAtMostFor
    checkRecord(await inspector.get(name), name, until)
    await lock.unlock()
    const released = await inspector.get(name)
    if (released) assert.equal(released.held, false, 'a released lock still reads as held')
  })

  add(
    canList
      ? 'list: every lock, sorted by name, read at the store’s now'
      : 'list: rejects on a store that cannot enumerate its locks',
    10_000,
    async () => {
      if (!canList) {
        await assert.rejects(inspector.list())
        return
      }
      const prefix = lockName()
      const names = [`${prefix}-b`, `${prefix}-a`]
      const provider = await node()
      const locks = [await take(provider, names[0]!, 60_000 + g), await take(provider, names[1]!, 60_000 + g)]
      const before = Date.now()
      const { now, locks: records } = await inspector.list()
      assert.ok(
        Math.abs(now.getTime() - before) <= tolerance,
        `list() read now as ${now.toISOString()}, this host ${new Date(before).toISOString()}`,
      )
      const mine = records.filter((record) => record.name.startsWith(prefix))
      assert.deepEqual(
        mine.map((record) => record.name),
        [...names].sort(),
      )
      for (const record of mine) assert.equal(record.held, true)
      const all = records.map((record) => record.name)
      assert.deepEqual(all, [...all].sort(), 'list() is not sorted by name')
      for (const lock of locks) await lock.unlock()
    },
  )

  if (canList) {
    add('list: a prefix selects the records whose name starts with it, and only those', 10_000, async () => {
      const prefix = lockName()
      const provider = await node()
      const locks = [
        await take(provider, `${prefix}@1`, 60_000 + g),
        await take(provider, `${prefix}@2`, 60_000 + g),
        await take(provider, `${prefix}x`, 60_000 + g),
      ]
      const other = await take(provider, lockName(), 60_000 + g)
      const { locks: selected } = await inspector.list({ prefix: `${prefix}@` })
      assert.deepEqual(
        selected.map((record) => record.name),
        [`${prefix}@1`, `${prefix}@2`],
      )
      for (const lock of [...locks, other]) await lock.unlock()
    })
  }
}
