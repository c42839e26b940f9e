import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockInspector, LockRecord } from '../core/lock-inspector.ts'
import type { LockProvider, SimpleLock } from '../core/lock-provider.ts'
import { slotRecordName } from '../core/slots.ts'

/** Options of {@link lockInspectorSuite}. */
export interface LockInspectorSuiteOptions {
  /** A new provider: another node. Providers and the inspector share the store (and may share a client). */
  provider: () => LockProvider | Promise<LockProvider>
  /** The inspector under test, over the same store, table or key space as the providers. */
  inspector: LockInspector
  /** Whether `list()` can enumerate the locks; `false` (memcached) expects it to reject. @default true */
  canList?: boolean
  /** Whether the store keeps `lockedBy` (SQL, MongoDB, DynamoDB, Redis, etcd, memcached) or not (NATS, ZooKeeper). @default true */
  keepsLockedBy?: boolean
  /** Whether the store reveals `lockUntil` (memcached does not). @default true */
  keepsLockUntil?: boolean
  /** Smallest duration the store honours, in ms (memcached: 1000; etcd: 2000). @default 1 */
  timeGranularityMs?: number
  /** How far `lockUntil` may be from the holder's `lockAtMostUntil`, in ms: clock offset and rounding. @default 2000 plus the granularity */
  toleranceMs?: number
}

/** One case of {@link lockInspectorSuite}; register it as `it(c.name, c.run, c.timeoutMs)`. */
export interface LockInspectorTestCase {
  readonly name: string
  readonly timeoutMs: number
  run(): Promise<void>
}

/**
 * The contract of a `LockInspector`, as test cases against a real store: it reads what the
 * provider wrote (held, holder, expiry), lists it, and force-releases so that another node takes
 * the lock at once while the holder's own later release does not take it back (the operator
 * wins), and a release of a record that changed since it was read changes nothing.
 */
export function lockInspectorSuite(options: LockInspectorSuiteOptions): LockInspectorTestCase[] {
  const { inspector } = options
  const canList = options.canList ?? true
  const keepsLockedBy = options.keepsLockedBy ?? true
  const keepsLockUntil = options.keepsLockUntil ?? true
  const g = Math.max(1, options.timeGranularityMs ?? 1)
  const tolerance = options.toleranceMs ?? 2_000 + g
  const node = async (): Promise<LockProvider> => options.provider()
  const cases: LockInspectorTestCase[] = []
  const add = (name: string, timeoutMs: number, run: () => Promise<void>): void =>
    void cases.push({ name, timeoutMs, run })
  const take = async (
    provider: LockProvider,
    name: string,
    lockAtMostFor: number,
    lockAtLeastFor = 0,
  ): Promise<SimpleLock> => {
    const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor, lockAtLeastFor }))
    assert.ok(lock, `expected to acquire "${name}"`)
    return lock
  }
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

  return cases
}

function lockName(): string {
  return `inspect-${randomUUID()}`
}
