import assert from 'node:assert/strict'
import type { Duration } from '../core/duration.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import { type RunLedgerSuiteContext, taskName } from './run-ledger-support.ts'

/** The ledger keeps the newest `keep` runs of a task and drops the older ones. */
export function keepCases(suite: RunLedgerSuiteContext): void {
  const { add, ledger, keep } = suite

  add(`keeps at most ${keep} runs per task`, async () => {
    const name = taskName()
    const base = Date.now() - 60_000
    for (let i = 0; i < keep + 3; i++) {
      await ledger.record({
        name,
        slot: undefined,
        node: 'n',
        startedAt: new Date(base + i * 10),
        finishedAt: new Date(base + i * 10),
        outcome: 'ok',
        durationMs: 1,
      })
    }
    const kept = await ledger.history(name, { limit: keep + 10 })
    assert.equal(kept.length, keep, `kept ${kept.length} runs`)
    assert.equal(kept[0]!.startedAt.getTime(), base + (keep + 2) * 10, 'the newest run is missing')
    assert.equal(kept.at(-1)!.startedAt.getTime(), base + 3 * 10, 'not the newest runs were kept')
  })
}

/** `maxAge` drops expired runs of every task, not only of the task being written; `withMaxAge` makes the ledgers. */
export function maxAgeCases(suite: RunLedgerSuiteContext, withMaxAge: (maxAge: Duration) => RunLedger): void {
  const { add } = suite

  add(
    'maxAge reaches every task: a task that no longer runs loses its expired runs once another task writes',
    async () => {
      const [gone, active] = [taskName(), taskName()]
      const day = 86_400_000
      const longAgo = new Date(Date.now() - 40 * day)
      // Written while the age limit was a year: the task then stopped running (renamed, removed).
      await withMaxAge('365d').record({
        name: gone,
        slot: undefined,
        node: 'n',
        startedAt: longAgo,
        finishedAt: longAgo,
        outcome: 'failed',
        durationMs: 1,
      })
      const ledger30 = withMaxAge('30d')
      assert.equal((await withMaxAge('365d').history(gone)).length, 1, 'the old run was not written')
      await ledger30.record({
        name: active,
        slot: undefined,
        node: 'n',
        startedAt: new Date(),
        finishedAt: new Date(),
        outcome: 'ok',
        durationMs: 1,
      })
      assert.deepEqual(
        await ledger30.history(gone),
        [],
        'the expired run of a task that no longer runs is still read back',
      )
      const names = (await ledger30.tasks()).map((t) => t.name)
      assert.ok(!names.includes(gone), 'tasks() still lists a task whose runs all expired')
      assert.ok(names.includes(active))
    },
  )
}
