import assert from 'node:assert/strict'
import { LockConfigurationError, LockStateError } from '../core/errors.ts'
import { type LockConfiguration, lockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLock } from '../core/lock-provider.ts'
import { lockName, mustLock, type SuiteContext, suiteConfiguration as config } from './suite-support.ts'

/** The `basic` group (ShedLock's AbstractLockProviderIntegrationTest), and whether the declared extensibility holds. */
export function basicCases(suite: SuiteContext, declaredExtensible: boolean): void {
  const { add, node, assertHeld, assertFree, waitForExpiry, g, short } = suite
  const atLeast = Math.max(800, 2 * g)

  add('basic', 'creates a lock and releases it', 10_000, async () => {
    const name = lockName()
    const lock = await mustLock(await node(), config(name))
    await assertHeld(name)
    await lock.unlock()
    await assertFree(name)
  })

  add('basic', 'refuses a second lock on the same name, from the same and from another node', 10_000, async () => {
    const name = lockName()
    const provider = await node()
    const lock = await mustLock(provider, config(name))
    assert.equal(await provider.lock(config(name)), undefined, 'the same node got the lock twice')
    assert.equal(await (await node()).lock(config(name)), undefined, 'another node got a held lock')
    await lock.unlock()
  })

  add('basic', 'locks two names independently', 10_000, async () => {
    const [a, b] = [lockName(), lockName()]
    const provider = await node()
    const first = await mustLock(provider, config(a))
    const second = await mustLock(provider, config(b))
    await first.unlock()
    await assertFree(a)
    await assertHeld(b, 'releasing one name released the other')
    await second.unlock()
  })

  add('basic', 'locks again after an unlock', 10_000, async () => {
    const name = lockName()
    const provider = await node()
    await (await mustLock(provider, config(name))).unlock()
    const again = await mustLock(provider, config(name))
    await assertHeld(name)
    await again.unlock()
  })

  add('basic', 'a lock expires after lockAtMostFor', 4 * short + 10_000, async () => {
    const name = lockName()
    const provider = await node()
    await mustLock(provider, config(name, short))
    await assertHeld(name)
    await waitForExpiry(2 * short + 50)
    await assertFree(name)
    const next = await mustLock(await node(), config(name, short))
    await next.unlock()
  })

  add('basic', 'relocks right after unlock, ten times with one configuration', 20_000, async () => {
    const name = lockName()
    const provider = await node()
    const other = await node()
    const configuration = config(name)
    for (let i = 0; i < 10; i++) {
      const lock = await mustLock(provider, configuration)
      assert.equal(await other.lock(configuration), undefined, `round ${i}: a second node got the lock`)
      await lock.unlock()
    }
  })

  add('basic', 'an early unlock keeps the lock until lockAtLeastFor', atLeast * 3 + 10_000, async () => {
    const name = lockName()
    const lock = await mustLock(await node(), config(name, atLeast * 4, atLeast))
    await lock.unlock()
    await assertHeld(name, 'the lock was released before lockAtLeastFor passed')
    assert.equal(await (await node()).lock(config(name)), undefined, 'another node got the lock within lockAtLeastFor')
    await waitForExpiry(atLeast + 200)
    await assertFree(name)
    await (await mustLock(await node(), config(name))).unlock()
  })

  add('basic', 'a handle cannot be unlocked twice', 10_000, async () => {
    const lock = await mustLock(await node(), config(lockName()))
    await lock.unlock()
    await assert.rejects(lock.unlock(), LockStateError)
  })

  add(
    'basic',
    'refuses an expired configuration and a look-alike object, before the store is asked',
    10_000,
    async () => {
      const name = lockName()
      const provider = await node()
      // Built a second ago with a 1 ms lockAtMostFor: a configuration kept from an earlier tick.
      const expired = lockConfiguration({ name, lockAtMostFor: 1, createdAt: new Date(Date.now() - 1_000) })
      await assert.rejects(provider.lock(expired), LockConfigurationError, 'an expired configuration was not refused')
      const lookAlike = { ...config(name), name: '', lockAtMostFor: -5 } as LockConfiguration
      await assert.rejects(
        provider.lock(lookAlike),
        LockConfigurationError,
        'an object that only looks like a configuration was not refused',
      )
      await assertFree(name, 'a refused configuration left a lock in the store')
      await (await mustLock(provider, config(name))).unlock()
    },
  )

  add('basic', 'the declared extensibility matches the locks', 10_000, async () => {
    const lock = await mustLock(await node(), config(lockName()))
    const hasExtend = typeof (lock as Partial<ExtensibleLock>).extend === 'function'
    assert.equal(
      hasExtend,
      declaredExtensible,
      `declared extensible: ${declaredExtensible}, but the lock ${hasExtend ? 'has' : 'has no'} extend()`,
    )
    await lock.unlock()
  })
}
