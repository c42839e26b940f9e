import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ExtensibleLock, LockProvider, SimpleLock } from '../core/lock-provider.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { FIVE_MINUTES, mustLock, suiteConfiguration } from './suite-support.ts'

/** How the `fencing` group registers a case (the suite's own `add`). */
export type AddFencingCase = (
  group: 'fencing',
  what: string,
  timeoutMs: number,
  run: () => Promise<void>,
  skip?: string,
) => void

/** What the `fencing` group needs of the suite's options. */
export interface FencingCaseOptions {
  readonly fencing: boolean | undefined
  readonly extensible: boolean
  readonly timeGranularityMs: number
  readonly expiryLagMs: number
}

/**
 * The `fencing` group: the token contract of docs/fencing.md. With `fencing: true`, every
 * acquisition carries a `bigint` greater than every token handed out before for that name, from
 * any node, across releases, expiries and takeovers, and an extension keeps it; the executor hands
 * it to the task. With `fencing: false`, locks carry none.
 */
export function fencingCases(
  options: FencingCaseOptions,
  add: AddFencingCase,
  node: () => Promise<LockProvider>,
): void {
  const g = Math.max(1, options.timeGranularityMs)
  const short = Math.max(200, g)
  const lag = Math.max(0, options.expiryLagMs)
  const declared = options.fencing === true
  const noTokens = declared ? undefined : 'the provider is declared without fencing tokens'
  const config = suiteConfiguration
  const tokenOf = (lock: SimpleLock, what: string): bigint => {
    assert.equal(typeof lock.fencingToken, 'bigint', `${what}: the lock has no bigint fencingToken`)
    return lock.fencingToken!
  }
  const increasing = (tokens: readonly bigint[], what: string): void => {
    for (let i = 1; i < tokens.length; i++) {
      assert.ok(
        tokens[i]! > tokens[i - 1]!,
        `${what}: token ${i} (${tokens[i]}) is not greater than token ${i - 1} (${tokens[i - 1]}); all: ${tokens.join(', ')}`,
      )
    }
  }

  add('fencing', 'the declared fencing tokens match the locks', 10_000, async () => {
    const lock = await mustLock(await node(), config(fencingName()))
    const has = lock.fencingToken !== undefined
    await lock.unlock()
    assert.equal(
      has,
      declared,
      `declared fencing: ${declared}, but the lock ${has ? `has fencingToken ${String(lock.fencingToken)}` : 'has none'}`,
    )
    if (has) assert.equal(typeof lock.fencingToken, 'bigint', 'fencingToken is not a bigint')
  })

  add(
    'fencing',
    'tokens increase across unlock and relock, from the same and from other nodes',
    20_000,
    async () => {
      const name = fencingName()
      const nodes = [await node(), await node(), await node()]
      const tokens: bigint[] = []
      for (let i = 0; i < 12; i++) {
        const lock = await mustLock(nodes[i % 3]!, config(name))
        tokens.push(tokenOf(lock, `acquisition ${i}`))
        await lock.unlock()
      }
      increasing(tokens, 'relocks')
    },
    noTokens,
  )

  add(
    'fencing',
    'a takeover of an expired lock gets a greater token than the dead holder had',
    4 * short + 2 * lag + 10_000,
    async () => {
      const name = fencingName()
      const dead = await mustLock(await node(), config(name, short))
      await sleep(2 * short + 50 + lag)
      const next = await mustLock(await node(), config(name))
      increasing([tokenOf(dead, 'the dead holder'), tokenOf(next, 'the takeover')], 'takeover')
      await next.unlock()
    },
    noTokens,
  )

  add(
    'fencing',
    'an extension keeps the token, and the next acquisition gets a greater one',
    10_000,
    async () => {
      const name = fencingName()
      const provider = await node()
      const lock = (await mustLock(provider, config(name))) as ExtensibleLock
      const first = tokenOf(lock, 'the acquisition')
      const extended = await lock.extend(FIVE_MINUTES, 0)
      assert.ok(extended, 'the extension failed')
      assert.equal(extended.fencingToken, first, 'the extension changed the token: it is the same acquisition')
      await extended.unlock()
      const next = await mustLock(provider, config(name))
      increasing([first, tokenOf(next, 'the next acquisition')], 'after an extension')
      await next.unlock()
    },
    noTokens ?? (options.extensible ? undefined : 'the provider is declared not extensible'),
  )

  add(
    'fencing',
    'racing nodes get strictly increasing tokens in the order they held the lock',
    60_000,
    async () => {
      const name = fencingName()
      const nodes = [await node(), await node(), await node(), await node()]
      // Pushed while the lock is held: holding is exclusive, so the order of pushes is the order of holders.
      const tokens: bigint[] = []
      const racer = async (provider: LockProvider): Promise<void> => {
        for (let won = 0; won < 5; ) {
          const lock = await provider.lock(config(name))
          if (!lock) {
            await sleep(Math.random() * 5)
            continue
          }
          tokens.push(tokenOf(lock, 'a racer'))
          won++
          await lock.unlock()
        }
      }
      await Promise.all(nodes.map(racer))
      assert.equal(tokens.length, 20)
      increasing(tokens, 'racing nodes')
    },
    noTokens,
  )

  add(
    'fencing',
    "the executor hands the lock's token to the task",
    10_000,
    async () => {
      const name = fencingName()
      const executors = [createLockingTaskExecutor(await node()), createLockingTaskExecutor(await node())]
      const seen: bigint[] = []
      for (const executor of [...executors, ...executors]) {
        const result = await executor.executeWithLock(({ fencingToken }) => fencingToken, {
          name,
          lockAtMostFor: FIVE_MINUTES,
        })
        assert.ok(result.executed, 'the task did not run')
        assert.equal(typeof result.result, 'bigint', 'the task context has no bigint fencingToken')
        seen.push(result.result!)
      }
      increasing(seen, 'runs through executors')
    },
    noTokens,
  )
}

function fencingName(): string {
  return `suite-fence-${randomUUID()}`
}
