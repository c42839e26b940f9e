import { AssertionError } from 'node:assert'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError } from '../../src/core/errors.ts'
import type { LockConfiguration } from '../../src/core/lock-configuration.ts'
import { type LockPair, type LockProvider, withLockPair } from '../../src/core/lock-provider.ts'
import { defineLock } from '../../src/core/define-lock.ts'
import type { LockInspector } from '../../src/core/lock-inspector.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { checkLockRequest } from '../../src/support/lock-request.ts'
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
  /** lock() takes any configuration: an expired one, or an object that only looks like one. */
  acceptsAnyConfiguration?: boolean
  /** Names longer than 64 characters make the store drop the connection, failing every later call (NATS, ZooKeeper). */
  longNamesBreakTheConnection?: boolean
  /** extend() refuses the first extension of every lock, live or not. */
  refusesFirstExtension?: boolean
  /** extend() answers this many ms late (a loaded machine), then does its job. */
  slowExtendMs?: number
  /** Fencing tokens: 'counter' counts per name from 1; 'repeats' hands out 7 every time; 'reset-on-expiry' starts over at 1 when an expired lock is taken over (a counter lost with its record). */
  tokens?: 'counter' | 'repeats' | 'reset-on-expiry'
}

/** An in-memory store with deliberate flaws; without flaws it is a correct provider. */
function flawedProvider(flaws: Flaws = {}) {
  const entries = new Map<string, { lockUntil: number; owner: symbol }>()
  const created = new Set<string>()
  const counters = new Map<string, bigint>()
  let broken = false
  const provider: LockProvider = {
    async lock(configuration: LockConfiguration) {
      if (!flaws.acceptsAnyConfiguration) checkLockRequest('flawed', configuration, { now: () => Date.now() })
      if (broken) throw new LockProviderError('the connection was dropped', { cause: new Error('connection closed') })
      if (flaws.longNamesBreakTheConnection && configuration.name.length > 64) {
        broken = true
        throw new LockProviderError('the server dropped the connection', {
          cause: new Error('maximum control line exceeded'),
        })
      }
      const now = Date.now()
      const { name } = configuration
      const existing = entries.get(name)
      if (flaws.neverRecreates && created.has(name) && !existing) return undefined
      if (existing && existing.lockUntil > now && !flaws.grantsEverything) return undefined
      const owner = Symbol(name)
      const expired = existing !== undefined && existing.lockUntil <= now && existing.lockUntil < Date.now() - 100
      entries.set(name, { lockUntil: configuration.lockAtMostUntil.getTime(), owner })
      created.add(name)
      const counted = flaws.tokens === 'reset-on-expiry' && expired ? 1n : (counters.get(name) ?? 0n) + 1n
      counters.set(name, counted)
      const fencingToken = flaws.tokens === undefined ? undefined : flaws.tokens === 'repeats' ? 7n : counted
      const mine = (n: string) => {
        const entry = entries.get(n)
        return entry && (entry.owner === owner || flaws.unlockIgnoresOwner) ? entry : undefined
      }
      const unlock = async (current: LockConfiguration) => {
        const entry = mine(current.name)
        if (entry)
          entry.lockUntil = flaws.ignoresLockAtLeastFor
            ? Date.now()
            : Math.max(Date.now(), current.lockAtLeastUntil.getTime())
      }
      if (flaws.noExtend) return defineLock(configuration, { unlock, fencingToken })
      return defineLock(configuration, {
        unlock,
        fencingToken,
        async extend(next, current) {
          if (flaws.slowExtendMs) await new Promise((resolve) => setTimeout(resolve, flaws.slowExtendMs))
          if (flaws.refusesFirstExtension && current === configuration) return false
          const entry = entries.get(next.name)
          if (!entry || entry.lockUntil <= Date.now() || (entry.owner !== owner && !flaws.extendIgnoresOwner))
            return false
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
const RACE =
  'contention: contenders racing on two nodes: exactly one wins each round, on a new, a released and an expired lock, and none rejects'
const EXTEND_RACE =
  'contention: holders extend and release while the other contenders keep racing for their lock: never two holders, and none rejects'
const FUZZ = 'concurrency: fuzz: two nodes, eight workers, two names, no lost update'
const DECLARED = 'basic: the declared extensibility matches the locks'
const EXTENDS = 'extension: extends a lock past its first lockAtMostFor'
const DELETED = 'record: a record deleted by hand is recreated by the next lock'
const DEAD_STORE = 'failure: a dead store rejects with LockProviderError and the task does not run'
const EXTENDS_THRICE = 'extension: extends a lock three times in a row'
const TOO_LONG =
  'names: a name longer than the store accepts rejects with LockConfigurationError before anything is sent, and the connection still serves other locks'
const REFUSES = 'basic: refuses an expired configuration and a look-alike object, before the store is asked'
const FENCING_DECLARED = 'fencing: the declared fencing tokens match the locks'
const FENCING_RELOCK = 'fencing: tokens increase across unlock and relock, from the same and from other nodes'
const FENCING_TAKEOVER = 'fencing: a takeover of an expired lock gets a greater token than the dead holder had'
const FENCING_EXTENSION = 'fencing: an extension keeps the token, and the next acquisition gets a greater one'
const FENCING_RACE = 'fencing: racing nodes get strictly increasing tokens in the order they held the lock'
const FENCING_TASK = "fencing: the executor hands the lock's token to the task"
const NESTED =
  'concurrency: a same-name call a task left running keeps the lock until it ends, though the task returned'
const SLOT_DECLARED = 'slots: the declared inspector() matches the provider'
const PAIR_DECLARED = 'slots: the declared paired acquisition matches the provider'
const PAIR_BOTH =
  'slots: paired: both free, the slot record and the task lock are taken, held, and released each by its handle'
const PAIR_CLAIM_HELD = 'slots: paired: a slot record held elsewhere takes nothing, and the task lock stays free'
const PAIR_TASK_HELD =
  "slots: paired: a task lock held elsewhere still gives the slot record, and the holder's lock is untouched"
const PAIR_TOKEN =
  'slots: paired: the task lock carries a fencing token where lock() gives one, above the one of its last holder'
const PAIR_SAME_TURN =
  'slots: paired: pairs asked for in the same turn (one batch, where the store batches) each get their own answer'
const PAIR_RELEASES =
  'slots: paired: task locks released in the same turn keep each its own lockAtLeastFor, and only their own'
const PAIRED = [PAIR_BOTH, PAIR_CLAIM_HELD, PAIR_TASK_HELD, PAIR_TOKEN, PAIR_SAME_TURN, PAIR_RELEASES]
const notPaired = (c: LockProviderTestCase): boolean => !PAIRED.includes(c.name)
const SLOT_ONCE =
  "slots: a slot runs once across two executors: the other gets { executed: false, reason: 'slot-done' }, and the next slot runs"
const SLOT_RACE = 'slots: of 8 attempts at one slot on two executors at once, one runs and seven find the slot done'
const SLOT_FAILED = 'slots: a failed slot counts as run: no executor runs it again'
const SLOT_HELD =
  "slots: overlap 'skip': a slot that comes while the task's lock is held is skipped (reason 'held') and never runs afterwards"
const SLOT_OWED =
  "slots: overlap 'all' (the default): slots that come while the lock is held are owed (reason 'owed') and each runs once the lock frees, oldest first"
const SLOT_DEAD_HOLDER =
  'slots: a holder that died (its lease not renewed) frees the lock within the lease, and the slots due meanwhile run, once'
const SLOT_OWED_LEFT = 'slots: owed slots left by a node that died (owed, never run) are run by the next catch-up, once'
const OWED = [SLOT_OWED, SLOT_DEAD_HOLDER, SLOT_OWED_LEFT]
const SLOT_LISTED = "slots: the inspector lists a slot's record under '<name>@', held for the slot retention"
const SLOT_REMOVE_EXPIRED =
  "slots: removeExpired({ prefix: '<name>@' }) removes the task's expired slot records and nothing else"
const SLOT_CATCH_UP =
  "slots: catchUp with policy 'all' on two executors at once runs each missed slot once, oldest first; a later catch-up finds nothing missed"

/** The slot cases over the in-memory provider (which has an inspector), its inspector changed by `inspector`. */
function slotSuite(
  inspector: (real: LockInspector) => LockInspector | undefined = (real) => real,
  declared = true,
  pair?: (provider: LockProvider) => LockPair,
): LockProviderTestCase[] {
  const memory = inMemoryLockProvider()
  const real = memory.inspector!()
  const changed = inspector(real)
  const plain: LockProvider = {
    name: 'in-memory',
    lock: (configuration) => memory.lock(configuration),
    ...(changed ? { inspector: () => changed } : {}),
  }
  const provider = pair ? withLockPair(plain, pair(plain)) : plain
  return lockProviderSuite({
    provider: () => provider,
    isLocked: async (name) => (memory.inspect(name)?.lockUntil.getTime() ?? 0) > Date.now(),
    extensible: true,
    slots: { inspector: declared, paired: pair !== undefined },
  }).filter((c) => c.group === 'slots')
}

// A paired acquisition made of two lock() calls: what the paired cases ask of a real one.
const twoCalls =
  (provider: LockProvider): LockPair =>
  async (first, second) => {
    const claim = await provider.lock(first)
    return claim ? [claim, await provider.lock(second)] : [undefined, undefined]
  }

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
    for (const name of [
      STALE_UNLOCK,
      STALE_EXTEND,
      AT_LEAST,
      EXTENSION_AT_LEAST,
      SECOND_LOCK,
      FRESH_NODE,
      RACE,
      EXTEND_RACE,
      FUZZ,
      DECLARED,
      EXTENDS,
      DELETED,
    ]) {
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
    await mustFail(pick(cases, RACE), /16 of 16 contenders got the lock/)
    await mustFail(pick(cases, EXTEND_RACE), /a contender got the lock while another held it/)
    await mustFail(pick(cases, FUZZ), /lost updates/)
  })

  it('an extend() that refuses a live lock, though a late extension starts the case over', async () => {
    const cases = suiteFor({ refusesFirstExtension: true })
    await mustFail(
      pick(cases, EXTENDS),
      /resolved to undefined \d+ ms after its acquisition, within its lockAtMostFor of 200 ms/,
    )
    await mustFail(
      pick(cases, EXTENDS_THRICE),
      /resolved to undefined \d+ ms after its acquisition, within its lockAtMostFor of 200 ms/,
    )
  })

  it('a machine too slow to extend a lock within its lockAtMostFor fails the case after three tries, and says so', {
    timeout: 20_000,
  }, async () => {
    await mustFail(
      pick(suiteFor({ slowExtendMs: 250 }), EXTENDS_THRICE),
      /three times, extending a lock took longer than its lockAtMostFor of 200 ms .*too loaded/,
    )
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
      await mustFail(
        deadStore(() => new Error('connect ECONNREFUSED 127.0.0.1:1')),
        /expected LockProviderError/,
      )
    })

    it('rejecting with a LockProviderError without cause fails', async () => {
      await mustFail(
        deadStore((name) => new LockProviderError(`Could not lock "${name}"`)),
        /no cause/,
      )
    })

    it('rejecting with a LockProviderError that does not name the lock fails', async () => {
      await mustFail(
        deadStore(() => new LockProviderError('Could not lock', { cause: new Error('ECONNREFUSED') })),
        /does not name the lock/,
      )
    })

    it('rejecting with a LockProviderError with cause, naming the lock, passes', async () => {
      await deadStore(
        (name) => new LockProviderError(`Could not lock "${name}"`, { cause: new Error('ECONNREFUSED') }),
      ).run()
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
      return pick(
        lockProviderSuite({ provider: () => provider, isLocked: store.isLocked, extensible: true, maxNameLength: 64 }),
        TOO_LONG,
      )
    }

    it('that accepts longer names fails', async () => {
      await mustFail(pick(suiteFor({}, { maxNameLength: 64 }), TOO_LONG), /Missing expected rejection/)
    })

    it('that rejects with a plain Error fails', async () => {
      await mustFail(
        limited(() => new Error('value too long')),
        /expected LockConfigurationError/,
      )
    })

    it('that lets the store reject the name (LockProviderError) fails', async () => {
      await mustFail(
        limited(
          (name) => new LockProviderError(`Lock name "${name}" is too long`, { cause: new Error('value too long') }),
        ),
        /expected LockConfigurationError/,
      )
    })

    it('that sends the name and loses the connection for other locks fails', async () => {
      await mustFail(
        pick(suiteFor({ longNamesBreakTheConnection: true }, { maxNameLength: 64 }), TOO_LONG),
        /expected LockConfigurationError/,
      )
    })

    it('that refuses the name with a LockConfigurationError naming the lock passes', async () => {
      await limited((name) => new LockConfigurationError(`Lock name "${name}" is too long`)).run()
    })
  })

  describe('slots', () => {
    it('a correct provider with an inspector passes every slot case', { timeout: 60_000 }, async () => {
      const cases = slotSuite()
      expect(cases.map((c) => c.name)).toEqual([
        SLOT_DECLARED,
        PAIR_DECLARED,
        SLOT_ONCE,
        SLOT_RACE,
        SLOT_FAILED,
        SLOT_HELD,
        ...OWED,
        SLOT_LISTED,
        SLOT_REMOVE_EXPIRED,
        SLOT_CATCH_UP,
        ...PAIRED,
      ])
      for (const c of cases.filter((c) => c.skip)) expect(c.name).toMatch(/^slots: paired: /)
      for (const c of cases) await c.run()
    })

    it('a correct paired acquisition passes every slot case, the paired ones included', {
      timeout: 60_000,
    }, async () => {
      const cases = slotSuite(undefined, true, twoCalls)
      expect(cases.filter((c) => c.skip)).toEqual([])
      for (const c of cases) await c.run()
    })

    it('a paired acquisition that takes the task lock whatever the slot record, or frees a held lock', async () => {
      await mustFail(
        pick(
          slotSuite(undefined, true, (provider) => async (first, second) => {
            const [claim, lock] = await Promise.all([provider.lock(first), provider.lock(second)])
            return claim ? [claim, lock] : [undefined, undefined]
          }),
          PAIR_CLAIM_HELD,
        ),
        /expected to acquire/,
      )
      await mustFail(
        pick(suiteFor({}, { slots: { inspector: true, paired: true } }), PAIR_DECLARED),
        /declare slots: \{ paired: false \}/,
      )
    })

    it('a provider that grants every lock runs slots twice, and runs a slot while the lock is held', async () => {
      const cases = suiteFor({ grantsEverything: true }, { slots: { inspector: false } })
      await mustFail(pick(cases, SLOT_ONCE), /another executor ran a slot that ran/)
      await mustFail(pick(cases, SLOT_RACE), /the slot ran [2-8] times/)
      await mustFail(pick(cases, SLOT_FAILED), /a failed slot ran again/)
      await mustFail(pick(cases, SLOT_HELD), /a slot ran while a run of an earlier slot held the lock/)
    })

    it('a provider whose inspector cannot release runs no owed slot: the owed cases fail', {
      timeout: 60_000,
    }, async () => {
      const stuck = (real: LockInspector): LockInspector => ({ ...real, release: async () => false })
      await mustFail(pick(slotSuite(stuck), SLOT_OWED), /the owed slots did not all run/)
      await mustFail(pick(slotSuite(stuck), SLOT_OWED_LEFT), /the owed slots did not run/)
    })

    it('a provider declared with an inspector that has none, and the other way round', async () => {
      await mustFail(
        pick(suiteFor({}, { slots: { inspector: true } }), SLOT_DECLARED),
        /declare slots: \{ inspector: false \}/,
      )
      await mustFail(
        pick(
          slotSuite((real) => real, false),
          SLOT_DECLARED,
        ),
        /declare slots: \{ inspector: true \}/,
      )
    })

    it('an inspector whose removeExpired() ignores the prefix, or removes live records', async () => {
      await mustFail(
        pick(
          slotSuite((real) => ({ ...real, removeExpired: () => real.removeExpired() })),
          SLOT_REMOVE_EXPIRED,
        ),
        /removed 4 records/,
      )
      const removesLive: (real: LockInspector) => LockInspector = (real) => ({
        ...real,
        removeExpired: async (selection) => {
          let removed = 0
          for (const record of (await real.list(selection)).locks) if (await real.release(record)) removed++
          return removed + (await real.removeExpired(selection))
        },
      })
      await mustFail(pick(slotSuite(removesLive), SLOT_REMOVE_EXPIRED), /the slot records left under the prefix/)
    })

    it('an inspector that lists no slot records: the slot record is not listed, and a catch-up finds no history', async () => {
      const blind = (real: LockInspector): LockInspector => ({
        ...real,
        list: async (selection) => ({ ...(await real.list(selection)), locks: [] }),
      })
      await mustFail(pick(slotSuite(blind), SLOT_LISTED), /the slot records listed under the prefix/)
      await mustFail(pick(slotSuite(blind), SLOT_CATCH_UP), /the missed slots, each once, oldest first/)
    })
  })

  it('a provider that takes an expired configuration or a look-alike fails', async () => {
    await mustFail(pick(suiteFor({ acceptsAnyConfiguration: true }), REFUSES), /expired configuration was not refused/)
  })

  it('a correct provider passes the configuration and the left-running nested call cases', async () => {
    await pick(suiteFor({}), REFUSES).run()
    await pick(suiteFor({}), NESTED).run()
  })

  it('a provider that grants everything fails the left-running nested call case', async () => {
    await mustFail(pick(suiteFor({ grantsEverything: true }), NESTED), /another node ran the task/)
  })
})

describe('lockProviderSuite cases', () => {
  const store = flawedProvider()
  const base: LockProviderSuiteOptions = { provider: () => store.provider, isLocked: store.isLocked, extensible: true }

  it('have unique names of the form "<group>: <what>"', () => {
    const cases = lockProviderSuite({
      ...base,
      deleteRecord: store.deleteRecord,
      maxNameLength: 64,
      unreachableProvider: () => store.provider,
      slots: { inspector: true },
    })
    const names = cases.map((c) => c.name)
    expect(new Set(names).size).toBe(names.length)
    expect(names.length).toBeGreaterThanOrEqual(20)
    for (const c of cases) expect(c.name.startsWith(`${c.group}: `)).toBe(true)
    expect(new Set(cases.map((c) => c.group))).toEqual(
      new Set([
        'basic',
        'extension',
        'record',
        'ownership',
        'names',
        'failure',
        'concurrency',
        'contention',
        'slots',
        'fencing',
      ]),
    )
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
    expect(timeout(coarse, 'basic: a lock expires after lockAtMostFor')).toBeGreaterThan(
      timeout(fine, 'basic: a lock expires after lockAtMostFor'),
    )
  })

  it('report why optional cases are skipped', () => {
    const cases = lockProviderSuite(base)
    const skipped = Object.fromEntries(
      cases.filter((c) => c.skip && c.group !== 'slots' && c.group !== 'fencing').map((c) => [c.name, c.skip]),
    )
    expect(skipped).toEqual({
      [DELETED]: 'no deleteRecord given',
      [TOO_LONG]: 'no maxNameLength given',
      [DEAD_STORE]: 'no unreachableProvider given',
    })
    const slots = cases.filter((c) => c.group === 'slots')
    expect(slots.length).toBeGreaterThanOrEqual(8)
    for (const c of slots) expect(c.skip, c.name).toBe('no slots option given')
    const fencing = cases.filter((c) => c.group === 'fencing' && c.skip)
    expect(fencing.length).toBeGreaterThanOrEqual(4)
    for (const c of fencing) expect(c.skip, c.name).toBe('the provider is declared without fencing tokens')
    expect(cases.find((c) => c.name === FENCING_DECLARED)!.skip).toBeUndefined()
  })

  it('skip the slot cases that need an inspector for a provider declared without one, and run the others', () => {
    const cases = lockProviderSuite({ ...base, slots: { inspector: false } }).filter((c) => c.group === 'slots')
    const skipped = cases.filter((c) => c.skip && notPaired(c))
    expect(skipped.map((c) => c.name)).toEqual([...OWED, SLOT_LISTED, SLOT_REMOVE_EXPIRED, SLOT_CATCH_UP])
    for (const c of skipped) expect(c.skip).toBe('the provider has no inspector()')
  })

  it('skip every extension case of a provider declared not extensible, saying why', () => {
    const cases = lockProviderSuite({
      ...base,
      extensible: false,
      deleteRecord: store.deleteRecord,
      maxNameLength: 64,
      unreachableProvider: () => store.provider,
      slots: { inspector: true },
    })
    const skipped = cases.filter((c) => c.skip && c.group !== 'fencing' && notPaired(c))
    expect(skipped.length).toBeGreaterThan(0)
    for (const c of skipped) expect(c.skip).toBe('the provider is declared not extensible')
    expect(skipped.map((c) => c.name)).toContain(STALE_EXTEND)
    expect(cases.filter((c) => c.group === 'extension').every((c) => c.skip)).toBe(true)
    // The declaration check itself still runs.
    expect(cases.find((c) => c.name === DECLARED)!.skip).toBeUndefined()
  })

  it("report a caller's skip reason, and a skipped case does nothing", async () => {
    const broken = flawedProvider({ grantsEverything: true })
    const cases = lockProviderSuite({
      provider: () => broken.provider,
      isLocked: broken.isLocked,
      extensible: true,
      slots: { inspector: true },
      skip: { [SECOND_LOCK]: 'known issue #12', [DELETED]: 'overridden reason' },
    })
    const second = cases.find((c) => c.name === SECOND_LOCK)!
    expect(second.skip).toBe('known issue #12')
    await expect(second.run()).resolves.toBeUndefined()
    expect(cases.find((c) => c.name === DELETED)!.skip).toBe('overridden reason')
    expect(cases.filter((c) => c.skip && c.group !== 'fencing' && notPaired(c))).toHaveLength(4)
  })
})

describe('lockProviderSuite fencing group', () => {
  const run = (flaws: Flaws, fencing: boolean, name: string) => pick(suiteFor(flaws, { fencing }), name).run()

  it('passes a provider whose tokens count per name, and one declared without tokens that has none', async () => {
    for (const name of [
      FENCING_DECLARED,
      FENCING_RELOCK,
      FENCING_TAKEOVER,
      FENCING_EXTENSION,
      FENCING_RACE,
      FENCING_TASK,
    ])
      await run({ tokens: 'counter' }, true, name)
    await run({}, false, FENCING_DECLARED)
  })

  it('fails a provider whose declaration does not match its locks', async () => {
    await expect(run({}, true, FENCING_DECLARED)).rejects.toThrow(/declared fencing: true, but the lock has none/)
    await expect(run({ tokens: 'counter' }, false, FENCING_DECLARED)).rejects.toThrow(/declared fencing: false/)
  })

  it('fails a provider that repeats a token', async () => {
    await expect(run({ tokens: 'repeats' }, true, FENCING_RELOCK)).rejects.toThrow(/is not greater than/)
    await expect(run({ tokens: 'repeats' }, true, FENCING_RACE)).rejects.toThrow(/is not greater than/)
    await expect(run({ tokens: 'repeats' }, true, FENCING_TASK)).rejects.toThrow(/is not greater than/)
  })

  it('fails a provider whose counter starts over when an expired lock is taken over', async () => {
    await expect(run({ tokens: 'reset-on-expiry' }, true, FENCING_TAKEOVER)).rejects.toThrow(/is not greater than/)
  })
})
