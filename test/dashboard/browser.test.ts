import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { markOf } from '../../src/dashboard/timeline.ts'
import { parseOwedRecordName, parseSlotRecordName } from '../../src/core/slots.ts'
import { cli, startCli, type StartedCli } from '../cli/support/cli.ts'
import { waitFor } from '../helpers/processes.ts'
import { createLockingTaskExecutor } from '../../src/index.ts'
import { loadSqliteDriver } from '../../src/providers/sqlite/driver.ts'
import { sqliteLockProvider, sqliteRunLedger } from '../../src/providers/sqlite/index.ts'
import { SECRET, type SeededStore, seedMain, seedSecond } from './support/seed.ts'

// The dashboard as a user starts it (`shedlock dashboard --url ... --url ...`, the built bin),
// against two SQLite stores that real executors wrote, driven in Debian's chromium through
// playwright-core. Each page's screenshot goes to test-results/dashboard/ (a CI artefact), and
// to docs/images/ with SHEDLOCK_UPDATE_SCREENSHOTS=1.

// What the page functions below read in the browser (the tests compile without the DOM library).
declare const document: { activeElement: { id: string; textContent: string | null } | null }

const CHROMIUM =
  process.env.SHEDLOCK_CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path))
const ARTEFACTS = fileURLToPath(new URL('../../test-results/dashboard/', import.meta.url))
const DOCS_IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url))
const required = process.env.CI === 'true'

if (!CHROMIUM) {
  if (required)
    throw new Error('chromium is missing: bash scripts/services.sh chromium installs it (Debian package chromium)')
  console.warn('dashboard browser tests skipped: no chromium (bash scripts/services.sh chromium installs it)')
}

describe.skipIf(!CHROMIUM)('shedlock dashboard in a browser', () => {
  let dir: string
  let main: SeededStore
  let second: SeededStore
  let server: StartedCli
  let url: string
  let browser: Browser
  const consoleErrors: string[] = []

  async function openPage(path = '', options: { javaScriptEnabled?: boolean; width?: number } = {}): Promise<Page> {
    const context = await browser.newContext({
      viewport: { width: options.width ?? 1280, height: 900 },
      javaScriptEnabled: options.javaScriptEnabled ?? true,
      timezoneId: 'Europe/Paris',
    })
    const page = await context.newPage()
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text())
    })
    page.on('pageerror', (error) => consoleErrors.push(error.message))
    await page.goto(`${url}${path}`)
    return page
  }

  async function screenshot(page: Page, name: string): Promise<void> {
    mkdirSync(ARTEFACTS, { recursive: true })
    await page.screenshot({ path: join(ARTEFACTS, `${name}.png`), fullPage: true })
    // docs/ ships in the package: only the pages docs/dashboard.md shows.
    if (process.env.SHEDLOCK_UPDATE_SCREENSHOTS === '1' && (name === 'dashboard' || name === 'dashboard-release')) {
      mkdirSync(DOCS_IMAGES, { recursive: true })
      await page.screenshot({ path: join(DOCS_IMAGES, `${name}.png`), fullPage: true })
    }
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-'))
    main = await seedMain(join(dir, 'locks.db'))
    second = await seedSecond(join(dir, 'second.db'))
    server = startCli(
      [
        'dashboard',
        '--url',
        `sqlite:${main.file}`,
        '--url',
        `sqlite:${second.file}`,
        '--port',
        '0',
        '--stale',
        '26h',
        '--allow-release',
        '--allow-pause',
        '--allow-trigger',
        '--refresh',
        '0',
      ],
      { cwd: dir },
    )
    const started = await waitFor(() => /on (http:\/\/\S+\/) /.test(server.stdout()), 15_000)
    expect(started, `${server.stdout()}${server.stderr()}`).toBe(true)
    url = /on (http:\/\/\S+\/) /.exec(server.stdout())![1]!
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    server?.child.kill('SIGTERM')
    await server?.exited
    await main?.stop()
    await second?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('shows every task with its state, lock, last run and failure, stale and failing flagged', async () => {
    const page = await openPage()
    await screenshot(page, 'dashboard')
    const html = await page.content()
    expect(html).not.toContain(SECRET)
    expect(await page.locator('h2').allTextContents()).toEqual([
      expect.stringContaining('locks.db'),
      expect.stringContaining('second.db'),
    ])
    const state = async (task: string) =>
      page.locator(`tr.task[data-task="${task}"]`).first().getAttribute('data-state')
    expect(await state('nightly-export')).toBe('stale')
    expect(await state('billing')).toBe('failing')
    expect(await state('sync')).toBe('failing')
    expect(await state('report')).toBe('ok')
    expect(await state('cleanup')).toBe('ok')
    expect(await state('mailer')).toBe('ok')
    const billing = await page.locator('tr.task[data-task="billing"]').innerText()
    expect(billing).toContain('Error: could not connect to postgres://billing:***@db.internal/billing')
    const report = await page.locator('tr.task[data-task="report"]').innerText()
    expect(report).toMatch(/held\s+by node-a:\d+:[0-9a-f]{12}/)
    // Its last run is the slot node-c skipped while node-a's run holds the lock.
    expect(report).toMatch(/skipped \S+ \S+Z\s+on node-c:/)
    expect(await page.locator('tr.task[data-task="nightly-export"]').innerText()).toContain('STALE')
    expect(await page.locator('#summary').innerText()).toBe('2 stores, 6 tasks: 1 stale, 2 failing; 2 locks held')
  })

  it('draws one lane per node and one mark per ledger entry of the window, of the kind the ledger says', async () => {
    const page = await openPage('?window=day')
    for (const [store, task] of [
      [main, 'report'],
      [main, 'cleanup'],
      [main, 'sync'],
      [main, 'billing'],
      [second, 'mailer'],
    ] as const) {
      const since = Date.now() - 86_400_000
      const runs = (await store.runs(task)).filter((run) => run.startedAt.getTime() >= since)
      const svg = page.locator(`svg.timeline[data-task="${task}"]`)
      const marks = await svg
        .locator('.mark')
        .evaluateAll((nodes) =>
          nodes.map((n) => ({ run: n.getAttribute('data-run'), kind: n.getAttribute('data-kind') })),
        )
      expect(marks.map((m) => m.run).sort(), task).toEqual(runs.map((run) => run.id).sort())
      for (const run of runs)
        expect(marks.find((m) => m.run === run.id)?.kind, `${task} ${run.id}`).toBe(markOf(run, runs).kind)
    }
    const kinds = async (task: string) =>
      page
        .locator(`svg.timeline[data-task="${task}"] .mark`)
        .evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-kind')).sort())
    expect(await kinds('cleanup')).toEqual(['caught-up', 'missed', 'missed', 'missed', 'ok'])
    expect(await kinds('sync')).toEqual(['lock-lost', 'ok'])
    expect(await kinds('report')).toEqual(expect.arrayContaining(['failed', 'ok', 'running', 'skipped']))
    const lanes = await page
      .locator('svg.timeline[data-task="report"] .mark')
      .evaluateAll((nodes) => [...new Set(nodes.map((n) => n.getAttribute('data-lane')!.split(':')[0]))].sort())
    expect(lanes).toEqual(['node-a', 'node-b', 'node-c'])
    expect(await page.locator('svg.timeline[data-task="nightly-export"] text').allTextContents()).toContain(
      'no runs in this window',
    )
    const week = await openPage('?window=week')
    expect(await week.locator('svg.timeline[data-task="nightly-export"] .mark').count()).toBe(1)
    await screenshot(week, 'dashboard-week')
  })

  it('lists the locks, held apart from expired, slot records apart from task locks, and filters them', async () => {
    const page = await openPage()
    const { locks } = await main.inspector.list()
    // Slot records, owed records and catch-up markers are listed apart from the task locks.
    const taskLocks = locks.filter(
      (l) =>
        parseSlotRecordName(l.name) === undefined &&
        parseOwedRecordName(l.name) === undefined &&
        !l.name.endsWith('@catch-up'),
    )
    const rows = page.locator('#store-0-locks tbody tr')
    expect(
      await rows.evaluateAll((trs) =>
        trs.map((tr) => `${tr.getAttribute('data-lock')} ${tr.getAttribute('data-held')}`),
      ),
    ).toEqual(taskLocks.map((l) => `${l.name} ${l.held}`))
    expect(await page.locator('#store-0-locks tr[data-lock="report"]').getAttribute('data-held')).toBe('true')
    expect(await page.locator('#store-0-locks tr[data-lock="billing"]').getAttribute('data-held')).toBe('false')
    expect(await page.locator('#store-0-slots tbody tr').count()).toBe(locks.length - taskLocks.length)
    expect(await page.locator('#store-1-locks tr[data-lock="maintenance"]').innerText()).toContain('maintenance-host')
    // Typing filters at once (script); the form does the same without it.
    await page.locator('#store-0-q').fill('bill')
    expect(
      await page
        .locator('#store-0-locks tbody tr:not([hidden])')
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-lock'))),
    ).toEqual(['billing'])
    const noScript = await openPage('?q=sync', { javaScriptEnabled: false })
    expect(
      await noScript
        .locator('#store-0-locks tbody tr')
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-lock'))),
    ).toEqual(['sync'])
    // Readable without JavaScript: the tables and the timelines come from the server.
    expect(await noScript.locator('svg.timeline').count()).toBe(6)
    expect(await noScript.locator('time').first().getAttribute('title')).toBe('UTC')
    expect(await page.locator('time').first().getAttribute('title')).toMatch(/^Your local time: /)
    await screenshot(noScript, 'dashboard-no-javascript')
  })

  it('is usable with the keyboard: skip link, window links, filter, and a force release confirmed and audited', async () => {
    const page = await openPage()
    await page.keyboard.press('Tab')
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content')
    await page.keyboard.press('Enter')
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main')
    // From the top, Tab goes to the window links, then to the tasks, in reading order.
    const fresh = await openPage()
    const focusOrder: string[] = []
    for (let i = 0; i < 5; i++) {
      await fresh.keyboard.press('Tab')
      focusOrder.push(await fresh.evaluate(() => document.activeElement?.textContent?.trim() ?? ''))
    }
    expect(focusOrder).toEqual(['Skip to content', 'hour', 'day', 'week', 'billing'])
    // The Release button of report, by keyboard. The run holding it renews its lease every 10 s,
    // and a release frees only the lock as the page showed it: a renewal in between changes it,
    // and the page says so; the operator then tries again on the page it shows.
    let notice = ''
    await page.reload()
    for (let attempt = 0; attempt < 3; attempt++) {
      const release = page.locator('#store-0-locks tr[data-lock="report"] button', { hasText: 'Release…' })
      await release.focus()
      await page.keyboard.press('Enter')
      await page.waitForSelector('button.danger', { timeout: 5000 }).catch(async (error) => {
        throw new Error(`${error}: ${(await page.content()).slice(0, 3000)}`)
      })
      expect(await page.locator('main h2').innerText()).toBe('Release lock “report”?')
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Release now')
      await screenshot(page, 'dashboard-release')
      await page.keyboard.press('Enter')
      await page.waitForSelector('.notice')
      notice = await page.locator('.notice').innerText()
      if (!/changed since the page showed it/.test(notice)) break
    }
    expect(notice).toMatch(/^Released lock "report" \(held by node-a:/)
    expect((await main.inspector.get('report'))?.held).toBe(false)
    expect(await page.locator('#store-0-locks tr[data-lock="report"]').getAttribute('data-held')).toBe('false')
    expect(server.stderr()).toMatch(
      /shedlock dashboard: \S+Z anonymous@127\.0\.0\.1 released lock "report" of SQLite .*locks\.db.* \(held by node-a:\d+:[0-9a-f]{12} until \S+Z\)/,
    )
    expect(consoleErrors).toEqual([])
  })

  it('answers /healthz with the verdict of shedlock status: 503 here, 200 for a healthy store', async () => {
    const response = await fetch(`${url}healthz`)
    expect(response.status).toBe(503)
    const report = (await response.json()) as { healthy: boolean; stores: { stale: string[]; failing: string[] }[] }
    const status = await cli(['status', '--url', `sqlite:${main.file}`, '--stale', '26h', '--json'], { cwd: dir })
    expect(status.code).toBe(1)
    const verdict = JSON.parse(status.stdout) as { stale: string[]; failing: string[] }
    expect(report.healthy).toBe(false)
    expect(report.stores[0]).toMatchObject({ stale: verdict.stale, failing: verdict.failing })
    expect(JSON.stringify(report)).not.toContain(SECRET)

    const healthy = startCli(['dashboard', '--url', `sqlite:${second.file}`, '--port', '0', '--stale', '26h'], {
      cwd: dir,
    })
    expect(await waitFor(() => /on (http:\/\/\S+\/) /.test(healthy.stdout()), 15_000), healthy.stderr()).toBe(true)
    const secondUrl = /on (http:\/\/\S+\/) /.exec(healthy.stdout())![1]!
    const ok = await fetch(`${secondUrl}healthz`)
    expect(ok.status).toBe(200)
    expect((await cli(['status', '--url', `sqlite:${second.file}`, '--stale', '26h'], { cwd: dir })).code).toBe(0)
    healthy.child.kill('SIGTERM')
    expect((await healthy.exited).code).toBe(0)
  })
  it("pauses and resumes a task from the page, at a phone's width, each confirmed and audited", async () => {
    const page = await openPage('', { width: 390 })
    const row = () => page.locator('#store-0-locks tr[data-lock="billing"]')
    await row().locator('button', { hasText: 'Pause…' }).click()
    await page.waitForSelector('button.danger')
    expect(await page.locator('main h2').innerText()).toBe('Pause task “billing”?')
    expect(await page.evaluate<boolean>('document.scrollingElement.scrollWidth <= innerWidth')).toBe(true)
    await page.locator('#pause-for').fill('1h')
    await page.locator('#pause-reason').fill('deploy freeze')
    await page.locator('button.danger').click()
    await page.waitForSelector('.notice')
    expect(await page.locator('.notice').innerText()).toBe(
      'Paused task "billing" for 1h: every node skips it until then.',
    )
    expect((await main.inspector.get('billing'))?.lockedBy).toMatch(
      /^paused by anonymous@127\.0\.0\.1 — deploy freeze:/,
    )
    expect(await row().locator('.badge.paused').count()).toBe(1)
    expect(await page.locator('tr.task[data-task="billing"] .badge.paused').innerText()).toBe('paused')

    await row().locator('button', { hasText: 'Resume…' }).click()
    await page.waitForSelector('button.danger')
    expect(await page.locator('main h2').innerText()).toBe('Resume task “billing”?')
    await page.locator('button.danger').click()
    await page.waitForSelector('.notice')
    expect(await page.locator('.notice').innerText()).toBe(
      'Resumed task "billing" (was paused by anonymous@127.0.0.1).',
    )
    expect((await main.inspector.get('billing'))?.held).toBe(false)
    expect(server.stderr()).toMatch(
      /anonymous@127\.0\.0\.1 paused task "billing" of SQLite .* for 1h \(deploy freeze\)/,
    )
    expect(server.stderr()).toMatch(
      /anonymous@127\.0\.0\.1 resumed task "billing" of SQLite .* \(paused by anonymous@127\.0\.0\.1\)/,
    )
    expect(consoleErrors).toEqual([])
    await page.context().close()
  })

  it('runs a task now from the page at 1366 px: a replica polling for triggers runs it once, recorded as triggered', async () => {
    // A replica of the app over the same file, polling for triggers of the tasks it ran.
    const db = (await loadSqliteDriver()).open(main.file)
    const ledger = sqliteRunLedger({ database: db })
    const provider = sqliteLockProvider({ database: db, lockedBy: 'node-t' })
    const executor = createLockingTaskExecutor(provider, { runLedger: ledger, triggers: { poll: '200ms' } })
    let runs = 0
    try {
      await executor.executeWithLock(() => void runs++, { name: 'sync', lockAtMostFor: '1m' })
      const page = await openPage('', { width: 1366 })
      await page.locator('#store-0-locks tr[data-lock="sync"]').locator('button', { hasText: 'Run now…' }).click()
      await page.waitForSelector('button.danger')
      expect(await page.locator('main h2').innerText()).toBe('Run task “sync” now?')
      await page.locator('button.danger').click()
      await page.waitForSelector('.notice')
      expect(await page.locator('.notice').innerText()).toMatch(
        /^Triggered task "sync": a replica picked it up after \d+\.\d s and runs it through its lock\.$/,
      )
      expect(await waitFor(() => runs === 2, 5_000), 'the triggered run').toBe(true)
      await executor.close()
      expect(runs, 'once').toBe(2)
      const [latest] = await ledger.history('sync', { limit: 1 })
      expect(latest?.triggeredBy).toBe('anonymous@127.0.0.1')
      expect(server.stderr()).toMatch(/anonymous@127\.0\.0\.1 triggered task "sync" of SQLite/)
      // A paused task offers no Run now…, and the trigger record is not listed as a task lock.
      expect(await page.locator('#store-0-locks tr[data-lock="sync@trigger"]').count()).toBe(0)
      expect(consoleErrors).toEqual([])
      await page.context().close()
    } finally {
      await executor.close()
      db.close()
    }
  })
})
