import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { LockProvider, SimpleLock } from '../core/lock-provider.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { basicCases } from './basic-cases.ts'
import { fencingCases } from './fencing-cases.ts'
import { concurrencyCases } from './concurrency-cases.ts'
import { contentionCases } from './contention-cases.ts'
import { extensionCases } from './extension-cases.ts'
import { recordCases } from './record-cases.ts'
import { slotCases } from './slot-cases.ts'
import { type CaseGroup, lockName, mustLock, type SuiteContext, suiteConfiguration } from './suite-support.ts'

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
   * How hard the `contention` group races: `contenders` calls at once on one name, spread over two
   * nodes; `rounds` races per case. Raise them where the store has conflict paths to exercise (SQL
   * isolation levels), lower them where it runs one write at a time (an emulator).
   * @default { contenders: 16, rounds: 10 }
   */
  contention?: { contenders?: number; rounds?: number }
  /**
   * Declared, not sniffed: the provider serves slot runs (`executeWithLock(task, { slot })`), and
   * whether it has `inspector()`. Enables the `slots` group: a slot runs once across executors,
   * a failed slot counts as run, a slot that finds the task's lock held is skipped for good; with
   * an inspector, the slot record is listed under `<name>@`, `removeExpired` removes the expired
   * slot records and nothing else, and a catch-up runs missed slots once. Every provider of
   * shedlock passes them; memcached has no inspector (`{ inspector: false }`). `paired`: the
   * provider takes a slot's record and its task's lock in one round trip (shedlock's PostgreSQL
   * and single-node Redis providers do; a provider of your own leaves it out), and the cases of
   * that acquisition run. @default paired false
   */
  slots?: { inspector: boolean; paired?: boolean }
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
 * one lock at once, of many racing calls exactly one wins and none rejects, and (with the
 * `slots` option) slot runs and catch-up through executors.
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

  basicCases(suite, options.extensible)
  extensionCases(suite, options.extensible)

  recordCases(suite, options.extensible, options.deleteRecord)

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
  contentionCases(suite, options.extensible, options.contention?.contenders ?? 16, options.contention?.rounds ?? 10)

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
