import assert from 'node:assert/strict'
import { assertSameTime, type RunLedgerSuiteContext, taskName } from './run-ledger-support.ts'

/** What the ledger keeps of a run: written in two steps (`start()`, then `finish()`) or in one (`record()`). */
export function ledgerRecordCases(suite: RunLedgerSuiteContext): void {
  const { add, ledger } = suite

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
    assertSameTime(running.slot, slot, 'slot')
    assertSameTime(running.startedAt, startedAt, 'startedAt')
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
    assertSameTime(done?.finishedAt, finishedAt, 'finishedAt')
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
    assert.equal(runs[0]!.nextFireAt, undefined, 'a run written without nextFireAt reads back with one')
    assert.equal(runs[0]!.triggeredBy, undefined, 'a scheduled run reads back as triggered')
  })

  add('nextFireAt: kept with a whole run, with a started run, and replaced by its end', async () => {
    const name = taskName()
    const at = new Date(Date.now() - 2_000)
    const first = new Date('2030-06-01T10:00:00.000Z')
    await ledger.record({
      name,
      slot: undefined,
      node: 'web-1',
      startedAt: at,
      finishedAt: at,
      outcome: 'ok',
      durationMs: 1,
      nextFireAt: first,
    })
    assertSameTime((await ledger.history(name))[0]?.nextFireAt, first, 'nextFireAt of record()')
    const run = await ledger.start({ name, slot: undefined, node: 'web-1', startedAt: new Date(), nextFireAt: first })
    assertSameTime((await ledger.history(name))[0]?.nextFireAt, first, 'nextFireAt of start()')
    const later = new Date('2030-06-01T10:05:00.000Z')
    await run.finish({ finishedAt: new Date(), outcome: 'ok', durationMs: 2, nextFireAt: later })
    const [done] = await ledger.history(name)
    assert.equal(done?.id, run.id)
    assertSameTime(done?.nextFireAt, later, 'nextFireAt after finish()')
    assertSameTime((await ledger.health(name)).lastRun?.nextFireAt, later, "health()'s lastRun.nextFireAt")
  })

  add('triggeredBy: a manual run keeps who triggered it, through record() and start()/finish()', async () => {
    const name = taskName()
    const at = new Date(Date.now() - 2_000)
    const whole = { name, slot: undefined, node: 'web-1', startedAt: at, finishedAt: at, outcome: 'ok' as const }
    await ledger.record({ ...whole, durationMs: 1, triggeredBy: 'alice@ops' })
    assert.equal((await ledger.history(name))[0]?.triggeredBy, 'alice@ops', 'triggeredBy of record()')
    const run = await ledger.start({ name, slot: undefined, node: 'web-1', startedAt: new Date(), triggeredBy: 'bob' })
    assert.equal((await ledger.history(name))[0]?.triggeredBy, 'bob', 'triggeredBy of start()')
    await run.finish({ finishedAt: new Date(), outcome: 'ok', durationMs: 2 })
    assert.equal((await ledger.history(name))[0]?.triggeredBy, 'bob', 'triggeredBy after finish()')
  })

  add(
    'record: runs recorded in the same turn (one write, where the ledger batches) each read back as their own',
    async () => {
      const names = [taskName(), taskName(), taskName()]
      const base = Date.now() - 10_000
      // Every write asked for before any answer: one turn of the event loop, two runs of each task.
      await Promise.all(
        names.flatMap((name, t) =>
          [0, 1].map((k) =>
            ledger.record({
              name,
              slot: new Date(Date.UTC(2026, 10, 24, t, k)),
              node: `web-${t}-${k}`,
              startedAt: new Date(base + 1_000 * k),
              finishedAt: new Date(base + 1_000 * k + 5),
              outcome: k === 0 ? 'ok' : 'failed',
              durationMs: 5 + k,
              ...(k === 1 ? { error: { type: 'Error', message: `boom ${t}` } } : {}),
            }),
          ),
        ),
      )
      for (const [t, name] of names.entries()) {
        const runs = await ledger.history(name)
        assert.deepEqual(
          runs.map((r) => [r.name, r.outcome, r.node, r.slot?.toISOString(), r.durationMs, r.error?.message]),
          [
            [name, 'failed', `web-${t}-1`, new Date(Date.UTC(2026, 10, 24, t, 1)).toISOString(), 6, `boom ${t}`],
            [name, 'ok', `web-${t}-0`, new Date(Date.UTC(2026, 10, 24, t, 0)).toISOString(), 5, undefined],
          ],
        )
        assert.notEqual(runs[0]!.id, runs[1]!.id, 'two runs with one id')
      }
    },
  )
}
