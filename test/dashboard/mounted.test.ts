import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDashboard } from '../../src/dashboard/index.ts'
import { lockConfiguration } from '../../src/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import {
  sqliteLockInspector,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../src/providers/sqlite/index.ts'

// The handler mounted under /shedlock of an app's own node:http server, opened at /shedlock and at
// /shedlock/, in Debian's chromium: every link and form of the page (and of the release
// confirmation) must lead to the dashboard, never out of its prefix. Two mounts: one that hands
// the handler the whole URL (plain node:http), one that cuts the prefix and keeps the whole URL as
// `originalUrl` (as Express's app.use('/shedlock', ...) does).

const CHROMIUM =
  process.env.SHEDLOCK_CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path))
if (!CHROMIUM) {
  if (process.env.CI === 'true')
    throw new Error('chromium is missing: bash scripts/services.sh chromium installs it (Debian package chromium)')
  console.warn('dashboard mount tests skipped: no chromium (bash scripts/services.sh chromium installs it)')
}

const PREFIX = '/shedlock'

type Mount = 'whole URL' | 'prefix cut (Express)'

/** An app server with the dashboard under {@link PREFIX}; any other path is the app's 404. */
function appServer(dashboard: ReturnType<typeof createDashboard>, mount: Mount): Server {
  return createServer((request, response) => {
    const url = request.url ?? '/'
    const mine = url === PREFIX || url.startsWith(`${PREFIX}/`) || url.startsWith(`${PREFIX}?`)
    if (!mine) {
      response.statusCode = 404
      response.end('not the dashboard\n')
      return
    }
    if (mount === 'prefix cut (Express)') {
      const rest = url.slice(PREFIX.length)
      ;(request as IncomingMessage & { originalUrl: string }).originalUrl = url
      request.url = rest.startsWith('/') ? rest : `/${rest}`
    }
    void dashboard(request, response)
  })
}

describe.skipIf(!CHROMIUM)('the dashboard mounted under a prefix', () => {
  let dir: string
  let db: SqliteConnection
  let browser: Browser
  const servers: Server[] = []

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-mounted-'))
    db = (await loadSqliteDriver()).open(join(dir, 'locks.db'))
    db.exec(sqliteSchema())
    db.exec(sqliteRunsSchema())
    const now = Date.now()
    await sqliteRunLedger({ database: db }).record({
      name: 'job',
      slot: undefined,
      node: 'web-1:101:0123456789ab',
      startedAt: new Date(now - 60_000),
      finishedAt: new Date(now - 59_000),
      outcome: 'ok',
      durationMs: 1000,
    })
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    for (const server of servers) {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
    db?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  async function listen(mount: Mount): Promise<string> {
    const dashboard = createDashboard({
      stores: [
        {
          label: 'locks',
          inspector: sqliteLockInspector({ database: db }),
          runLedger: sqliteRunLedger({ database: db }),
        },
      ],
      allowRelease: true,
      refreshSeconds: 0,
      audit: () => undefined,
    })
    const server = appServer(dashboard, mount)
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  }

  /** Every link and form action of the page, as the browser resolves them (fragments of the page itself left out). */
  async function targets(page: Page): Promise<{ links: string[]; forms: { action: string; method: string }[] }> {
    return page.evaluate<{ links: string[]; forms: { action: string; method: string }[] }>(`({
      links: Array.from(document.querySelectorAll('a[href]'))
        .filter((a) => !a.getAttribute('href').startsWith('#'))
        .map((a) => a.href),
      forms: Array.from(document.querySelectorAll('form')).map((f) => ({ action: f.action, method: f.method })),
    })`)
  }

  function underPrefix(origin: string, target: string): boolean {
    const url = new URL(target)
    return url.origin === origin && (url.pathname === PREFIX || url.pathname.startsWith(`${PREFIX}/`))
  }

  for (const mount of ['whole URL', 'prefix cut (Express)'] as const) {
    for (const path of [PREFIX, `${PREFIX}/`]) {
      it(`${mount}, opened at ${path}: every link and form stays under ${PREFIX} and works`, async () => {
        const origin = await listen(mount)
        await sqliteLockProvider({ database: db, lockedBy: 'holder' }).lock(
          lockConfiguration({ name: 'job', lockAtMostFor: '10m' }),
        )
        const context = await browser.newContext()
        const page = await context.newPage()
        expect((await page.goto(`${origin}${path}`))?.status()).toBe(200)
        const { links, forms } = await targets(page)
        expect(links.length).toBeGreaterThanOrEqual(3)
        expect(forms.length).toBeGreaterThanOrEqual(2)
        for (const target of [...links, ...forms.map((f) => f.action)])
          expect(underPrefix(origin, target), `${target} from ${path}`).toBe(true)

        // Links: the window links give the page, the health link the health report.
        for (const link of links) {
          const response = await fetch(link)
          expect(response.status, link).not.toBe(404)
          const type = response.headers.get('content-type') ?? ''
          if (new URL(link).pathname.endsWith('/healthz')) {
            expect(type, link).toMatch(/^application\/json/)
            expect(((await response.json()) as { stores: unknown[] }).stores).toHaveLength(1)
          } else if (new URL(link).searchParams.has('task')) {
            expect(response.status, link).toBe(200)
            expect(await response.text(), link).toContain('Task “job”')
          } else {
            expect(response.status, link).toBe(200)
            expect(await response.text(), link).toContain('<h2 id="store-0">locks</h2>')
          }
        }
        // The task's page: its links and its filter form stay under the prefix too.
        const taskLink = links.find((link) => new URL(link).searchParams.has('task'))
        expect(taskLink, 'the task links to its page').toBeDefined()
        const taskPage = await context.newPage()
        await taskPage.goto(taskLink!)
        const onTaskPage = await targets(taskPage)
        for (const target of [...onTaskPage.links, ...onTaskPage.forms.map((f) => f.action)])
          expect(underPrefix(origin, target), `${target} from the task page`).toBe(true)
        await taskPage.close()
        await page.locator('a', { hasText: 'healthz' }).click()
        expect(new URL(page.url()).pathname).toBe(`${PREFIX}/healthz`)
        await page.goBack()

        // The filter form (GET), then the release (POST, confirmed): each answers under the prefix.
        await page.locator('#store-0-q').fill('job')
        await page.locator('form.filter button').click()
        await page.waitForURL(/q=job/)
        expect(underPrefix(origin, page.url()), page.url()).toBe(true)
        expect(await page.locator('#store-0-locks tr[data-lock="job"]').count()).toBe(1)
        await page.locator('tr[data-lock="job"] form.release button').click()
        await page.waitForSelector('button.danger')
        expect(underPrefix(origin, page.url()), page.url()).toBe(true)
        const confirm = await targets(page)
        for (const target of [...confirm.links, ...confirm.forms.map((f) => f.action)])
          expect(underPrefix(origin, target), `${target} from the confirmation`).toBe(true)
        await page.locator('button.danger').click()
        await page.waitForSelector('.notice')
        expect(await page.locator('.notice').textContent()).toMatch(/^Released lock "job"/)
        expect((await sqliteLockInspector({ database: db }).get('job'))?.held).toBe(false)
        await context.close()
      })
    }
  }
})
