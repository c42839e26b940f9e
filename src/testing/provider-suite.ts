import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setImmediate as yieldToEventLoop, setTimeout as sleep } from 'node:timers/promises'
import { LockConfigurationError, LockProviderError, LockStateError } from '../core/errors.ts'
import { type LockConfiguration, lockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLock, LockProvider, SimpleLock } from '../core/lock-provider.ts'
import { createLockingTaskExecutor, type TaskResult } from '../core/locking-task-executor.ts'
import { parseSlotRecordName, slotRecordName } from '../core/slots.ts'
import { fencingCases } from './fencing-cases.ts'
import { FIVE_MINUTES, mustLock, suiteConfiguration } from './suite-support.ts'

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
  readonly group:
    | 'basic'
    | 'extension'
    | 'record'
    | 'ownership'
    | 'names'
    | 'failure'
    | 'concurrency'
    | 'slots'
    | 'fencing'
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

  const extensible = (lock: SimpleLock): ExtensibleLock => {
    assert.equal(
      typeof (lock as Partial<ExtensibleLock>).extend,
      'function',
      'the lock has no extend(); declare extensible: false',
    )
    return lock as ExtensibleLock
  }

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

  // ---- extension (ShedLock's AbstractExtensibleLockProviderIntegrationTest) ----

  const notExtensible = options.extensible ? undefined : 'the provider is declared not extensible'

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

  // ---- concurrency ----

  add('concurrency', 'of 16 contenders racing on two nodes exactly one wins', 20_000, async () => {
    const name = lockName()
    const nodes = [await node(), await node()]
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => nodes[i % 2]!.lock(config(name))))
    const winners = results.filter((lock) => lock !== undefined)
    assert.equal(winners.length, 1, `${winners.length} contenders got the lock`)
    await winners[0]!.unlock()
  })

  add(
    'concurrency',
    'a same-name call a task left running keeps the lock until it ends, though the task returned',
    20_000,
    async () => {
      const name = lockName()
      const [first, second] = [createLockingTaskExecutor(await node()), createLockingTaskExecutor(await node())]
      const running = new Set<string>()
      let overlaps = 0
      const body = async (who: string, ms: number): Promise<void> => {
        if (running.size > 0) overlaps++
        running.add(who)
        await sleep(ms)
        running.delete(who)
      }
      let nested: Promise<unknown> | undefined
      let nestedSignal: AbortSignal | undefined
      let outerSignal: AbortSignal | undefined
      const outer = first.executeWithLock(
        ({ signal }) => {
          outerSignal = signal
          // Not awaited: the outer task returns at once while the nested run goes on.
          nested = first.executeWithLock(
            ({ signal: inner }) => {
              nestedSignal = inner
              return body('nested', 600)
            },
            { name, lockAtMostFor: FIVE_MINUTES },
          )
        },
        { name, lockAtMostFor: FIVE_MINUTES },
      )
      // The other node keeps trying while the nested run goes on, and after.
      let secondRan = 0
      const deadline = Date.now() + 1_500
      while (Date.now() < deadline) {
        const result = await second.executeWithLock(() => body('second node', 1), { name, lockAtMostFor: FIVE_MINUTES })
        if (result.executed) secondRan++
        await sleep(20)
      }
      await outer
      await nested
      assert.equal(overlaps, 0, 'another node ran the task while the nested run of a finished task still ran')
      assert.ok(secondRan > 0, 'the other node never got the lock after the nested run ended')
      assert.equal(nestedSignal, outerSignal, "the nested run did not get the outer lock's abort signal")
    },
  )

  add(
    'concurrency',
    'fuzz: two nodes, eight workers, two names, no lost update',
    120_000 + fuzzIterations * 8 * (g + 50),
    async () => {
      await fuzz([await node(), await node()], fuzzIterations, g === 1 ? 5 : 0)
    },
  )

  slotCases(options, add, node, lag)
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

type AddCase = (
  group: LockProviderTestCase['group'],
  what: string,
  timeoutMs: number,
  run: () => Promise<void>,
  skip?: string,
) => void

/**
 * The `slots` group: what a store must do for slot runs (docs/slots.md), through executors over
 * the provider, as applications use it.
 */
function slotCases(
  options: LockProviderSuiteOptions,
  add: AddCase,
  node: () => Promise<LockProvider>,
  lag: number,
): void {
  const g = Math.max(1, options.timeGranularityMs ?? 1)
  const short = Math.max(200, g)
  const declared = options.slots
  const noSlots = declared ? undefined : 'no slots option given'
  const noInspector = noSlots ?? (declared!.inspector ? undefined : 'the provider has no inspector()')
  const request = (name: string, slot: Date) => ({ name, lockAtMostFor: FIVE_MINUTES, lockAtLeastFor: 0, slot })
  // Whole seconds, in the past: slots are scheduled fire times, and a catch-up looks back.
  const slotsFrom = (count: number): Date[] => {
    const base = Math.floor(Date.now() / 1000) * 1000 - 60_000
    return Array.from({ length: count }, (_, k) => new Date(base + k * 1000))
  }
  const executors = async () =>
    [createLockingTaskExecutor(await node()), createLockingTaskExecutor(await node())] as const
  const names = (records: readonly { name: string }[]): string[] => records.map((r) => r.name)

  add(
    'slots',
    'the declared inspector() matches the provider',
    10_000,
    async () => {
      const provider = await node()
      assert.equal(
        typeof provider.inspector === 'function',
        declared!.inspector,
        declared!.inspector
          ? 'the provider has no inspector(); declare slots: { inspector: false }'
          : 'the provider has inspector(); declare slots: { inspector: true }',
      )
    },
    noSlots,
  )

  add(
    'slots',
    "a slot runs once across two executors: the other gets { executed: false, reason: 'slot-done' }, and the next slot runs",
    10_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [slot, next] = slotsFrom(2) as [Date, Date]
      const ran: number[] = []
      const task = ({ slot: s }: { slot: Date | undefined }): number => {
        ran.push(s!.getTime())
        return ran.length
      }
      assert.deepEqual(await a.executeWithLock(task, request(name, slot)), { executed: true, result: 1 })
      assert.deepEqual(
        await b.executeWithLock(task, request(name, slot)),
        { executed: false, reason: 'slot-done' },
        'another executor ran a slot that ran',
      )
      assert.deepEqual(
        await a.executeWithLock(task, request(name, slot)),
        { executed: false, reason: 'slot-done' },
        'the same executor ran a slot that ran',
      )
      assert.deepEqual(
        await b.executeWithLock(task, request(name, next)),
        { executed: true, result: 2 },
        'the next slot did not run',
      )
      assert.deepEqual(ran, [slot.getTime(), next.getTime()])
    },
    noSlots,
  )

  add(
    'slots',
    'of 8 attempts at one slot on two executors at once, one runs and seven find the slot done',
    10_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [slot] = slotsFrom(1) as [Date]
      let runs = 0
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 === 0 ? a : b).executeWithLock(() => void runs++, request(name, slot)),
        ),
      )
      assert.equal(runs, 1, `the slot ran ${runs} times`)
      assert.equal(results.filter((r) => r.executed).length, 1)
      assert.deepEqual(
        results.filter((r) => !r.executed),
        Array.from({ length: 7 }, () => ({ executed: false, reason: 'slot-done' })),
      )
    },
    noSlots,
  )

  add(
    'slots',
    'a failed slot counts as run: no executor runs it again',
    10_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [slot] = slotsFrom(1) as [Date]
      const failure = new Error('the task failed')
      await assert.rejects(
        a.executeWithLock(
          () => {
            throw failure
          },
          request(name, slot),
        ),
        (error: unknown) => error === failure,
      )
      let runs = 0
      for (const executor of [b, a])
        assert.deepEqual(
          await executor.executeWithLock(() => void runs++, request(name, slot)),
          { executed: false, reason: 'slot-done' },
          'a failed slot ran again',
        )
      assert.equal(runs, 0, 'a failed slot ran again')
    },
    noSlots,
  )

  add(
    'slots',
    "a slot that comes while the task's lock is held is skipped (reason 'held') and never runs afterwards",
    20_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [first, second, third] = slotsFrom(3) as [Date, Date, Date]
      let finish!: () => void
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const long = a.executeWithLock(
        async () => {
          started()
          await new Promise<void>((resolve) => (finish = resolve))
        },
        request(name, first),
      )
      await running
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      let skipped: TaskResult<void>
      try {
        skipped = await b.executeWithLock(task, request(name, second))
      } finally {
        finish()
      }
      assert.deepEqual(
        skipped,
        { executed: false, reason: 'held' },
        'a slot ran while a run of an earlier slot held the lock',
      )
      assert.deepEqual(await long, { executed: true, result: undefined })
      for (const executor of [a, b])
        assert.deepEqual(
          await executor.executeWithLock(task, request(name, second)),
          { executed: false, reason: 'slot-done' },
          'a skipped slot ran later',
        )
      assert.deepEqual(
        await b.executeWithLock(task, request(name, third)),
        { executed: true, result: undefined },
        'the slot after the skipped one did not run',
      )
      assert.deepEqual(ran, [third.getTime()])
    },
    noSlots,
  )

  add(
    'slots',
    "the inspector lists a slot's record under '<name>@', held for the slot retention",
    10_000,
    async () => {
      const name = lockName()
      const provider = await node()
      const executor = createLockingTaskExecutor(provider)
      const slots = slotsFrom(2)
      for (const slot of slots)
        assert.equal(
          (await executor.executeWithLock(() => {}, { ...request(name, slot), slotRetention: '1h' })).executed,
          true,
        )
      const { locks } = await provider.inspector!().list({ prefix: `${name}@` })
      assert.deepEqual(
        names(locks),
        slots.map((slot) => slotRecordName(name, slot)),
        'the slot records listed under the prefix',
      )
      for (const [i, record] of locks.entries()) {
        assert.deepEqual(parseSlotRecordName(record.name), { name, slot: slots[i] })
        assert.equal(record.held, true, `${record.name} is not held: a slot's record is never released`)
        if (record.remainingMs !== undefined)
          assert.ok(
            record.remainingMs > 55 * 60_000,
            `${record.name} expires in ${record.remainingMs} ms, not after the slot retention (1h)`,
          )
      }
    },
    noInspector,
  )

  add(
    'slots',
    "removeExpired({ prefix: '<name>@' }) removes the task's expired slot records and nothing else",
    4 * short + 2 * lag + 20_000,
    async () => {
      const name = lockName()
      const other = lockName()
      const provider = await node()
      const [expired1, expired2, live] = slotsFrom(3) as [Date, Date, Date]
      const take = async (recordName: string, lockAtMostFor: number): Promise<void> => {
        assert.ok(
          await provider.lock(lockConfiguration({ name: recordName, lockAtMostFor })),
          `could not take ${recordName}`,
        )
      }
      // As a slot run leaves them: taken, never released.
      await take(slotRecordName(name, expired1), short)
      await take(slotRecordName(name, expired2), short)
      await take(slotRecordName(other, expired1), short)
      await take(name, short)
      await take(slotRecordName(name, live), FIVE_MINUTES)
      await sleep(2 * short + 50 + lag)
      const inspector = provider.inspector!()
      const list = async (prefix: string): Promise<string[]> => names((await inspector.list({ prefix })).locks)
      // What lies outside the prefix: another task's expired slot record, the task's own expired lock.
      const outside = async () => ({
        otherTask: await list(`${other}@`),
        ownLock: (await inspector.get(name)) !== undefined,
      })
      // Stores that expire records by themselves (Redis, etcd) have dropped the expired ones already.
      const before = await list(`${name}@`)
      const outsideBefore = await outside()
      const removed = await inspector.removeExpired({ prefix: `${name}@` })
      assert.deepEqual(await list(`${name}@`), [slotRecordName(name, live)], 'the slot records left under the prefix')
      assert.equal(
        removed,
        before.length - 1,
        `removeExpired() said it removed ${removed} records, of ${JSON.stringify(before)}`,
      )
      assert.deepEqual(
        await outside(),
        outsideBefore,
        "removeExpired() touched a record outside its prefix: another task's slot record, or the task's own lock",
      )
    },
    noInspector,
  )

  add(
    'slots',
    "catchUp with policy 'all' on two executors at once runs each missed slot once, oldest first; a later catch-up finds nothing missed",
    20_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const schedule = slotsFrom(4)
      const fireTimes = (from: Date, to: Date): Date[] => schedule.filter((slot) => slot >= from && slot <= to)
      assert.equal((await a.executeWithLock(() => {}, request(name, schedule[0]!))).executed, true)
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      const catchUp = { policy: 'all' as const, within: '1h' as const, fireTimes }
      const lock = { name, lockAtMostFor: FIVE_MINUTES }
      const results = await Promise.all([a.catchUp(task, lock, catchUp), b.catchUp(task, lock, catchUp)])
      const missed = schedule.slice(1).map((slot) => slot.getTime())
      assert.deepEqual(ran, missed, 'the missed slots, each once, oldest first')
      const caughtUp = results.filter((result) => result.outcome === 'ran')
      assert.equal(caughtUp.length, 1, `catch-up outcomes: ${results.map((r) => r.outcome).join(', ')}`)
      assert.deepEqual(
        caughtUp[0]!.ran.map((slot) => slot.getTime()),
        missed,
      )
      // The other found the lock held (they overlapped), or nothing left to run (it came after).
      const other = results.find((result) => result !== caughtUp[0])!
      assert.ok(other.outcome === 'held' || other.outcome === 'nothing-missed', `the other catch-up: ${other.outcome}`)
      assert.equal((await b.catchUp(task, lock, catchUp)).outcome, 'nothing-missed')
      assert.deepEqual(
        await a.executeWithLock(task, request(name, schedule[2]!)),
        { executed: false, reason: 'slot-done' },
        'a caught-up slot ran again',
      )
      assert.deepEqual(ran, missed)
    },
    noInspector,
  )
}

/**
 * ShedLock's FuzzTester, made async: eight workers on two provider instances increment two
 * counters under two locks, with an `await` between read and write. Any overlap loses an update.
 */
async function fuzz(nodes: LockProvider[], iterations: number, lockAtLeastFor: number): Promise<void> {
  const names = [lockName(), lockName()]
  const counters = [0, 0]
  const executors = nodes.map((provider) => createLockingTaskExecutor(provider))
  const short = Math.max(1, Math.floor(iterations / 5))
  const worker = async (i: number): Promise<void> => {
    const which = i % 2
    // Workers 0,1 and 4,5 use the first node, 2,3 and 6,7 the second: each name is raced from both.
    const executor = executors[Math.floor(i / 2) % 2]!
    const goal = i === 0 ? short : iterations
    for (let done = 0; done < goal; ) {
      const result = await executor.executeWithLock(
        async () => {
          const seen = counters[which]!
          await sleep(1)
          counters[which] = seen + 1
        },
        { name: names[which]!, lockAtMostFor: FIVE_MINUTES, lockAtLeastFor },
      )
      if (result.executed) done++
      // An in-memory provider answers without I/O; let timers run between attempts.
      else await yieldToEventLoop()
    }
  }
  await Promise.all(Array.from({ length: 8 }, (_, i) => worker(i)))
  assert.equal(counters[0], 3 * iterations + short, `lost updates under "${names[0]}"`)
  assert.equal(counters[1], 4 * iterations, `lost updates under "${names[1]}"`)
  if (lockAtLeastFor > 0) await sleep(lockAtLeastFor)
}

function lockName(): string {
  return `suite-${randomUUID()}`
}
