import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import type { Duration } from '../core/duration.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import type { RunLedger, RunRecord } from '../core/run-ledger.ts'

/** Options of {@link runLedgerSuite}. */
export interface RunLedgerSuiteOptions {
  /** The ledger under test, over a real store; it should keep at most `keep` runs per task. */
  ledger: RunLedger
  /** The `keep` the ledger was built with (runs kept per task). */
  keep: number
  /** A lock provider, for the end-to-end case through an executor. */
  provider: () => LockProvider | Promise<LockProvider>
  /**
   * A new ledger over the same store and runs as `ledger`, with the given `maxAge`: enables the case that a task that no longer runs loses its expired runs too.
   */
  withMaxAge?: (maxAge: Duration) => RunLedger
}

/** One case of {@link runLedgerSuite}; register it as `it(c.name, c.run, c.timeoutMs)`. */
export interface RunLedgerTestCase {
  readonly name: string
  readonly timeoutMs: number
  run(): Promise<void>
}

/**
 * The contract of a `RunLedger`, as test cases against a real store: what it keeps of a run
 * (slot, node, times, outcome, duration, error, fencing token), the order it reads runs back in,
 * health, the task list, how many runs it keeps, and how an executor writes it (a short run once,
 * a long one as `running` first).
 */
export function runLedgerSuite(options: RunLedgerSuiteOptions): RunLedgerTestCase[] {
  const { ledger, keep } = options
  const cases: RunLedgerTestCase[] = []
  const add = (name: string, run: () => Promise<void>, timeoutMs = 15_000): void =>
    void cases.push({ name, timeoutMs, run })
  const close = (a: Date | undefined, b: Date, what: string): void => {
    assert.ok(a instanceof Date, `${what} is not a Date`)
    assert.ok(Math.abs(a.getTime() - b.getTime()) <= 1, `${what} ${a.toISOString()} is not ${b.toISOString()}`)
  }

  add('start and finish: a run reads back with its slot, node, times, outcome, duration and error', async () => {
    const name = taskName()
    const slot = new Date('2026-11-24T02:00:00.000Z')
    const startedAt = new Date(Date.now() - 1_000)
    const run = await ledger.start({ name, slot, node: 'web-1:42:abc', startedAt })
    const { id } = run
    const [running] = await ledger.history(name)
    assert.ok(running, 'history() does not show a started run')
    assert.equal(running.id, id)
    assert.equal(running.outcome, 'running')
    assert.equal(running.finishedAt, undefined)
    close(running.slot, slot, 'slot')
    close(running.startedAt, startedAt, 'startedAt')
    const finishedAt = new Date()
    await run.finish({
      finishedAt,
      outcome: 'failed',
      durationMs: 1_000,
      error: { type: 'TypeError', message: 'boom' },
    })
    const [done] = await ledger.history(name)
    assert.equal(done?.id, id)
    assert.equal(done?.outcome, 'failed')
    assert.equal(done?.node, 'web-1:42:abc')
    assert.equal(done?.durationMs, 1_000)
    assert.deepEqual(done?.error, { type: 'TypeError', message: 'boom' })
    close(done?.finishedAt, finishedAt, 'finishedAt')
  })

  add('record: a skipped slot in one write; no slot reads back as undefined', async () => {
    const name = taskName()
    const at = new Date()
    await ledger.record({
      name,
      slot: new Date('2026-11-24T03:00:00.000Z'),
      node: 'web-2',
      startedAt: at,
      finishedAt: at,
      outcome: 'skipped',
      durationMs: 0,
    })
    await ledger.record({
      name,
      slot: undefined,
      node: 'web-2',
      startedAt: new Date(at.getTime() + 1),
      finishedAt: at,
      outcome: 'ok',
      durationMs: 3,
    })
    const runs = await ledger.history(name)
    assert.deepEqual(
      runs.map((r) => [r.outcome, r.slot?.toISOString()]),
      [
        ['ok', undefined],
        ['skipped', '2026-11-24T03:00:00.000Z'],
      ],
    )
    assert.equal(runs[1]!.error, undefined)
  })

  add('history: newest first, limited, and only the task asked for', async () => {
    const name = taskName()
    const base = Date.now() - 10_000
    for (let i = 0; i < 5; i++)
      await ledger.record({
        name,
        slot: undefined,
        node: 'n',
        startedAt: new Date(base + i * 100),
        finishedAt: new Date(base + i * 100 + 10),
        outcome: 'ok',
        durationMs: 10,
      })
    await ledger.record({
      name: taskName(),
      slot: undefined,
      node: 'n',
      startedAt: new Date(base),
      finishedAt: new Date(base),
      outcome: 'ok',
      durationMs: 0,
    })
    const runs = await ledger.history(name, { limit: 3 })
    assert.deepEqual(
      runs.map((r) => r.startedAt.getTime()),
      [base + 400, base + 300, base + 200],
    )
    assert.equal((await ledger.history(name)).length, 5)
  })

  add('health: last run, last success, last failure, and failures since the last success', async () => {
    const name = taskName()
    const base = Date.now() - 10_000
    const outcomes = ['ok', 'failed', 'skipped', 'lock-lost', 'failed'] as const
    for (const [i, outcome] of outcomes.entries()) {
      await ledger.record({
        name,
        slot: undefined,
        node: 'n',
        startedAt: new Date(base + i * 100),
        finishedAt: new Date(base + i * 100),
        outcome,
        durationMs: 1,
      })
    }
    const health = await ledger.health(name)
    assert.equal(health.name, name)
    assert.equal(health.lastRun?.outcome, 'failed')
    assert.equal(health.lastSuccess?.startedAt.getTime(), base)
    assert.equal(health.lastFailure?.startedAt.getTime(), base + 400)
    assert.equal(health.consecutiveFailures, 3)
    const unknown = await ledger.health(taskName())
    assert.equal(unknown.lastRun, undefined)
    assert.equal(unknown.consecutiveFailures, 0)
  })

  add('tasks: every task with runs, sorted by name', async () => {
    const prefix = taskName()
    for (const suffix of ['b', 'a'])
      await ledger.record({
        name: `${prefix}-${suffix}`,
        slot: undefined,
        node: 'n',
        startedAt: new Date(),
        finishedAt: new Date(),
        outcome: 'ok',
        durationMs: 1,
      })
    const mine = (await ledger.tasks()).filter((t) => t.name.startsWith(prefix))
    assert.deepEqual(
      mine.map((t) => t.name),
      [`${prefix}-a`, `${prefix}-b`],
    )
    assert.ok(mine.every((t) => t.lastSuccess !== undefined))
  })

  add(
    'fencing token: kept by start() and finish() and by record(), read back as a bigint (beyond 2^53 too)',
    async () => {
      const name = taskName()
      const big = 2n ** 53n + 7n
      const base = Date.now() - 10_000
      const started = await ledger.start({
        name,
        slot: undefined,
        node: 'n',
        startedAt: new Date(base),
        fencingToken: big,
      })
      assert.equal((await ledger.history(name))[0]?.fencingToken, big, 'the running run lost its fencing token')
      await started.finish({ finishedAt: new Date(base + 5), outcome: 'ok', durationMs: 5 })
      const whole = (startedAt: number, fencingToken: bigint | undefined) =>
        ledger.record({
          name,
          slot: undefined,
          node: 'n',
          startedAt: new Date(startedAt),
          finishedAt: new Date(startedAt),
          outcome: 'ok',
          durationMs: 0,
          ...(fencingToken === undefined ? {} : { fencingToken }),
        })
      await whole(base + 100, 9_223_372_036_854_775_807n)
      await whole(base + 200, 1n)
      await whole(base + 300, undefined)
      const tokens = (await ledger.history(name)).map((r) => r.fencingToken)
      assert.deepEqual(tokens, [undefined, 1n, 9_223_372_036_854_775_807n, big])
      assert.equal(typeof tokens[1], 'bigint')
      assert.equal((await ledger.health(name)).lastSuccess?.fencingToken, undefined)
    },
  )

  add(
    'through an executor: a short run is written once, when it ends, with the fencing token the task saw',
    async () => {
      const name = taskName()
      const executor = createLockingTaskExecutor(await options.provider(), { runLedger: ledger })
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
    const executor = createLockingTaskExecutor(await options.provider(), {
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

  add('through an executor: each execution is one run, with its outcome', async () => {
    const name = taskName()
    const executor = createLockingTaskExecutor(await options.provider(), { runLedger: ledger })
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

  const { withMaxAge } = options
  if (withMaxAge) {
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

  return cases
}

function taskName(): string {
  return `ledger-${randomUUID()}`
}
