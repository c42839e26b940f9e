import { AssertionError } from 'node:assert'
import { describe, expect, it } from 'vitest'
import { LockProviderError } from '../../src/core/errors.ts'
import type { LockConfiguration } from '../../src/core/lock-configuration.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { defineLock } from '../../src/support/define-lock.ts'
import { type LockProviderSuiteOptions, type LockProviderTestCase, lockProviderSuite } from '../../src/testing/index.ts'

/** What is wrong with a {@link flawedProvider}. */
interface Flaws {
  /** unlock() releases whoever holds the lock now. */
  unlockIgnoresOwner?: boolean
  /** extend() prolongs the lock of whoever holds it now. */
  extendIgnoresOwner?: boolean
  /** unlock() frees the lock at once, lockAtLeastFor or not. */
  ignoresLockAtLeastFor?: boolean
  /** lock() never refuses. */
  grantsEverything?: boolean
  /** The locks have no extend(). */
  noExtend?: boolean
  /** Like Java's record cache: once a name's record was created, only "update" it; a deleted record is never recreated. */
  neverRecreates?: boolean
}

/** An in-memory store with deliberate flaws; without flaws it is a correct provider. */
function flawedProvider(flaws: Flaws = {}) {
  const entries = new Map<string, { lockUntil: number; owner: symbol }>()
  const created = new Set<string>()
  const provider: LockProvider = {
    async lock(configuration: LockConfiguration) {
      const now = Date.now()
      const { name } = configuration
      const existing = entries.get(name)
      if (flaws.neverRecreates && created.has(name) && !existing) return undefined
      if (existing && existing.lockUntil > now && !flaws.grantsEverything) return undefined
      const owner = Symbol(name)
      entries.set(name, { lockUntil: configuration.lockAtMostUntil.getTime(), owner })
      created.add(name)
      const mine = (n: string) => {
        const entry = entries.get(n)
        return entry && (entry.owner === owner || flaws.unlockIgnoresOwner) ? entry : undefined
      }
      const unlock = async (current: LockConfiguration) => {
        const entry = mine(current.name)
        if (entry) entry.lockUntil = flaws.ignoresLockAtLeastFor ? Date.now() : Math.max(Date.now(), current.lockAtLeastUntil.getTime())
      }
      if (flaws.noExtend) return defineLock(configuration, { unlock })
      return defineLock(configuration, {
        unlock,
        async extend(next) {
          const entry = entries.get(next.name)
          if (!entry || entry.lockUntil <= Date.now() || (entry.owner !== owner && !flaws.extendIgnoresOwner)) return false
          entry.lockUntil = next.lockAtMostUntil.getTime()
          return true
        },
      })
    },
  }
  return {
    provider,
    isLocked: async (name: string) => (entries.get(name)?.lockUntil ?? 0) > Date.now(),
    deleteRecord: async (name: string) => {
      entries.delete(name)
    },
  }
}

function suiteFor(flaws: Flaws, options: Partial<LockProviderSuiteOptions> = {}): LockProviderTestCase[] {
  const store = flawedProvider(flaws)
  return lockProviderSuite({
    provider: () => store.provider,
    isLocked: store.isLocked,
    deleteRecord: store.deleteRecord,
    extensible: true,
    fuzzIterations: 10,
    ...options,
  })
}

function pick(cases: LockProviderTestCase[], name: string): LockProviderTestCase {
  const found = cases.find((c) => c.name === name)
  if (!found) throw new Error(`no case named ${JSON.stringify(name)}; have ${cases.map((c) => c.name).join(' | ')}`)
  expect(found.skip).toBeUndefined()
  return found
}

const STALE_UNLOCK = "ownership: a stale holder's unlock does not release the newer holder's lock"
const STALE_EXTEND = "ownership: a stale holder's extend does not prolong the newer holder's lock"
const AT_LEAST = 'basic: an early unlock keeps the lock until lockAtLeastFor'
const EXTENSION_AT_LEAST = "extension: an extension's lockAtLeastFor holds the lock after unlock"
const SECOND_LOCK = 'basic: refuses a second lock on the same name, from the same and from another node'
const FRESH_NODE = 'record: a lock held by one node is refused to a fresh node'
const RACE = 'concurrency: of 16 contenders racing on two nodes exactly one wins'
const FUZZ = 'concurrency: fuzz: two nodes, eight workers, two names, no lost update'
const DECLARED = 'basic: the declared extensibility matches the locks'
const EXTENDS = 'extension: extends a lock past its first lockAtMostFor'
const DELETED = 'record: a record deleted by hand is recreated by the next lock'
const DEAD_STORE = 'failure: a dead store rejects with LockProviderError and the task does not run'
const TOO_LONG = 'names: a name longer than the store accepts rejects with LockProviderError naming the lock'

async function mustFail(c: LockProviderTestCase, message?: RegExp): Promise<void> {
  const error = await c.run().then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error, `"${c.name}" passed for a broken provider`).toBeInstanceOf(AssertionError)
  if (message) expect((error as Error).message).toMatch(message)
}

describe('lockProviderSuite catches broken providers', () => {
  it('the flawless fake passes every case the broken ones are checked against', { timeout: 60_000 }, async () => {
    const cases = suiteFor({})
    for (const name of [STALE_UNLOCK, STALE_EXTEND, AT_LEAST, EXTENSION_AT_LEAST, SECOND_LOCK, FRESH_NODE, RACE, FUZZ, DECLARED, EXTENDS, DELETED]) {
      await pick(cases, name).run()
    }
  })

  it('an unlock that ignores ownership', async () => {
    await mustFail(pick(suiteFor({ unlockIgnoresOwner: true }), STALE_UNLOCK), /stale holder released/)
  })

  it('an extend that prolongs any holder', async () => {
    await mustFail(pick(suiteFor({ extendIgnoresOwner: true }), STALE_EXTEND), /stale holder extended/)
  })

  it('an unlock that ignores lockAtLeastFor', async () => {
    const cases = suiteFor({ ignoresLockAtLeastFor: true })
    await mustFail(pick(cases, AT_LEAST), /released before lockAtLeastFor/)
    await mustFail(pick(cases, EXTENSION_AT_LEAST), /lockAtLeastFor was ignored/)
  })

  it('a provider that grants every lock: exclusion, race and fuzz fail', { timeout: 60_000 }, async () => {
    const cases = suiteFor({ grantsEverything: true })
    await mustFail(pick(cases, SECOND_LOCK), /got the lock twice/)
    await mustFail(pick(cases, FRESH_NODE))
    await mustFail(pick(cases, RACE), /16 contenders got the lock/)
    await mustFail(pick(cases, FUZZ), /lost updates/)
  })

  it('a provider declared extensible whose locks have no extend()', async () => {
    const cases = suiteFor({ noExtend: true })
    await mustFail(pick(cases, DECLARED), /declared extensible: true/)
    await mustFail(pick(cases, EXTENDS), /has no extend/)
    await mustFail(pick(cases, STALE_EXTEND), /has no extend/)
  })

  it('a provider declared not extensible whose locks have extend()', async () => {
    await mustFail(pick(suiteFor({}, { extensible: false }), DECLARED), /declared extensible: false/)
  })

  it('a provider that never recreates a deleted record', async () => {
    await mustFail(pick(suiteFor({ neverRecreates: true }), DELETED), /expected to acquire/)
  })

  describe('a dead store', () => {
    const deadStore = (error: (name: string) => unknown) =>
      pick(
        suiteFor(
          {},
          {
            unreachableProvider: () => ({
              lock: async (configuration: LockConfiguration) => {
                throw error(configuration.name)
              },
            }),
          },
        ),
        DEAD_STORE,
      )

    it('rejecting with a plain Error fails', async () => {
      await mustFail(deadStore(() => new Error('connect ECONNREFUSED 127.0.0.1:1')), /expected LockProviderError/)
    })

    it('rejecting with a LockProviderError without cause fails', async () => {
      await mustFail(deadStore((name) => new LockProviderError(`Could not lock "${name}"`)), /no cause/)
    })

    it('rejecting with a LockProviderError that does not name the lock fails', async () => {
      await mustFail(deadStore(() => new LockProviderError('Could not lock', { cause: new Error('ECONNREFUSED') })), /does not name the lock/)
    })

    it('rejecting with a LockProviderError with cause, naming the lock, passes', async () => {
      await deadStore((name) => new LockProviderError(`Could not lock "${name}"`, { cause: new Error('ECONNREFUSED') })).run()
    })
  })

  describe('a store with a name limit', () => {
    const limited = (onTooLong: (name: string) => unknown) => {
      const store = flawedProvider()
      const provider: LockProvider = {
        lock: async (configuration) => {
          if (configuration.name.length > 64) throw onTooLong(configuration.name)
          return store.provider.lock(configuration)
        },
      }
      return pick(lockProviderSuite({ provider: () => provider, isLocked: store.isLocked, extensible: true, maxNameLength: 64 }), TOO_LONG)
    }

    it('that accepts longer names fails', async () => {
      await mustFail(pick(suiteFor({}, { maxNameLength: 64 }), TOO_LONG), /Missing expected rejection/)
    })

    it('that rejects with a plain Error fails', async () => {
      await mustFail(limited(() => new Error('value too long')), /expected LockProviderError/)
    })

    it('that rejects with a LockProviderError naming the lock passes', async () => {
      await limited((name) => new LockProviderError(`Lock name "${name}" is too long`, { cause: new Error('value too long') })).run()
    })
  })
})

describe('lockProviderSuite cases', () => {
  const store = flawedProvider()
  const base: LockProviderSuiteOptions = { provider: () => store.provider, isLocked: store.isLocked, extensible: true }

  it('have unique names of the form "<group>: <what>"', () => {
    const cases = lockProviderSuite({ ...base, deleteRecord: store.deleteRecord, maxNameLength: 64, unreachableProvider: () => store.provider })
    const names = cases.map((c) => c.name)
    expect(new Set(names).size).toBe(names.length)
    expect(names.length).toBeGreaterThanOrEqual(20)
    for (const c of cases) expect(c.name.startsWith(`${c.group}: `)).toBe(true)
    expect(new Set(cases.map((c) => c.group))).toEqual(new Set(['basic', 'extension', 'record', 'ownership', 'names', 'failure', 'concurrency']))
  })

  it('have a positive, finite timeout that grows with timeGranularityMs', () => {
    const fine = lockProviderSuite(base)
    const coarse = lockProviderSuite({ ...base, timeGranularityMs: 1_000 })
    for (const c of [...fine, ...coarse]) {
      expect(c.timeoutMs).toBeGreaterThan(0)
      expect(Number.isFinite(c.timeoutMs)).toBe(true)
    }
    const timeout = (cases: LockProviderTestCase[], name: string) => cases.find((c) => c.name === name)!.timeoutMs
    expect(timeout(coarse, AT_LEAST)).toBeGreaterThan(timeout(fine, AT_LEAST))
    expect(timeout(coarse, 'basic: a lock expires after lockAtMostFor')).toBeGreaterThan(timeout(fine, 'basic: a lock expires after lockAtMostFor'))
  })

  it('report why optional cases are skipped', () => {
    const cases = lockProviderSuite(base)
    const skipped = Object.fromEntries(cases.filter((c) => c.skip).map((c) => [c.name, c.skip]))
    expect(skipped).toEqual({
      [DELETED]: 'no deleteRecord given',
      [TOO_LONG]: 'no maxNameLength given',
      [DEAD_STORE]: 'no unreachableProvider given',
    })
  })

  it('skip every extension case of a provider declared not extensible, saying why', () => {
    const cases = lockProviderSuite({ ...base, extensible: false, deleteRecord: store.deleteRecord, maxNameLength: 64, unreachableProvider: () => store.provider })
    const skipped = cases.filter((c) => c.skip)
    expect(skipped.length).toBeGreaterThan(0)
    for (const c of skipped) expect(c.skip).toBe('the provider is declared not extensible')
    expect(skipped.map((c) => c.name)).toContain(STALE_EXTEND)
    expect(cases.filter((c) => c.group === 'extension').every((c) => c.skip)).toBe(true)
    // The declaration check itself still runs.
    expect(cases.find((c) => c.name === DECLARED)!.skip).toBeUndefined()
  })

  it('report a caller\'s skip reason, and a skipped case does nothing', async () => {
    const broken = flawedProvider({ grantsEverything: true })
    const cases = lockProviderSuite({
      provider: () => broken.provider,
      isLocked: broken.isLocked,
      extensible: true,
      skip: { [SECOND_LOCK]: 'known issue #12', [DELETED]: 'overridden reason' },
    })
    const second = cases.find((c) => c.name === SECOND_LOCK)!
    expect(second.skip).toBe('known issue #12')
    await expect(second.run()).resolves.toBeUndefined()
    expect(cases.find((c) => c.name === DELETED)!.skip).toBe('overridden reason')
    expect(cases.filter((c) => c.skip)).toHaveLength(4)
  })
})
