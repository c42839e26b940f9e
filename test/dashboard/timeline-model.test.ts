import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunningDashboard, startDashboard } from '../../src/dashboard/index.ts'
import { fittedWindowMs } from '../../src/dashboard/window.ts'
import type { RunLedger, RunRecord } from '../../src/core/run-ledger.ts'
import { createLockingTaskExecutor, type LockingTaskExecutor } from '../../src/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import {
  sqliteLockInspector,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../src/providers/sqlite/index.ts'

// What the timeline and the tasks table say of a store that real executors wrote (SQLite, over
// HTTP): slots folded by a 'once' catch-up, a slot skipped while another node's run held the lock,
// a released lock, lanes across process restarts, and the window fitted to the tasks' period.

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

interface Store {
  db: SqliteConnection
  ledger: RunLedger
  executor(node: string): LockingTaskExecutor
  dashboard(options?: Partial<Parameters<typeof startDashboard>[0]>): Promise<RunningDashboard>
}

const dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-model-'))
const cleanups: (() => unknown)[] = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
  rmSync(dir, { recursive: true, force: true })
})

async function store(name: string): Promise<Store> {
  const db = (await loadSqliteDriver()).open(join(dir, `${name}.db`))
  db.exec(sqliteSchema())
  db.exec(sqliteRunsSchema())
  const ledger = sqliteRunLedger({ database: db })
  cleanups.push(() => db.close())
  return {
    db,
    ledger,
    executor: (node) => {
      const executor = createLockingTaskExecutor(sqliteLockProvider({ database: db, lockedBy: node }), {
        runLedger: ledger,
        recordRunningAfter: 0,
      })
      cleanups.push(() => executor.close())
      return executor
    },
    dashboard: async (options = {}) => {
      const running = await startDashboard({
        stores: [{ label: name, inspector: sqliteLockInspector({ database: db }), runLedger: ledger }],
        port: 0,
        refreshSeconds: 0,
        ...options,
      })
      cleanups.push(() => running.close())
      return running
    },
  }
}

async function page(dashboard: RunningDashboard, path = ''): Promise<string> {
  const response = await fetch(`${dashboard.url}${path}`)
  expect(response.status).toBe(200)
  return response.text()
}

/** The marks of `task`'s timeline: kind, run id, lane and tooltip (entities decoded). */
function marksOf(html: string, task: string): { kind: string; run: string; lane: string; title: string }[] {
  const svg = new RegExp(`<svg class="timeline"[^>]*data-task="${task}"[^>]*>([\\s\\S]*?)</svg>(?=</figure>)`).exec(
    html,
  )
  expect(svg, `timeline of ${task}`).not.toBeNull()
  return [
    ...svg![1]!.matchAll(
      /<g class="mark" data-kind="([\w-]+)" data-run="([^"]+)" data-lane="([^"]*)"[^>]*>[\s\S]*?<title>([\s\S]*?)<\/title><\/g>/g,
    ),
  ].map(([, kind, run, lane, title]) => ({ kind: kind!, run: run!, lane: decode(lane!), title: decode(title!) }))
}

function decode(text: string): string {
  return text
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
}

/** The text of the tasks table's row of `task`, tags dropped. */
function taskRow(html: string, task: string): string {
  const row = new RegExp(`<tr class="task[^"]*" data-task="${task}"[\\s\\S]*?</tr>`).exec(html)
  expect(row, `row of ${task}`).not.toBeNull()
  return decode(row![0].replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' '))
}

describe('the timeline and the tasks table say what the ledger knows', () => {
  let dashboard: RunningDashboard
  let folded: RunRecord[]
  let skipped: RunRecord

  beforeAll(async () => {
    const s = await store('wording')
    const nodeA = s.executor('node-a')
    const nodeC = s.executor('node-c')
    // fold: its slot 40 s ago ran; a catch-up (policy 'once') then finds 3 fire times missed since,
    // runs the latest and folds the 2 others, less than a minute after their fire times.
    const s0 = Math.floor(Date.now() / SECOND) * SECOND - 40 * SECOND
    expect(
      (await nodeA.executeWithLock(() => undefined, { name: 'fold', lockAtMostFor: '1m', slot: new Date(s0) }))
        .executed,
    ).toBe(true)
    const fires = [10, 20, 30].map((s) => new Date(s0 + s * SECOND))
    const caught = await nodeA.catchUp(
      () => undefined,
      { name: 'fold', lockAtMostFor: '1m' },
      {
        policy: 'once',
        within: '1h',
        fireTimes: function* (from, to) {
          for (const fire of fires) if (fire >= from && fire <= to) yield fire
        },
      },
    )
    expect(caught.ran).toEqual([fires[2]])
    folded = (await s.ledger.history('fold')).filter((run) => run.outcome === 'skipped')
    expect(folded.map((run) => run.slot?.getTime()).sort()).toEqual([fires[0]!.getTime(), fires[1]!.getTime()])
    for (const run of folded) expect(run.startedAt.getTime() - run.slot!.getTime()).toBeLessThan(MINUTE)

    // report: node-a's run of one slot holds the lock while node-c's next slot is skipped.
    let finish: () => void = () => undefined
    const holding = new Promise<void>((resolve) => (finish = resolve))
    let started: () => void = () => undefined
    const running = new Promise<void>((resolve) => (started = resolve))
    const slot = Math.floor(Date.now() / SECOND) * SECOND
    const held = nodeA.executeWithLock(
      async () => {
        started()
        await holding
      },
      { name: 'report', lockAtMostFor: '10m', slot: new Date(slot) },
    )
    await running
    const skip = await nodeC.executeWithLock(() => undefined, {
      name: 'report',
      lockAtMostFor: '10m',
      slot: new Date(slot + SECOND),
      overlap: 'skip',
    })
    expect(skip.executed).toBe(false)
    skipped = (await s.ledger.history('report')).find((run) => run.outcome === 'skipped')!
    cleanups.push(async () => {
      finish()
      await held
    })
    dashboard = await s.dashboard()
  })

  it("labels slots folded by a 'once' catch-up as folded, never as skipped because the lock was held", async () => {
    const marks = marksOf(await page(dashboard), 'fold')
    for (const run of folded) {
      const mark = marks.find((m) => m.run === run.id)
      expect(mark?.kind, run.id).toBe('missed')
      expect(mark?.title).toContain("the 'once' policy folded it into the run of slot")
      expect(mark?.title).not.toMatch(/lock was held/)
    }
  })

  it('says which run held the lock of a skipped slot, in its tooltip and in the tasks table', async () => {
    const html = await page(dashboard)
    const mark = marksOf(html, 'report').find((m) => m.run === skipped.id)
    expect(mark?.kind).toBe('skipped')
    expect(mark?.title).toMatch(/skipped: the lock was held by node-a:\d+:[0-9a-f]{12}'s run of slot \S+ \S+Z/)
    expect(taskRow(html, 'report')).toMatch(/skipped .* on node-c:\S+ skipped: the lock was held by node-a:/)
  })

  it('shows a lock no longer held as free since it was released or expired', async () => {
    const row = taskRow(await page(dashboard), 'fold')
    expect(row).toMatch(/free since \S+ \S+Z/)
    expect(row).not.toMatch(/until/)
  })
})

describe('lanes: one per node that survives restarts', () => {
  it('groups the runs of every process of a host on its lane, and a configured name on its own', async () => {
    const s = await store('lanes')
    const now = Date.now()
    const record = (node: string, minutesAgo: number) =>
      s.ledger.record({
        name: 'sync',
        slot: undefined,
        node,
        startedAt: new Date(now - minutesAgo * MINUTE),
        finishedAt: new Date(now - minutesAgo * MINUTE + SECOND),
        outcome: 'ok',
        durationMs: SECOND,
      })
    // Three replicas, each restarted: a provider's owners (<lockedBy>:<pid>:<hex>), the executor's
    // default node (<host>:<pid>), and one replica given a stable name.
    for (const [node, ago] of [
      ['web-1:101:0123456789ab', 50],
      ['web-1:202:0123456789ac', 40],
      ['web-1:303', 30],
      ['web-2:404:0123456789ad', 45],
      ['web-2:505:0123456789ae', 25],
      ['worker-a', 20],
      ['worker-a', 10],
    ] as const)
      await record(node, ago)
    await s.executor('web-2').executeWithLock(() => undefined, { name: 'sync', lockAtMostFor: '1m' })
    const marks = marksOf(await page(await s.dashboard()), 'sync')
    expect(marks).toHaveLength(8)
    expect([...new Set(marks.map((m) => m.lane))].sort()).toEqual(['web-1', 'web-2', 'worker-a'])
    expect(marks.find((m) => m.title.includes('web-1:303'))?.lane).toBe('web-1')
  })
})

describe('the window fits the tasks observed period by default', () => {
  it('shows about the last 40 runs of the busiest task; ?window= and the window option override it', async () => {
    const s = await store('window')
    const now = Date.now()
    // busy: every 2 minutes for 3 hours (90 runs); nightly: once, 20 hours ago.
    for (let i = 0; i < 90; i++) {
      const startedAt = new Date(now - i * 2 * MINUTE - 30 * SECOND)
      await s.ledger.record({
        name: 'busy',
        slot: undefined,
        node: 'web-1:101:0123456789ab',
        startedAt,
        finishedAt: new Date(startedAt.getTime() + SECOND),
        outcome: 'ok',
        durationMs: SECOND,
      })
    }
    await s.ledger.record({
      name: 'nightly',
      slot: undefined,
      node: 'web-1:101:0123456789ab',
      startedAt: new Date(now - 20 * HOUR),
      finishedAt: new Date(now - 20 * HOUR + SECOND),
      outcome: 'ok',
      durationMs: SECOND,
    })
    const auto = await s.dashboard()
    const html = await page(auto)
    // 40 runs 2 minutes apart: 80 minutes back, rounded up to 10 minutes.
    expect(html).toContain('Timeline, last 1 h 20 min')
    expect(html).toContain('<strong aria-current="page">auto (1 h 20 min)</strong>')
    const shown = marksOf(html, 'busy').length
    expect(shown).toBeGreaterThanOrEqual(30)
    expect(shown).toBeLessThanOrEqual(50)
    expect(marksOf(await page(auto, '?window=day'), 'busy')).toHaveLength(90)
    expect(marksOf(await page(auto, '?window=day'), 'nightly')).toHaveLength(1)
    const fixed = await s.dashboard({ window: 'day' })
    expect(await page(fixed)).toContain('Timeline, last 1 day')
    expect(marksOf(await page(fixed, '?window=auto'), 'busy').length).toBeLessThanOrEqual(50)
  })

  it('stays between 1 hour and 1 day, and is a day when no task ran twice', () => {
    const now = new Date('2026-12-07T12:00:00Z')
    const every = (periodMs: number, count: number) => ({
      runs: Array.from(
        { length: count },
        (_, i) => ({ startedAt: new Date(now.getTime() - i * periodMs) }) as RunRecord,
      ),
    })
    const fitted = (...tasks: ReturnType<typeof every>[]) => fittedWindowMs([{ now, tasks }])
    expect(fitted(every(MINUTE, 500))).toBe(HOUR)
    expect(fitted(every(5 * MINUTE, 200))).toBe(200 * MINUTE)
    expect(fitted(every(HOUR, 24))).toBe(24 * HOUR)
    expect(fitted(every(5 * MINUTE, 200), every(MINUTE, 3))).toBe(HOUR)
    expect(fitted(every(HOUR, 1))).toBe(24 * HOUR)
    expect(fittedWindowMs([{ now, tasks: undefined }])).toBe(24 * HOUR)
  })
})
