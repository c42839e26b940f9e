import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import { slotRecordName } from '../core/slots.ts'
import { type InspectorSuiteContext, lockName, take } from './inspector-support.ts'

/**
 * How a lock stops being held: `removeExpired()` deletes the records not held, `release()` frees
 * a lock at once (the operator wins; a stale record releases nothing), and expiry frees it.
 */
export function inspectorReleaseCases(suite: InspectorSuiteContext): void {
  const { add, inspector, node, canList, keepsLockUntil, g } = suite

  // Slot records, as the executor removes them (ZooKeeper removes no other records).
  add(
    'removeExpired: deletes the records that are not held (of a prefix), keeps held ones, and the next lock recreates them',
    10_000 + 6 * g,
    async () => {
      const prefix = lockName()
      const provider = await node()
      const [heldName, releasedName] = [
        slotRecordName(prefix, new Date(Date.UTC(2026, 0, 1))),
        slotRecordName(prefix, new Date(Date.UTC(2026, 0, 2))),
      ]
      const held = await take(provider, heldName, 60_000 + g)
      const released = await take(provider, releasedName, 60_000 + g)
      await released.unlock()
      const outside = lockName()
      await (await take(provider, outside, 60_000 + g)).unlock()
      const removed = await inspector.removeExpired({ prefix: `${prefix}@` })
      assert.ok(removed >= 0 && removed <= 1, `removeExpired() removed ${removed} records of one released lock`)
      assert.equal(await inspector.get(releasedName), undefined, 'a released record was kept')
      assert.equal((await inspector.get(heldName))?.held, true, 'a held record was removed')
      if (canList) assert.ok((await inspector.list({ prefix: outside })).locks.length <= 1)
      const again = await take(await node(), releasedName, 60_000 + g)
      await again.unlock()
      await held.unlock()
    },
  )

  add('release: frees a held lock at once, for another node; a second release finds nothing held', 10_000, async () => {
    const name = lockName()
    await take(await node(), name, 60_000 + g)
    assert.equal(await inspector.release(name), true, 'release() of a held lock resolved to false')
    const after = await inspector.get(name)
    if (after) assert.equal(after.held, false, 'a released lock still reads as held')
    const next = await take(await node(), name, 60_000 + g)
    assert.equal(await inspector.release(name), true)
    assert.equal(await inspector.release(name), false, 'releasing a free lock resolved to true')
    await next.unlock()
  })

  add(
    "release: the operator wins, the holder's own release within lockAtLeastFor does not hold it again",
    10_000 + 4 * g,
    async () => {
      const name = lockName()
      const holder = await take(await node(), name, 60_000 + g, 30_000 + g)
      assert.equal(await inspector.release(name), true)
      // The holder's task ends now, within its lockAtLeastFor: its release must touch nothing.
      await holder.unlock()
      const record = await inspector.get(name)
      if (record)
        assert.equal(record.held, false, `the holder's release held the lock again: ${JSON.stringify(record)}`)
      const next = await (await node()).lock(lockConfiguration({ name, lockAtMostFor: 60_000 + g }))
      assert.ok(next, "another node could not take the lock after it was force-released and its holder's release came")
      await next.unlock()
    },
  )

  add('release: a record read before the lock changed hands releases nothing', 10_000 + 4 * g, async () => {
    const name = lockName()
    const first = await take(await node(), name, 60_000 + g)
    const seen = await inspector.get(name)
    assert.ok(seen?.held)
    await first.unlock()
    // Another node takes the lock after the record was read.
    const second = await take(await node(), name, 60_000 + g)
    assert.equal(await inspector.release(seen), false, 'release() of a stale record released the new holder')
    const now = await inspector.get(name)
    assert.equal(now?.held, true, "the new holder's lock was released through a stale record")
    assert.equal(await inspector.release(now!), true)
    await second.unlock()
  })

  add('held: an expired lock reads as free', 10_000 + 6 * g, async () => {
    const name = lockName()
    await take(await node(), name, Math.max(300, g))
    await sleep(Math.max(300, g) + g + 700)
    const record = await inspector.get(name)
    if (record) {
      assert.equal(record.held, false, 'an expired lock reads as held')
      if (keepsLockUntil) assert.equal(record.remainingMs, 0)
    }
  })
}
