import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunningDashboard, startDashboard } from '../../src/dashboard/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import { sqliteLockInspector, sqliteRunLedger } from '../../src/providers/sqlite/index.ts'
import { type SeededStore, seedMain, seedSecond } from './support/seed.ts'

// The page at a phone's width (390 px) and a laptop's (1366 px), in Debian's chromium: no
// sideways scroll, and timeline labels drawn at a readable size (the SVG must not shrink its text
// with the drawing). The stores: the seeded ones, and one whose tables are missing (an error
// panel with a CREATE TABLE in it). Screenshots go to test-results/dashboard/, and the phone's to
// docs/images/ with SHEDLOCK_UPDATE_SCREENSHOTS=1.

const CHROMIUM =
  process.env.SHEDLOCK_CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path))
const ARTEFACTS = fileURLToPath(new URL('../../test-results/dashboard/', import.meta.url))
const DOCS_IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url))
if (!CHROMIUM) {
  if (process.env.CI === 'true')
    throw new Error('chromium is missing: bash scripts/services.sh chromium installs it (Debian package chromium)')
  console.warn('dashboard layout tests skipped: no chromium (bash scripts/services.sh chromium installs it)')
}

/** The smallest size, in CSS pixels as drawn, of the timelines' visible text: its font size times the SVG's scale. */
const SMALLEST_LABEL = `Math.min(...Array.from(document.querySelectorAll('svg.timeline text'))
  .filter((t) => getComputedStyle(t).display !== 'none')
  .map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))`

/** Pairs of visible tick labels of one timeline that overlap. */
const OVERLAPPING_TICKS = `Array.from(document.querySelectorAll('svg.timeline')).flatMap((svg) => {
  const boxes = Array.from(svg.querySelectorAll('text.tick'))
    .filter((t) => getComputedStyle(t).display !== 'none')
    .map((t) => t.getBoundingClientRect())
  return boxes.flatMap((a, i) => boxes.slice(i + 1).filter((b) => a.right > b.left && b.right > a.left).map(() => svg.dataset.task))
})`

describe.skipIf(!CHROMIUM)('the dashboard on a phone and on a laptop', () => {
  let dir: string
  let main: SeededStore
  let second: SeededStore
  let empty: SqliteConnection
  let dashboard: RunningDashboard
  let browser: Browser

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-layout-'))
    main = await seedMain(join(dir, 'locks-of-a-rather-long-folder-name-for-a-phone.db'))
    second = await seedSecond(join(dir, 'second.db'))
    empty = (await loadSqliteDriver()).open(join(dir, 'no-tables.db'))
    dashboard = await startDashboard({
      stores: [
        { label: `SQLite sqlite:${main.file}`, inspector: main.inspector, runLedger: main.ledger },
        { label: `SQLite sqlite:${second.file}`, inspector: second.inspector, runLedger: second.ledger },
        {
          label: 'SQLite sqlite:./no-tables.db',
          inspector: sqliteLockInspector({ database: empty }),
          runLedger: sqliteRunLedger({ database: empty }),
        },
      ],
      port: 0,
      refreshSeconds: 0,
      allowRelease: true,
      maxAge: '26h',
      audit: () => undefined,
    })
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await dashboard?.close()
    await main?.stop()
    await second?.stop()
    empty?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  async function open(width: number, path = ''): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 844 }, timezoneId: 'Europe/Paris' })
    const page = await context.newPage()
    await page.goto(`${dashboard.url}${path}`)
    return page
  }

  async function screenshot(page: Page, name: string): Promise<void> {
    mkdirSync(ARTEFACTS, { recursive: true })
    await page.screenshot({ path: join(ARTEFACTS, `${name}.png`), fullPage: true })
    if (process.env.SHEDLOCK_UPDATE_SCREENSHOTS === '1' && name === 'dashboard-task-phone') {
      mkdirSync(DOCS_IMAGES, { recursive: true })
      await page.screenshot({ path: join(DOCS_IMAGES, `${name}.png`), fullPage: true })
    }
    if (process.env.SHEDLOCK_UPDATE_SCREENSHOTS === '1' && name === 'dashboard-phone') {
      // docs/ ships in the package: the first store down to its timelines is enough to show.
      const end = await page.locator('section.store').first().locator('figure').last().boundingBox()
      mkdirSync(DOCS_IMAGES, { recursive: true })
      await page.screenshot({
        path: join(DOCS_IMAGES, `${name}.png`),
        fullPage: true,
        clip: { x: 0, y: 0, width: 390, height: Math.ceil(end!.y + end!.height + 8) },
      })
    }
  }

  for (const [width, name] of [
    [390, 'dashboard-phone'],
    [1366, 'dashboard-laptop'],
  ] as const) {
    it(`at ${width} px: no sideways scroll, timeline labels of 11 px or more, ticks apart`, async () => {
      for (const path of ['', '?window=week']) {
        const page = await open(width, path)
        const widths = await page.evaluate<{ scroll: number; inner: number }>(
          '({ scroll: document.scrollingElement.scrollWidth, inner: innerWidth })',
        )
        expect(widths.scroll, `${path}: the page is ${widths.scroll} px wide`).toBeLessThanOrEqual(widths.inner)
        expect(await page.evaluate<number>(SMALLEST_LABEL), path).toBeGreaterThanOrEqual(11)
        expect(await page.evaluate<string[]>(OVERLAPPING_TICKS), path).toEqual([])
        // Every task, its timeline, the error panel and the release buttons are there to read.
        expect(await page.locator('tr.task').count()).toBe(6)
        expect(await page.locator('svg.timeline').count()).toBe(6)
        await expect(page.locator('.error').first().isVisible()).resolves.toBe(true)
        expect(await page.locator('form.release button').first().isVisible()).toBe(true)
        if (path === '') await screenshot(page, name)
        await page.context().close()
      }
    })
  }

  for (const width of [390, 1366]) {
    it(`a task's page at ${width} px: reached from the task's name, no sideways scroll, its chart and runs shown`, async () => {
      const page = await open(width)
      await page.locator('tr.task[data-task="billing"] th a').first().click()
      await page.waitForSelector('table.runs')
      expect(new URL(page.url()).searchParams.get('task')).toBe('billing')
      expect(await page.evaluate<boolean>('document.scrollingElement.scrollWidth <= innerWidth')).toBe(true)
      const chart = await page.locator('svg.durations').boundingBox()
      expect(chart!.width, 'the durations chart fits the page').toBeLessThanOrEqual(width)
      expect(chart!.height).toBeGreaterThan(50)
      expect(await page.locator('table.runs tbody tr').count()).toBeGreaterThan(0)
      await page.selectOption('#f-outcome', 'failed')
      await page.locator('form.filter button').click()
      await page.waitForURL(/outcome=failed/)
      const outcomes = await page
        .locator('table.runs tbody tr')
        .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-outcome')))
      expect(new Set(outcomes)).toEqual(new Set(['failed']))
      await screenshot(page, width === 390 ? 'dashboard-task-phone' : 'dashboard-task-laptop')
      await page.context().close()
    })
  }

  it('the confirmation of a release fits a phone too', async () => {
    const page = await open(390)
    await page.locator('form.release button').first().click()
    await page.waitForSelector('button.danger')
    expect(await page.evaluate<boolean>('document.scrollingElement.scrollWidth <= innerWidth')).toBe(true)
    await page.context().close()
  })
})
