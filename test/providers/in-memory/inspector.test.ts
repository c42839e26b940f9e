import { describe, expect, it } from 'vitest'
import { LockConfigurationError, lockConfiguration } from '../../../src/index.ts'
import * as root from '../../../src/index.ts'
import {
  type InMemoryLockProvider,
  inMemoryLockInspector,
  inMemoryLockProvider,
} from '../../../src/providers/in-memory/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { manualClock } from '../../helpers/fakes.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

describe('inMemoryLockInspector', () => {
  describe('the inspector contract', () => {
    // One store: every "node" of the suite is the same in-memory provider.
    const provider = inMemoryLockProvider()
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => provider,
        inspector: inMemoryLockInspector(provider),
        keepsLockedBy: false,
      }),
    )
  })

  it('is exported from the package root, next to the provider', () => {
    expect(root.inMemoryLockInspector).toBe(inMemoryLockInspector)
  })

  it('reads lockUntil, lockedAt, held and remainingMs on the provider’s clock', async () => {
    const clock = manualClock(1_000)
    const provider = inMemoryLockProvider({ clock })
    const inspector = inMemoryLockInspector(provider)
    const lock = await provider.lock(
      lockConfiguration({ name: 'job', lockAtMostFor: '1m', createdAt: new Date(clock.now()) }),
    )
    clock.advance(15_000)
    expect(await inspector.get('job')).toEqual({
      name: 'job',
      lockUntil: new Date(61_000),
      lockedAt: new Date(1_000),
      lockedBy: undefined,
      held: true,
      remainingMs: 45_000,
    })
    expect(await inspector.list()).toEqual({ now: new Date(16_000), locks: [await inspector.get('job')] })
    await lock!.unlock()
    expect(await inspector.get('job')).toMatchObject({ held: false, remainingMs: 0, lockUntil: new Date(16_000) })
  })

  it('a force-release keeps the entry with lockUntil now; the holder can then neither extend it nor re-hold it with lockAtLeastFor', async () => {
    const clock = manualClock(1_000)
    const provider = inMemoryLockProvider({ clock })
    const inspector = inMemoryLockInspector(provider)
    const take = (name: string) =>
      provider.lock(
        lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s', createdAt: new Date(clock.now()) }),
      )
    const releasing = await take('releasing')
    const extending = await take('extending')
    clock.advance(5_000)
    expect(await inspector.release('releasing')).toBe(true)
    expect(await inspector.release('extending')).toBe(true)
    expect(provider.inspect('releasing')).toEqual({ lockedAt: new Date(1_000), lockUntil: new Date(6_000) })
    await releasing!.unlock()
    // The holder's lockAtLeastFor (until 31 000) would have held it again.
    expect(provider.inspect('releasing')?.lockUntil).toEqual(new Date(6_000))
    expect(await extending!.extend('1m', 0)).toBeUndefined()
    expect(provider.inspect('extending')?.lockUntil).toEqual(new Date(6_000))
    expect(await inspector.release('releasing')).toBe(false)
    expect(
      await provider.lock(
        lockConfiguration({ name: 'releasing', lockAtMostFor: '1m', createdAt: new Date(clock.now()) }),
      ),
    ).toBeDefined()
  })

  it('lists names sorted in JavaScript string order, whatever they hold', async () => {
    const provider = inMemoryLockProvider()
    const names = ['é', 'b', 'B', 'a/b:c', ' lead', '']
    for (const name of names) await provider.lock(lockConfiguration({ name: name || 'x', lockAtMostFor: '1m' }))
    const listed = (await inMemoryLockInspector(provider).list()).locks.map((record) => record.name)
    expect(listed).toEqual(names.map((name) => name || 'x').sort())
  })

  it('a record releases the acquisition read, extended since; not a later one; a record from another inspector counts as its name', async () => {
    const provider = inMemoryLockProvider()
    const inspector = inMemoryLockInspector(provider)
    const first = await provider.lock(lockConfiguration({ name: 'job', lockAtMostFor: '1m' }))
    const seen = (await inspector.get('job'))!
    // Extended: the same acquisition, another expiry.
    await new Promise((resolve) => setTimeout(resolve, 5))
    const extended = await first!.extend('2m', 0)
    expect(extended).toBeDefined()
    expect(await inspector.release(seen)).toBe(true)
    expect((await inspector.get('job'))?.held).toBe(false)
    await extended!.unlock()
    // Taken again: the earlier acquisition's record releases nothing.
    const second = await provider.lock(lockConfiguration({ name: 'job', lockAtMostFor: '1m' }))
    expect(await inspector.release(seen)).toBe(false)
    expect((await inspector.get('job'))?.held).toBe(true)
    // A record this inspector never returned carries no state: it names the lock.
    expect(await inspector.release({ ...seen })).toBe(true)
    await second!.unlock()
  })

  it('refuses anything but a provider made by inMemoryLockProvider()', () => {
    expect(() => inMemoryLockInspector({} as InMemoryLockProvider)).toThrow(LockConfigurationError)
    expect(() => inMemoryLockInspector(undefined as unknown as InMemoryLockProvider)).toThrow(
      /inMemoryLockProvider\(\)/,
    )
  })
})
