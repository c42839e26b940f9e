import assert from 'node:assert/strict'
import { isExtensibleLock } from '../core/lock-provider.ts'
import { type InspectorSuiteContext, lockName, take } from './inspector-support.ts'

/**
 * Which acquisition `release(record)` frees: the one the record was read from, however often its
 * holder extended it since (a lease renews a running task's lock every few seconds, and an
 * operator who read the lock before a renewal must still be able to release it), and never a
 * later one, even the same node's.
 */
export function inspectorAcquisitionCases(suite: InspectorSuiteContext): void {
  const { add, inspector, node, keepsAcquisition, g } = suite

  add(
    'release: a record releases the acquisition it was read from, however often its holder extended it since',
    10_000 + 6 * g,
    async () => {
      const name = lockName()
      const lock = await take(await node(), name, 60_000 + g)
      // A store that cannot extend has no renewal to survive (memcached).
      if (!isExtensibleLock(lock)) return lock.unlock()
      const seen = await inspector.get(name)
      assert.ok(seen?.held)
      // Two renewals, each moving the expiry.
      const once = await lock.extend(120_000 + 2 * g, 0)
      assert.ok(once, 'the holder could not extend its lock')
      const twice = await once.extend(90_000 + 3 * g, 0)
      assert.ok(twice, 'the holder could not extend its lock a second time')
      if (keepsAcquisition) {
        assert.equal(
          await inspector.release(seen),
          true,
          'release() of a record read before its holder extended the lock resolved to false',
        )
      } else {
        // Only the expiry is kept: the holder's writes cannot be told from another acquisition.
        assert.equal(await inspector.release(seen), false, 'a record read before the last write released the lock')
        assert.equal((await inspector.get(name))?.held, true)
        assert.equal(await inspector.release((await inspector.get(name))!), true)
      }
      const after = await inspector.get(name)
      if (after) assert.equal(after.held, false, 'a released lock still reads as held')
      // The holder's own release comes later and changes nothing (the operator wins).
      await twice.unlock()
      await (await take(await node(), name, 60_000 + g)).unlock()
    },
  )

  add(
    'release: a record of an earlier acquisition releases nothing, when the same node took the lock again and extended it',
    10_000 + 4 * g,
    async () => {
      const name = lockName()
      const provider = await node()
      const first = await take(provider, name, 60_000 + g)
      const seen = await inspector.get(name)
      assert.ok(seen?.held)
      await first.unlock()
      let second = await take(provider, name, 60_000 + g)
      if (isExtensibleLock(second)) {
        const extended = await second.extend(120_000 + 2 * g, 0)
        assert.ok(extended, 'the holder could not extend its lock')
        second = extended
      }
      assert.equal(
        await inspector.release(seen),
        false,
        "release() of an earlier acquisition's record released a later one",
      )
      assert.equal(
        (await inspector.get(name))?.held,
        true,
        "a later acquisition was released through an earlier one's record",
      )
      await second.unlock()
    },
  )
}
