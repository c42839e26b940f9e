import { describe, expect, it } from 'vitest'
import type { RunLedger, RunOutcome } from '../../src/core/run-ledger.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/index.ts'
import { staleness } from '../../src/status/staleness.ts'
import { stateOf, statusVerdict } from '../../src/status/verdict.ts'

const HOUR = 3_600_000
const DAY = 24 * HOUR

/** A ledger with the given runs per task (outcomes oldest first, the newest `hoursAgo` old). */
async function ledgerWith(tasks: Record<string, { outcomes: RunOutcome[]; hoursAgo?: number }>): Promise<RunLedger> {
  const ledger = inMemoryRunLedger({ maxAge: '365d' })
  for (const [name, { outcomes, hoursAgo = 0 }] of Object.entries(tasks)) {
    for (const [i, outcome] of outcomes.entries()) {
      const at = new Date(Date.now() - hoursAgo * HOUR - (outcomes.length - 1 - i) * 60_000)
      const error = outcome === 'failed' ? { type: 'Error', message: `run ${i} failed` } : undefined
      await ledger.record({
        name,
        slot: undefined,
        node: 'n',
        startedAt: at,
        finishedAt: at,
        outcome: outcome as 'ok',
        durationMs: 1,
        error,
      })
    }
  }
  return ledger
}

async function verdictOf(
  ledger: RunLedger,
  stale: readonly string[],
  ignoreOlderThan = 7 * DAY,
  paused: (name: string) => boolean = () => false,
) {
  const { rows, ...rest } = await statusVerdict(ledger, await ledger.tasks(), {
    stale: staleness(stale),
    ignoreOlderThan,
    overdueGrace: 60_000,
    now: Date.now(),
    paused,
  })
  return { rows: rows.map((row) => [row.task.name, row.state, row.maxAge]), ...rest }
}

/** Records one finished run of `name`, `hoursAgo` old, whose scheduler gave `nextFireAt`. */
async function recordWithNext(
  ledger: RunLedger,
  name: string,
  hoursAgo: number,
  nextFireAt: Date | undefined,
  outcome: 'ok' | 'failed' = 'ok',
) {
  const at = new Date(Date.now() - hoursAgo * HOUR)
  await ledger.record({
    name,
    slot: undefined,
    node: 'n',
    startedAt: at,
    finishedAt: at,
    outcome,
    durationMs: 1,
    nextFireAt,
  })
}

describe('statusVerdict', () => {
  it("overdue: the latest run's next fire time passed by more than the grace; not while running, not when paused", async () => {
    const ledger = inMemoryRunLedger({ maxAge: '365d' })
    const now = Date.now()
    await recordWithNext(ledger, 'on-time', 0, new Date(now + HOUR))
    await recordWithNext(ledger, 'within-grace', 1, new Date(now - 30_000))
    await recordWithNext(ledger, 'stopped', 2, new Date(now - HOUR))
    await recordWithNext(ledger, 'stopped-failing', 2, new Date(now - HOUR), 'failed')
    await recordWithNext(ledger, 'no-schedule', 2, undefined)
    await recordWithNext(ledger, 'paused', 2, new Date(now - HOUR))
    // A weekly task's last run is older than ignoreOlderThan, but its next fire time is not.
    await recordWithNext(ledger, 'weekly', 8 * 24, new Date(now - 2 * HOUR))
    await ledger.start({
      name: 'long-run',
      slot: undefined,
      node: 'n',
      startedAt: new Date(now - 2 * HOUR),
      nextFireAt: new Date(now - HOUR),
    })
    const verdict = await verdictOf(ledger, [], 7 * DAY, (name) => name === 'paused')
    expect(verdict.rows).toEqual([
      ['long-run', 'ok', undefined],
      ['no-schedule', 'ok', undefined],
      ['on-time', 'ok', undefined],
      ['paused', 'ok', undefined],
      ['stopped', 'overdue', undefined],
      ['stopped-failing', 'overdue', undefined],
      ['weekly', 'overdue', undefined],
      ['within-grace', 'ok', undefined],
    ])
    expect(verdict.overdueNames).toEqual(['stopped', 'stopped-failing', 'weekly'])
    expect(verdict.failingNames).toEqual([])
    expect(verdict.ignored).toEqual([])
    // Stale beats overdue: what the operator asked for by name.
    const named = await verdictOf(ledger, ['stopped=1m'])
    expect(named.rows.find((row) => row[0] === 'stopped')).toEqual(['stopped', 'stale', 60_000])
    expect(named.overdueNames).toEqual([])
  })

  it('failing after a failed latest finished run, ok once a success follows; sorted by name', async () => {
    const ledger = await ledgerWith({
      healed: { outcomes: ['failed', 'ok'] },
      broken: { outcomes: ['ok', 'failed', 'skipped', 'failed'] },
    })
    expect(await verdictOf(ledger, [])).toEqual({
      rows: [
        ['broken', 'failing', undefined],
        ['healed', 'ok', undefined],
      ],
      ignored: [],
      staleNames: [],
      overdueNames: [],
      failingNames: ['broken'],
    })
  })

  it('stale beats failing; only NAME=AGE entries check only those tasks, a bare AGE checks every task', async () => {
    const ledger = await ledgerWith({
      broken: { outcomes: ['ok', 'failed'], hoursAgo: 3 },
      healed: { outcomes: ['ok'] },
    })
    expect(await verdictOf(ledger, ['healed=1h'])).toMatchObject({ staleNames: [], failingNames: [] })
    expect(await verdictOf(ledger, ['broken=2h'])).toMatchObject({
      rows: [
        ['broken', 'stale', 2 * HOUR],
        ['healed', 'ok', undefined],
      ],
      staleNames: ['broken'],
      failingNames: [],
    })
    // A NAME=AGE beats the bare AGE for its task.
    expect(await verdictOf(ledger, ['broken=1d', '1h'])).toMatchObject({
      rows: [
        ['broken', 'failing', DAY],
        ['healed', 'ok', HOUR],
      ],
      failingNames: ['broken'],
    })
  })

  it('a task not run for ignoreOlderThan is left out unless named; 0 leaves none out; a named task that never ran is stale', async () => {
    const ledger = await ledgerWith({ renamed: { outcomes: ['failed'], hoursAgo: 240 }, current: { outcomes: ['ok'] } })
    expect(await verdictOf(ledger, ['26h'])).toMatchObject({
      rows: [['current', 'ok', 26 * HOUR]],
      ignored: ['renamed'],
    })
    expect(await verdictOf(ledger, [], 0)).toMatchObject({ ignored: [], failingNames: ['renamed'] })
    expect(await verdictOf(ledger, ['renamed=26h'])).toMatchObject({ ignored: [], staleNames: ['renamed'] })
    expect(await verdictOf(ledger, ['never=1h'])).toMatchObject({
      rows: [
        ['current', 'ok', undefined],
        ['never', 'stale', HOUR],
      ],
      ignored: ['renamed'],
      staleNames: ['never'],
    })
  })
})

describe('stateOf', () => {
  it('ok for a task whose only run is still running, stale for it once a maximum age is set', async () => {
    const ledger = inMemoryRunLedger()
    await ledger.start({ name: 'job', slot: undefined, node: 'n', startedAt: new Date() })
    const health = await ledger.health('job')
    expect(stateOf(health, undefined, Date.now())).toBe('ok')
    expect(stateOf(health, DAY, Date.now())).toBe('stale')
  })
})
