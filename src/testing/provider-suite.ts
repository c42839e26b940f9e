import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { LockConfigurationError, LockProviderError, LockStateError } from '../core/errors.ts'
import { type LockConfiguration, lockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLock, LockProvider, SimpleLock } from '../core/lock-provider.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { fencingCases } from './fencing-cases.ts'
import { concurrencyCases } from './concurrency-cases.ts'
import { extensionCases } from './extension-cases.ts'
import { slotCases } from './slot-cases.ts'
import {
  type CaseGroup,
  extensible,
  lockName,
  mustLock,
  type SuiteContext,
  suiteConfiguration,
} from './suite-support.ts'

/** Options of {@link lockProviderSuite}. */
export interface LockProviderSuiteOptions {
  /**
   * Returns a new provider instance. Each call stands for another node: the suite takes two or
   * more to check that they exclude each other. Instances may share one client.
   */
  provider: () => LockProvider | Promise<LockProvider>
  /** Reads the store directly, never through the provider: is `name` held right now? */
  isLocked: (name: string) => Promise<boolean>
  /** Declared, not sniffed: do the provider's locks have `extend()`? The suite checks the declaration. */
  extensible: boolean
  /** Deletes the record of `name` behind the provider's back; enables the "deleted record" case. */
  deleteRecord?: (name: string) => Promise<void>
  /** Returns a provider whose store is unreachable (closed client, wrong port); enables the "dead store" case. */
  unreachableProvider?: () => LockProvider | Promise<LockProvider>
  /**
   * Longest lock name (in ASCII characters) the store accepts; enables a case that one character
   * more rejects with `LockConfigurationError` before anything is sent, and that the provider's
   * connection still serves other locks afterwards.
   */
  maxNameLength?: number
  /** Smallest duration the store honours, in ms (memcached: 1000; etcd: its minimum lease TTL, 2000 by default). Sleeps scale with it. @default 1 */
  timeGranularityMs?: number
  /**
   * How long after its expiry the store may still show a lock, in ms (etcd removes keys of
   * expired leases in a pass every 500 ms). Every sleep that waits for an expiry adds it. @default 0
   */
  expiryLagMs?: number
  /** Executions per fuzz worker (the short worker does a fifth). @default 25 */
  fuzzIterations?: number
  /**
   * Declared, not sniffed: the provider serves slot runs (`executeWithLock(task, { slot })`), and
   * whether it has `inspector()`. Enables the `slots` group: a slot runs once across executors,
   * a failed slot counts as run, a slot that finds the task's lock held is skipped for good; with
   * an inspector, the slot record is listed under `<name>@`, `removeExpired` removes the expired
   * slot records and nothing else, and a catch-up runs missed slots once. Every provider of
   * shedlock passes them; memcached has no inspector (`{ inspector: false }`).
   */
  slots?: { inspector: boolean }
  /**
   * Declared, not sniffed: the provider's locks carry a `fencingToken` (docs/fencing.md). Enables
   * the `fencing` group: tokens are bigints, strictly increasing per name across unlocks, expiries,
   * takeovers and racing nodes, kept by an extension, and handed to the task by the executor. With
   * `false` (the default) the group checks only that locks carry no token.
   */
  fencing?: boolean
  /** Test name -> reason: the case is returned with `skip` set and its run does nothing. */
  skip?: Record<string, string>
}

/** One case of the suite: register it with your runner, e.g. `it(c.name, c.run)` or `it.skip` when `skip` is set. */
export interface LockProviderTestCase {
  /** `"<group>: <what it checks>"`. */
  readonly name: string
  readonly group: CaseGroup
  /** Why the case is skipped, if it is. */
  readonly skip?: string
  /** The case's budget in ms, sleeps included; give your runner at least this timeout. */
  readonly timeoutMs: number
  run(): Promise<void>
}

/**
 * The provider contract, as test cases. Ports Java ShedLock's provider tests (basic, extension,
 * storage-based and fuzz groups) and adds shedlock's own: stale holders cannot release or extend
 * a newer holder's lock, deleted records are recreated, unusual names work, declared
 * capabilities match, a dead store rejects with `LockProviderError`, two nodes never hold
 * one lock at once, and (with the `slots` option) slot runs and catch-up through executors.
 * Asserts with `node:assert`, so any runner can register the cases:
 *
 * ```ts
 * for (const c of lockProviderSuite({ provider: () => postgresLockProvider({ client: pool }), isLocked, extensible: true })) {
 *   it.skipIf(c.skip)(c.name, c.run, c.timeoutMs)
 * }
 * ```
 *
 * Every case uses fresh random lock names, so cases are independent and may share a store.
 */
export function lockProviderSuite(options: LockProviderSuiteOptions): LockProviderTestCase[] {
  const g = Math.max(1, options.timeGranularityMs ?? 1)
  const short = Math.max(200, g)
  const atLeast = Math.max(800, 2 * g)
  const fuzzIterations = options.fuzzIterations ?? 25
  const lag = Math.max(0, options.expiryLagMs ?? 0)
  // Real time: expiry happens in the store.
  const waitForExpiry = (ms: number): Promise<void> => sleep(ms + lag)
  const node = async (): Promise<LockProvider> => options.provider()
  const cases: LockProviderTestCase[] = []

  const add = (
    group: LockProviderTestCase['group'],
    what: string,
    timeoutMs: number,
    run: () => Promise<void>,
    skip?: string,
  ): void => {
    const name = `${group}: ${what}`
    const reason = options.skip?.[name] ?? skip
    const budget = timeoutMs + 2 * lag
    cases.push(
      reason === undefined
        ? { name, group, timeoutMs: budget, run }
        : { name, group, timeoutMs: budget, skip: reason, run: async () => {} },
    )
  }

  const config = suiteConfiguration

  const assertHeld = async (name: string, message = `expected "${name}" to be locked in the store`): Promise<void> => {
    assert.equal(await options.isLocked(name), true, message)
  }
  const assertFree = async (
    name: string,
    message = `expected "${name}" to be unlocked in the store`,
  ): Promise<void> => {
    assert.equal(await options.isLocked(name), false, message)
  }

  const suite: SuiteContext = { add, node, assertHeld, assertFree, waitForExpiry, g, short }

  // ---- basic (ShedLock's AbstractLockProviderIntegrationTest) ----

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
      options.extensible,
      `declared extensible: ${options.extensible}, but the lock ${hasExtend ? 'has' : 'has no'} extend()`,
    )
    await lock.unlock()
  })

  extensionCases(suite, options.extensible)

  // ---- record: what the store keeps between nodes (ShedLock's storage-based group, without its cache) ----

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
      await options.deleteRecord!(name)
      const lock = await mustLock(provider, config(name))
      await assertHeld(name, 'the lock was granted but not written to the store')
      assert.equal(await (await node()).lock(config(name)), undefined)
      await lock.unlock()
    },
    options.deleteRecord ? undefined : 'no deleteRecord given',
  )

  // ---- ownership: a stale holder never touches a newer holder's lock ----

  const notExtensible = options.extensible ? undefined : 'the provider is declared not extensible'

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

  // ---- names ----

  add('names', "names with ':', '/', spaces and non-ASCII letters work and stay distinct", 10_000, async () => {
    const id = randomUUID().slice(0, 8)
    const names = [`n:${id}:a`, `n/${id}/a`, `n ${id} a`, `n-${id}-été-日本`, `n_${id}_a`]
    const provider = await node()
    const locks: SimpleLock[] = []
    for (const name of names) locks.push(await mustLock(provider, config(name)))
    for (const name of names) await assertHeld(name)
    await locks[0]!.unlock()
    await assertFree(names[0]!)
    for (const name of names.slice(1)) await assertHeld(name, `releasing "${names[0]}" released "${name}"`)
    for (const lock of locks.slice(1)) await lock.unlock()
  })

  add(
    'names',
    'a name longer than the store accepts rejects with LockConfigurationError before anything is sent, and the connection still serves other locks',
    10_000,
    async () => {
      const max = options.maxNameLength!
      const fits = lockName().slice(0, max).padEnd(max, 'x')
      const provider = await node()
      const held = await mustLock(provider, config(lockName()))
      await (await mustLock(provider, config(fits))).unlock()
      const tooLong = `${fits}y`
      await assert.rejects(provider.lock(config(tooLong)), (error: unknown) => {
        assert.ok(error instanceof LockConfigurationError, `expected LockConfigurationError, got ${String(error)}`)
        assert.ok(error.message.includes(tooLong.slice(0, 60)), 'the message does not name the lock')
        return true
      })
      const far = `${fits}${'z'.repeat(Math.max(10_000, 8 * max))}`
      await assert.rejects(provider.lock(config(far)), LockConfigurationError)
      // Nothing reached the store, so nothing broke the connection other locks use.
      const other = await mustLock(provider, config(lockName()))
      await other.unlock()
      await held.unlock()
    },
    options.maxNameLength === undefined ? 'no maxNameLength given' : undefined,
  )

  // ---- failure ----

  add(
    'failure',
    'a dead store rejects with LockProviderError and the task does not run',
    20_000,
    async () => {
      const provider = await options.unreachableProvider!()
      const name = lockName()
      await assert.rejects(provider.lock(config(name)), (error: unknown) => {
        assert.ok(error instanceof LockProviderError, `expected LockProviderError, got ${String(error)}`)
        assert.notEqual(error.cause, undefined, 'the LockProviderError has no cause')
        assert.ok(error.message.includes(name), 'the message does not name the lock')
        return true
      })
      let ran = false
      const executor = createLockingTaskExecutor(provider)
      await assert.rejects(
        executor.executeWithLock(() => {
          ran = true
        }, config(name)),
        LockProviderError,
      )
      assert.equal(ran, false, 'the task ran without its lock')
    },
    options.unreachableProvider ? undefined : 'no unreachableProvider given',
  )

  concurrencyCases(suite, fuzzIterations)

  slotCases({ slots: options.slots, timeGranularityMs: options.timeGranularityMs }, add, node, lag)
  fencingCases(
    { fencing: options.fencing, extensible: options.extensible, timeGranularityMs: g, expiryLagMs: lag },
    add,
    node,
  )

  const unknown = Object.keys(options.skip ?? {}).filter((key) => !cases.some((c) => c.name === key))
  if (unknown.length > 0) {
    throw new TypeError(
      `lockProviderSuite: skip names no case: ${unknown.map((k) => JSON.stringify(k)).join(', ')}; use the full case name, "<group>: <what it checks>"`,
    )
  }
  return cases
}
