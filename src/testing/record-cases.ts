import assert from 'node:assert/strict'
import { extensible, lockName, mustLock, type SuiteContext, suiteConfiguration as config } from './suite-support.ts'

/**
 * The `record` group (what the store keeps between nodes: ShedLock's storage-based group, without
 * its cache) and the `ownership` group (a stale holder never touches a newer holder's lock).
 * `deleteRecord` enables the deleted-record case.
 */
export function recordCases(
  suite: SuiteContext,
  declaredExtensible: boolean,
  deleteRecord: ((name: string) => Promise<void>) | undefined,
): void {
  const { add, node, assertHeld, assertFree, waitForExpiry, g, short } = suite

  add('record', 'a lock held by one node is refused to a fresh node', 10_000, async () => {
    const name = lockName()
    const lock = await mustLock(await node(), config(name))
    assert.equal(await (await node()).lock(config(name)), undefined)
    await lock.unlock()
  })

  add('record', 'a released lock is taken by a fresh node', 10_000, async () => {
    const name = lockName()
    await (await mustLock(await node(), config(name))).unlock()
    const lock = await mustLock(await node(), config(name))
    await assertHeld(name)
    await lock.unlock()
  })

  add('record', 'an expired lock left by a dead node is taken over', 4 * short + 10_000, async () => {
    const name = lockName()
    await mustLock(await node(), config(name, short))
    // The first node "dies": it never unlocks.
    await waitForExpiry(2 * short + 50)
    const lock = await mustLock(await node(), config(name))
    await assertHeld(name)
    await lock.unlock()
  })

  add(
    'record',
    'a record deleted by hand is recreated by the next lock',
    10_000,
    async () => {
      const name = lockName()
      const provider = await node()
      await (await mustLock(provider, config(name))).unlock()
      await deleteRecord!(name)
      const lock = await mustLock(provider, config(name))
      await assertHeld(name, 'the lock was granted but not written to the store')
      assert.equal(await (await node()).lock(config(name)), undefined)
      await lock.unlock()
    },
    deleteRecord ? undefined : 'no deleteRecord given',
  )

  // ---- ownership: a stale holder never touches a newer holder's lock ----

  const notExtensible = declaredExtensible ? undefined : 'the provider is declared not extensible'

  add('ownership', "a stale holder's unlock does not release the newer holder's lock", 4 * short + 10_000, async () => {
    const name = lockName()
    // One provider instance for both holders: ownership must be per acquisition, not per node.
    const provider = await node()
    const stale = await mustLock(provider, config(name, short))
    await waitForExpiry(2 * short + 50)
    const fresh = await mustLock(provider, config(name))
    await stale.unlock()
    await assertHeld(name, "the stale holder released the newer holder's lock")
    assert.equal(await (await node()).lock(config(name)), undefined, 'another node got the lock after a stale unlock')
    await fresh.unlock()
    await assertFree(name)
  })

  add(
    'ownership',
    "a stale holder's extend does not prolong the newer holder's lock",
    6 * short + 10_000,
    async () => {
      const name = lockName()
      const provider = await node()
      const stale = extensible(await mustLock(provider, config(name, short)))
      await waitForExpiry(2 * short + 50)
      await mustLock(provider, config(name, short))
      assert.equal(await stale.extend(10_000 + g, 0), undefined, "a stale holder extended the newer holder's lock")
      await waitForExpiry(2 * short + 50)
      await assertFree(name, "the newer holder's lock was prolonged by the stale holder")
    },
    notExtensible,
  )
}
