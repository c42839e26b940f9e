import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { FIVE_MINUTES, fuzz, lockName, type SuiteContext } from './suite-support.ts'

/** The `concurrency` group: a same-name call left running, and ShedLock's fuzz test. */
export function concurrencyCases(suite: SuiteContext, fuzzIterations: number): void {
  const { add, node, g } = suite
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
}
