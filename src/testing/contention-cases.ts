import assert from 'node:assert/strict'
import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import type { LockProvider, SimpleLock } from '../core/lock-provider.ts'
import {
  extensible,
  FIVE_MINUTES,
  lockName,
  mustLock,
  type SuiteContext,
  suiteConfiguration as config,
} from './suite-support.ts'

/**
 * The `contention` group: many calls at once on one name, where stores meet write conflicts,
 * deadlocks and serialization failures. Exactly one wins each race, whether the record is new,
 * released or expired, and no call rejects: a lost race is "not acquired", never an error.
 * `contenders` calls race at once over two nodes; `rounds` is the races of the first case and the
 * acquisitions of the second.
 */
export function contentionCases(
  suite: SuiteContext,
  declaredExtensible: boolean,
  contenders: number,
  rounds: number,
): void {
  const { add, node, waitForExpiry, short } = suite
  const budget = 10_000 + rounds * 2_000

  /** Races `contenders` calls for `name` and returns the one winner. */
  const race = async (
    nodes: LockProvider[],
    name: string,
    lockAtMostFor: number,
    round: string,
  ): Promise<SimpleLock> => {
    const results = await Promise.allSettled(
      Array.from({ length: contenders }, (_, i) => nodes[i % nodes.length]!.lock(config(name, lockAtMostFor))),
    )
    const rejected = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []))
    assert.deepEqual(rejected, [], `${round}: ${rejected.length} of ${contenders} contenders rejected`)
    const winners = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []))
    assert.equal(winners.length, 1, `${round}: ${winners.length} of ${contenders} contenders got the lock`)
    return winners[0]!
  }

  add(
    'contention',
    'contenders racing on two nodes: exactly one wins each round, on a new, a released and an expired lock, and none rejects',
    budget + 4 * short,
    async () => {
      const nodes = [await node(), await node()]
      let name = lockName()
      for (let round = 0; round < rounds; round++) {
        // Even rounds on a new name (no record yet), odd ones on the name just released.
        if (round % 2 === 0) name = lockName()
        const winner = await race(nodes, name, FIVE_MINUTES, `round ${round} (${round % 2 === 0 ? 'new' : 'released'})`)
        await winner.unlock()
      }
      // A holder that never releases: its lock is raced for once it expired. (Taken alone, not
      // raced: a contender slower than `short` would find it expired and rightly win too.)
      await mustLock(nodes[0]!, config(name, short))
      await waitForExpiry(2 * short + 50)
      await (await race(nodes, name, FIVE_MINUTES, `round ${rounds} (expired)`)).unlock()
    },
  )

  add(
    'contention',
    'holders extend and release while the other contenders keep racing for their lock: never two holders, and none rejects',
    budget,
    async () => {
      const nodes = [await node(), await node()]
      const name = lockName()
      const failures: string[] = []
      let holders = 0
      let overlaps = 0
      let wins = 0
      const deadline = Date.now() + budget - 5_000
      const contender = async (provider: LockProvider): Promise<void> => {
        // A failure ends every contender's loop: a lock its holder could not extend stays held.
        while (wins < rounds && failures.length === 0 && Date.now() < deadline) {
          try {
            const lock = await provider.lock(config(name))
            // An in-memory provider answers without I/O; let the holder's calls run between attempts.
            if (!lock) {
              await yieldToEventLoop()
              continue
            }
            wins++
            if (holders++ > 0) overlaps++
            const extended = await extensible(lock)
              .extend(FIVE_MINUTES, 0)
              .finally(() => holders--)
            if (!extended) failures.push('a held lock was not extended')
            await extended?.unlock()
          } catch (error) {
            failures.push(String(error))
          }
        }
      }
      await Promise.all(Array.from({ length: contenders }, (_, i) => contender(nodes[i % 2]!)))
      assert.equal(overlaps, 0, `${overlaps} times a contender got the lock while another held it`)
      assert.deepEqual([...new Set(failures)], [], `${failures.length} calls failed`)
      assert.ok(wins >= rounds, `${wins} of ${rounds} acquisitions in ${budget - 5_000} ms`)
    },
    declaredExtensible ? undefined : 'the provider is declared not extensible',
  )
}
