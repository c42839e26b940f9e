import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunningDashboard, startDashboard } from '../../src/dashboard/index.ts'
import { lockConfiguration } from '../../src/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import {
  sqliteLockInspector,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../src/providers/sqlite/index.ts'

// A task's page (`?task=NAME&store=I`) over HTTP against a SQLite store: its runs, counted,
// filtered and searched, why each skipped fire was skipped, and nothing secret.

const T0 = Date.UTC(2026, 11, 7, 8, 0, 0)
const MINUTE = 60_000

describe('dashboard task page', () => {
  let dir: string
  let db: SqliteConnection
  let dashboard: RunningDashboard
  const page = async (query: string) => {
    const response = await fetch(`${dashboard.url}${query}`)
    return { status: response.status, body: await response.text() }
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-task-page-'))
    db = (await loadSqliteDriver()).open(join(dir, 'locks.db'))
    db.exec(sqliteSchema())
    db.exec(sqliteRunsSchema())
    const ledger = sqliteRunLedger({ database: db })
    const run = (i: number, node: string, outcome: 'ok' | 'failed' | 'skipped', durationMs: number, error?: object) =>
      ledger.record({
        name: 'billing',
        slot: new Date(T0 + i * MINUTE),
        node,
        startedAt: new Date(T0 + i * MINUTE + 20),
        finishedAt: new Date(T0 + i * MINUTE + 20 + durationMs),
        outcome,
        durationMs,
        ...(error ? { error: error as never } : {}),
      })
    for (let i = 0; i < 6; i++)
      await run(i, i % 2 === 0 ? 'node-a:11:aaaaaaaaaaaa' : 'node-b:22:bbbbbbbbbbbb', 'ok', 1_000 + i * 100)
    await run(6, 'node-b:22:bbbbbbbbbbbb', 'failed', 30_000, {
      type: 'TimeoutError',
      message: 'could not reach postgres://billing:S3cretPW@db/billing in 30 s',
    })
    await run(7, 'node-c:33:cccccccccccc', 'skipped', 0, {
      type: 'LockHeld',
      message: 'the lock was held by node-a:11:aaaaaaaaaaaa',
    })
    await ledger.record({
      name: 'other',
      slot: undefined,
      node: 'node-a:11:aaaaaaaaaaaa',
      startedAt: new Date(T0),
      finishedAt: new Date(T0 + 5),
      outcome: 'ok',
      durationMs: 5,
    })
    // Its schedule stopped: the next fire time its last run recorded passed hours ago.
    await ledger.record({
      name: 'stopped',
      slot: undefined,
      node: 'node-a:11:aaaaaaaaaaaa',
      startedAt: new Date(T0),
      finishedAt: new Date(T0 + 5),
      outcome: 'ok',
      durationMs: 5,
      nextFireAt: new Date(T0 + 10 * MINUTE),
    })
    await (await sqliteLockProvider({ database: db, lockedBy: 'node-a' }).lock(
      lockConfiguration({ name: 'billing', lockAtMostFor: '1m' }),
    ))!.unlock()
    dashboard = await startDashboard({
      stores: [{ label: 'billing db', inspector: sqliteLockInspector({ database: db }), runLedger: ledger }],
      port: 0,
      refreshSeconds: 0,
      ignoreOlderThan: 0,
      audit: () => undefined,
    })
  })

  afterAll(async () => {
    await dashboard?.close()
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('is linked from the main page, and lists the task’s runs with counts, durations and why a fire was skipped', async () => {
    expect((await page('')).body).toContain('href="?task=billing&amp;store=0"')
    const { status, body } = await page('?task=billing&store=0')
    expect(status).toBe(200)
    expect(body).toContain('Task “billing”')
    expect(body).toMatch(/The latest 8 runs: .*6 ok.*1 failed.*1 skipped/)
    expect(body.match(/<tr data-outcome=/g)).toHaveLength(8)
    expect(body).toContain('skipped: the lock was held by node-a:11:aaaaaaaaaaaa')
    expect(body).toContain('Durations of the latest 8 runs: median 1.3 s, longest 30.0 s')
    expect(body).not.toContain('S3cretPW')
    expect(body).toContain('postgres://billing:***@db/billing')
    expect(body, 'another task’s runs').not.toContain('5 ms')
  })

  it('flags a task whose schedule stopped as OVERDUE with the fire time it missed; its page says when it was due', async () => {
    const main = (await page('')).body
    expect(main).toMatch(
      /data-task="stopped" data-state="overdue">[\s\S]*?OVERDUE<\/span> <span class="muted">\(due <time[^>]*>2026-12-07 08:10:00/,
    )
    expect(main).toMatch(/tasks?: 0 stale, 1 overdue, 1 failing/)
    expect((await page('?task=stopped&store=0')).body).toMatch(
      /<p id="next-fire">Next fire: <time[^>]*>2026-12-07 08:10:00/,
    )
    expect((await page('?task=billing&store=0')).body).not.toContain('id="next-fire"')
  })

  it('filters by outcome and node, and searches slots, nodes and errors', async () => {
    const rows = async (query: string) => ((await page(query)).body.match(/<tr data-outcome="(\w+)"/g) ?? []).length
    expect(await rows('?task=billing&store=0&outcome=failed')).toBe(1)
    expect(await rows('?task=billing&store=0&node=node-a%3A11%3Aaaaaaaaaaaaa')).toBe(3)
    expect(await rows('?task=billing&store=0&text=timeout')).toBe(1)
    expect(await rows('?task=billing&store=0&text=2026-12-07T08%3A03')).toBe(1)
    expect(await rows('?task=billing&store=0&text=held+by')).toBe(1)
    expect(await rows('?task=billing&store=0&outcome=ok&text=nothing-like-this')).toBe(0)
    expect((await page('?task=billing&store=0&outcome=failed')).body).toContain('(1 of 8, filtered)')
  })

  it('serves its main fragment for the live refresh, 404 for a store it has not, and a task without runs plainly', async () => {
    const fragment = await page('?task=billing&store=0&fragment=main')
    expect(fragment.body.startsWith('<p><a href=')).toBe(true)
    expect(fragment.body).not.toContain('<html')
    expect((await page('?task=billing&store=7')).status).toBe(404)
    const none = await page('?task=never-ran&store=0')
    expect(none.body).toContain('No runs recorded.')
    expect(none.body).toContain('no record')
  })
})
