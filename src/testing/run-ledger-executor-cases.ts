import assert from 'node:assert/strict'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import type { RunRecord } from '../core/run-ledger.ts'
import { assertSameTime, type RunLedgerSuiteContext, taskName } from './run-ledger-support.ts'

/** When an executor writes a run: a short one once, as it ends; a long one as `running` first, then as ended. */
export function executorWriteCases(suite: RunLedgerSuiteContext): void {
  const { add, ledger, provider } = suite

  add(
    'through an executor: a short run is written once, when it ends, with the fencing token the task saw',
    async () => {
      const name = taskName()
      const executor = createLockingTaskExecutor(await provider(), { runLedger: ledger })
      let seenWhileRunning: number | undefined
      let token: bigint | undefined
      const result = await executor.executeWithLock(
        async (context) => {
          token = context.fencingToken
          // Under the executor's recordRunningAfter (1 s): the ledger has no row of it yet.
          seenWhileRunning = (await ledger.history(name)).length
        },
        { name, lockAtMostFor: '1m' },
      )
      assert.ok(result.executed)
      assert.equal(seenWhileRunning, 0, 'a run shorter than recordRunningAfter was written when it started')
      const runs = await ledger.history(name)
      assert.deepEqual(
        runs.map((r) => r.outcome),
        ['ok'],
      )
      assert.equal(runs[0]!.fencingToken, token)
    },
  )

  add('through an executor: a run longer than recordRunningAfter reads back as running, then as ended', async () => {
    const name = taskName()
    const executor = createLockingTaskExecutor(await provider(), {
      runLedger: ledger,
      recordRunningAfter: 50,
    })
    let running: RunRecord | undefined
    await executor.executeWithLock(
      async () => {
        const until = Date.now() + 5_000
        while (!running && Date.now() < until) {
          running = (await ledger.history(name)).find((r) => r.outcome === 'running')
          if (!running) await new Promise((resolve) => setTimeout(resolve, 20))
        }
      },
      { name, lockAtMostFor: '1m' },
    )
    assert.ok(running, 'no running row within 5 s of a run past recordRunningAfter (50 ms)')
    assert.equal(running.finishedAt, undefined)
    const runs = await ledger.history(name)
    assert.equal(runs.length, 1, `the run was written as ${runs.length} runs`)
    assert.equal(runs[0]!.id, running.id)
    assert.equal(runs[0]!.outcome, 'ok')
    assert.ok(runs[0]!.finishedAt && runs[0]!.durationMs !== undefined)
  })

  add('through an executor: nextFireAt is read when a run is written, at its start and again at its end', async () => {
    const name = taskName()
    const executor = createLockingTaskExecutor(await provider(), { runLedger: ledger, recordRunningAfter: 0 })
    // The scheduler's next fire time moves on while the run runs, as croner's nextRun() does.
    let next = new Date('2031-01-01T00:00:00.000Z')
    let atStart: Date | undefined
    await executor.executeWithLock(
      async () => {
        const until = Date.now() + 5_000
        while (!atStart && Date.now() < until) {
          atStart = (await ledger.history(name))[0]?.nextFireAt
          if (!atStart) await new Promise((resolve) => setTimeout(resolve, 20))
        }
        next = new Date('2031-01-01T00:01:00.000Z')
      },
      { name, lockAtMostFor: '1m', nextFireAt: () => next },
    )
    assertSameTime(atStart, new Date('2031-01-01T00:00:00.000Z'), "the running row's nextFireAt")
    const [run] = await ledger.history(name)
    assertSameTime(run?.nextFireAt, new Date('2031-01-01T00:01:00.000Z'), "the ended run's nextFireAt")
    // A later call without it: the task's next fire time is still known, and written.
    await executor.executeWithLock(() => undefined, { name, lockAtMostFor: '1m' })
    assertSameTime((await ledger.history(name))[0]?.nextFireAt, next, 'a later run of the task')
  })
}

/** What an executor writes of each execution: one run, with its outcome and error. */
export function executorOutcomeCases(suite: RunLedgerSuiteContext): void {
  const { add, ledger, provider } = suite

  add('through an executor: each execution is one run, with its outcome', async () => {
    const name = taskName()
    const executor = createLockingTaskExecutor(await provider(), { runLedger: ledger })
    await executor.executeWithLock(() => 'ok', { name, lockAtMostFor: '1m' })
    await executor
      .executeWithLock(() => Promise.reject(new RangeError('out of range')), { name, lockAtMostFor: '1m' })
      .catch(() => undefined)
    const runs = await ledger.history(name)
    assert.deepEqual(
      runs.map((r) => r.outcome),
      ['failed', 'ok'],
    )
    assert.deepEqual(runs[0]!.error, { type: 'RangeError', message: 'out of range' })
    assert.ok(runs.every((r) => r.finishedAt && r.durationMs !== undefined))
  })
}
