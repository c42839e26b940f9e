import type { Duration } from '../../../src/core/duration.ts'
import { describe, expect, it } from 'vitest'
import { systemClock } from '../../../src/core/clock.ts'
import { LockStateError } from '../../../src/core/errors.ts'
import { lockConfiguration } from '../../../src/core/lock-configuration.ts'
import { inMemoryLockProvider } from '../../../src/providers/in-memory/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { manualClock } from '../../helpers/fakes.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

describe('inMemoryLockProvider: conformance suite', () => {
  // One store: every "node" of the suite is the same in-memory provider.
  const provider = inMemoryLockProvider()
  registerSuite(
    lockProviderSuite({
      provider: () => provider,
      isLocked: async (name) => {
        const record = provider.inspect(name)
        return record !== undefined && record.lockUntil.getTime() > systemClock.now()
      },
      extensible: true,
      slots: { inspector: true },
      fencing: true,
    }),
  )
})

describe('inMemoryLockProvider', () => {
  const at = (clock: { now(): number }, name: string, lockAtMostFor: Duration, lockAtLeastFor: Duration = 0) =>
    lockConfiguration({ name, lockAtMostFor, lockAtLeastFor, createdAt: new Date(clock.now()) })

  it('inspect() returns undefined for a name never locked, and the record after', async () => {
    const clock = manualClock(1_000)
    const provider = inMemoryLockProvider({ clock })
    expect(provider.inspect('job')).toBeUndefined()
    const lock = await provider.lock(at(clock, 'job', '1m', '10s'))
    expect(provider.inspect('job')).toEqual({ lockedAt: new Date(1_000), lockUntil: new Date(61_000) })
    clock.advance(2_000)
    await lock!.unlock()
    // Kept until lockAtLeastUntil.
    expect(provider.inspect('job')).toEqual({ lockedAt: new Date(1_000), lockUntil: new Date(11_000) })
    clock.advance(20_000)
    expect(await provider.lock(at(clock, 'job', '1m'))).toBeDefined()
    expect(provider.inspect('job')!.lockedAt).toEqual(new Date(23_000))
    expect(provider.inspect('other')).toBeUndefined()
  })

  it('inspect() returns copies', async () => {
    const clock = manualClock(1_000)
    const provider = inMemoryLockProvider({ clock })
    await provider.lock(at(clock, 'job', '1m'))
    provider.inspect('job')!.lockUntil.setTime(0)
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(61_000)
  })

  it('an unlock after lockAtLeastUntil frees the lock at once', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const lock = await provider.lock(at(clock, 'job', '1m', '1s'))
    clock.advance(5_000)
    await lock!.unlock()
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(5_000)
    expect(await provider.lock(at(clock, 'job', '1m'))).toBeDefined()
  })

  it('refuses a held lock until lockAtMostUntil, to the millisecond', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    await provider.lock(at(clock, 'job', 1_000))
    clock.set(999)
    expect(await provider.lock(at(clock, 'job', '1m'))).toBeUndefined()
    clock.set(1_000)
    expect(await provider.lock(at(clock, 'job', '1m'))).toBeDefined()
  })

  it("a stale holder cannot unlock the new holder's lock", async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const stale = await provider.lock(at(clock, 'job', 1_000))
    clock.advance(2_000)
    const fresh = await provider.lock(at(clock, 'job', '1m'))
    expect(fresh).toBeDefined()
    await stale!.unlock()
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(62_000)
    expect(await provider.lock(at(clock, 'job', '1m'))).toBeUndefined()
    await fresh!.unlock()
    expect(await provider.lock(at(clock, 'job', '1m'))).toBeDefined()
  })

  it("a stale holder cannot extend the new holder's lock", async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const stale = await provider.lock(at(clock, 'job', 1_000))
    clock.advance(2_000)
    await provider.lock(at(clock, 'job', 1_000))
    expect(await stale!.extend('1h', 0)).toBeUndefined()
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(3_000)
  })

  it('an expired lock nobody took cannot be extended, and its release does not revive it', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const lock = await provider.lock(at(clock, 'job', 1_000))
    clock.set(1_000)
    expect(await lock!.extend('1h', 0)).toBeUndefined()
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(1_000)

    const other = await provider.lock(at(clock, 'other', 1_000, 1_000))
    clock.set(5_000)
    await other!.unlock()
    expect(provider.inspect('other')!.lockUntil.getTime()).toBe(5_000)
    expect(await provider.lock(at(clock, 'other', '1m'))).toBeDefined()
  })

  it('extend() moves lockUntil from now and the extended handle carries the ownership', async () => {
    const clock = manualClock(0)
    const provider = inMemoryLockProvider({ clock })
    const lock = await provider.lock(at(clock, 'job', 1_000))
    clock.set(500)
    const extended = await lock!.extend('10s', '5s')
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(10_500)
    await expect(lock!.unlock()).rejects.toThrow(LockStateError)
    clock.set(600)
    await extended!.unlock()
    expect(provider.inspect('job')!.lockUntil.getTime()).toBe(5_500)
  })

  it('keeps names apart, and separate providers are separate stores', async () => {
    const clock = manualClock(0)
    const a = inMemoryLockProvider({ clock })
    const b = inMemoryLockProvider({ clock })
    expect(await a.lock(at(clock, 'job', '1m'))).toBeDefined()
    expect(await a.lock(at(clock, 'job2', '1m'))).toBeDefined()
    expect(await b.lock(at(clock, 'job', '1m'))).toBeDefined()
    expect(await a.lock(at(clock, 'job', '1m'))).toBeUndefined()
  })
})
