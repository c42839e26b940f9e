import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { LockStateError } from '../core/errors.ts'
import type { ExtensibleLock } from '../core/lock-provider.ts'
import { extensible, lockName, mustLock, type SuiteContext, suiteConfiguration as config } from './suite-support.ts'

/** The `extension` group (ShedLock's AbstractExtensibleLockProviderIntegrationTest): skipped, saying why, for a provider declared not extensible. */
export function extensionCases(suite: SuiteContext, declaredExtensible: boolean): void {
  const { add, node, assertHeld, assertFree, waitForExpiry, g, short } = suite
  const notExtensible = declaredExtensible ? undefined : 'the provider is declared not extensible'

  /**
   * Takes a fresh lock for `short` ms and extends it at once. That first extension races the
   * lock's expiry, and a loaded machine (a GC pause, a starved VM) can take longer than `short`
   * to send it. Every store counts `lockAtMostFor` from no earlier than `sentAt`, so a refusal
   * answered before `sentAt + short` is the provider's fault; one answered later proves nothing
   * (the lock may have expired), and the case starts over on a fresh name, at most three times.
   */
  const lockAndExtend = async (): Promise<{ name: string; extended: ExtensibleLock }> => {
    for (let attempt = 1; ; attempt++) {
      const name = lockName()
      const provider = await node()
      const sentAt = Date.now()
      const lock = extensible(await mustLock(provider, config(name, short)))
      const extended = await lock.extend(10_000 + g, 0)
      if (extended) return { name, extended }
      const answeredAfter = Date.now() - sentAt
      assert.ok(
        answeredAfter >= short,
        `extend() of a held lock resolved to undefined ${answeredAfter} ms after its acquisition, within its lockAtMostFor of ${short} ms`,
      )
      assert.ok(
        attempt < 3,
        `three times, extending a lock took longer than its lockAtMostFor of ${short} ms (the last ${answeredAfter} ms): the machine is too loaded to run this case`,
      )
    }
  }

  add(
    'extension',
    'extends a lock past its first lockAtMostFor',
    8 * short + 10_000,
    async () => {
      const { name, extended } = await lockAndExtend()
      await sleep(short + 100)
      await assertHeld(name, 'the lock expired at its original lockAtMostFor')
      assert.equal(await (await node()).lock(config(name)), undefined, 'another node got an extended lock')
      await extended.unlock()
      await assertFree(name)
    },
    notExtensible,
  )

  add(
    'extension',
    'extends a lock three times in a row',
    8 * short + 10_000,
    async () => {
      const first = await lockAndExtend()
      const name = first.name
      let lock = first.extended
      for (let i = 1; i < 3; i++) {
        const next = await lock.extend(10_000 + g, 0)
        assert.ok(next, `extension ${i + 1} failed`)
        lock = next
      }
      await sleep(short + 100)
      await assertHeld(name)
      await lock.unlock()
      await assertFree(name)
    },
    notExtensible,
  )

  add(
    'extension',
    'cannot extend an unlocked lock',
    10_000,
    async () => {
      const name = lockName()
      const lock = extensible(await mustLock(await node(), config(name)))
      await lock.unlock()
      await assertFree(name)
      await assert.rejects(lock.extend(10_000, 0), LockStateError)
    },
    notExtensible,
  )

  add(
    'extension',
    'cannot extend an expired lock',
    4 * short + 10_000,
    async () => {
      const name = lockName()
      const lock = extensible(await mustLock(await node(), config(name, short)))
      await waitForExpiry(2 * short + 50)
      assert.equal(await lock.extend(10_000 + g, 0), undefined, 'an expired lock was extended')
      await assertFree(name)
    },
    notExtensible,
  )

  add(
    'extension',
    "an extension's lockAtLeastFor holds the lock after unlock",
    10_000,
    async () => {
      const name = lockName()
      const lock = extensible(await mustLock(await node(), config(name, 10_000 + g)))
      const extended = await lock.extend(10_000 + g, 9_000)
      assert.ok(extended)
      await extended.unlock()
      await assertHeld(name, "the extension's lockAtLeastFor was ignored")
    },
    notExtensible,
  )

  add(
    'extension',
    'an extended handle is spent: it can be neither extended nor unlocked',
    10_000,
    async () => {
      const name = lockName()
      const lock = extensible(await mustLock(await node(), config(name)))
      const extended = await lock.extend(10_000 + g, 0)
      assert.ok(extended)
      await assert.rejects(lock.extend(10_000, 0), LockStateError)
      await assert.rejects(lock.unlock(), LockStateError)
      await assertHeld(name, 'a spent handle released the lock')
      await extended.unlock()
      await assertFree(name)
    },
    notExtensible,
  )
}
