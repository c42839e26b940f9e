import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setImmediate as yieldToEventLoop, setTimeout as sleep } from 'node:timers/promises'
import { type LockConfiguration, lockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLock, LockProvider, SimpleLock } from '../core/lock-provider.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'

/** The suites' default lockAtMostFor, in ms: long enough that no case waits for it by accident. */
export const FIVE_MINUTES: number = 5 * 60_000

/** A configuration made now: `lockAtMostFor` five minutes unless given, no `lockAtLeastFor` unless given (ms). */
export function suiteConfiguration(
  name: string,
  lockAtMostFor: number = FIVE_MINUTES,
  lockAtLeastFor = 0,
): LockConfiguration {
  return lockConfiguration({ name, lockAtMostFor, lockAtLeastFor })
}

/** Takes `configuration` from `provider`, failing the case when the lock is not granted. */
export async function mustLock(provider: LockProvider, configuration: LockConfiguration): Promise<SimpleLock> {
  const lock = await provider.lock(configuration)
  assert.ok(lock, `expected to acquire "${configuration.name}"`)
  return lock
}

/** A fresh lock name, so that cases are independent and may share a store. */
export function lockName(): string {
  return `suite-${randomUUID()}`
}

/**
 * ShedLock's FuzzTester, made async: eight workers on two provider instances increment two
 * counters under two locks, with an `await` between read and write. Any overlap loses an update.
 */
export async function fuzz(nodes: LockProvider[], iterations: number, lockAtLeastFor: number): Promise<void> {
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

/** The groups of the provider suite's cases. */
export type CaseGroup =
  | 'basic'
  | 'extension'
  | 'record'
  | 'ownership'
  | 'names'
  | 'failure'
  | 'concurrency'
  | 'contention'
  | 'slots'
  | 'fencing'

/** What the provider suite's groups share: how to add a case, the nodes, the store's view, the timings (ms). */
export interface SuiteContext {
  add(group: CaseGroup, what: string, timeoutMs: number, run: () => Promise<void>, skip?: string): void
  /** A new provider instance: another node. */
  node(): Promise<LockProvider>
  /** Asserts, reading the store directly, that `name` is held. */
  assertHeld(name: string, message?: string): Promise<void>
  /** Asserts, reading the store directly, that `name` is free. */
  assertFree(name: string, message?: string): Promise<void>
  /** Sleeps `ms` plus the store's expiry lag. */
  waitForExpiry(ms: number): Promise<void>
  /** The store's time granularity. */
  readonly g: number
  /** The shortest lockAtMostFor the cases use. */
  readonly short: number
}

/** `lock` as an extensible lock, failing the case when it has no `extend()`. */
export function extensible(lock: SimpleLock): ExtensibleLock {
  assert.equal(
    typeof (lock as Partial<ExtensibleLock>).extend,
    'function',
    'the lock has no extend(); declare extensible: false',
  )
  return lock as ExtensibleLock
}
