import assert from 'node:assert/strict'
import { type RunLedgerSuiteContext, taskName } from './run-ledger-support.ts'

/** What the ledger reads back: history in order and limited, health, the task list, fencing tokens as bigints. */
export function ledgerReadCases(suite: RunLedgerSuiteContext): void {
  const { add, ledger } = suite

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
}

/** A run left `running` by a node that died reads as abandoned, and counts as a failure (issue 41). */
export function ledgerAbandonedCases(suite: RunLedgerSuiteContext): void {
  const { add, ledger } = suite

  add(
    'a run left running by a node that died reads as abandoned once a later run started, and counts as a failure',
    async () => {
      const name = taskName()
      const base = Date.now() - 10_000
      // Its node died after writing its start: no end is ever written.
      await ledger.start({ name, slot: undefined, node: 'dead', startedAt: new Date(base) })
      await ledger.record({
        name,
        slot: undefined,
        node: 'alive',
        startedAt: new Date(base + 1_000),
        finishedAt: new Date(base + 1_100),
        outcome: 'ok',
        durationMs: 100,
      })
      const [later, ghost] = await ledger.history(name)
      assert.equal(later?.outcome, 'ok')
      assert.equal(ghost?.outcome, 'abandoned', 'a run left running reads as running for good')
      assert.equal(ghost?.node, 'dead')
      await ledger.start({ name, slot: undefined, node: 'dead-too', startedAt: new Date(base + 2_000) })
      await ledger.record({
        name,
        slot: undefined,
        node: 'alive',
        startedAt: new Date(base + 3_000),
        finishedAt: new Date(base + 3_000),
        outcome: 'failed',
        durationMs: 1,
      })
      const health = await ledger.health(name)
      assert.equal(health.consecutiveFailures, 2, 'an abandoned run is a failure')
      assert.equal(health.lastSuccess?.startedAt.getTime(), base + 1_000)
      const listed = (await ledger.tasks()).find((task) => task.name === name)
      assert.equal(listed?.consecutiveFailures, 2)
    },
  )
}
