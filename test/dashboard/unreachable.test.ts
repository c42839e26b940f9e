import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Browser, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startCli, type StartedCli } from '../cli/support/cli.ts'
import { type OwnServer, postgresBin, SECRET_USER, startPostgres } from '../faults/support/servers.ts'
import { waitFor } from '../helpers/processes.ts'
import { type SeededStore, seedSecond } from './support/seed.ts'

// `shedlock dashboard` (the built bin) given two stores, one of which refuses its login: a
// PostgreSQL server of the test's own (SCRAM for SECRET_USER, as the shared server trusts every
// password) with a wrong password, and a working SQLite store. The dashboard starts, serves the
// working store, shows the other as an error panel with its URL's password masked, and /healthz
// answers 503 naming it. The page is checked in chromium at a phone's and a laptop's width.

const WRONG_PASSWORD = 'not-the-Pw-9d1e'
const CHROMIUM =
  process.env.SHEDLOCK_CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path))
const POSTGRES = postgresBin() !== undefined
if (!POSTGRES) console.warn('unreachable-store dashboard test skipped: no PostgreSQL binaries (install postgresql)')

describe.skipIf(!POSTGRES)('shedlock dashboard with a store that refuses its login', () => {
  let dir: string
  let postgres: OwnServer
  let working: SeededStore
  let server: StartedCli
  let url: string
  let refused: string

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-unreachable-'))
    postgres = await startPostgres()
    working = await seedSecond(join(dir, 'second.db'))
    refused = `postgres://${SECRET_USER}:${WRONG_PASSWORD}@127.0.0.1:${postgres.port}/postgres`
    server = startCli(
      ['dashboard', '--url', refused, '--url', `sqlite:${working.file}`, '--port', '0', '--refresh', '0'],
      { cwd: dir },
    )
    const started = await waitFor(() => /on (http:\/\/\S+\/) /.test(server.stdout()), 30_000)
    expect(started, `${server.stdout()}${server.stderr()}`).toBe(true)
    url = /on (http:\/\/\S+\/) /.exec(server.stdout())![1]!
  }, 90_000)

  afterAll(async () => {
    server?.child.kill('SIGTERM')
    await server?.exited
    await working?.stop()
    await postgres?.destroy()
    rmSync(dir, { recursive: true, force: true })
  })

  it('starts, and says on stderr which store it could not open, password masked', () => {
    expect(server.stdout()).toMatch(/\(2 stores, 1 unreachable, read-only\)/)
    expect(server.stderr()).toMatch(
      new RegExp(
        `^shedlock dashboard: cannot reach PostgreSQL at postgres://${SECRET_USER}:\\*\\*\\*@127\\.0\\.0\\.1:${postgres.port}/postgres: password authentication failed for user "${SECRET_USER}".*/healthz answers 503 until it opens`,
        'm',
      ),
    )
    expect(server.stdout() + server.stderr()).not.toContain(WRONG_PASSWORD)
  })

  it('serves the working store and shows the other as an error panel', async () => {
    const response = await fetch(url)
    expect(response.status).toBe(200)
    const html = await response.text()
    expect(html).not.toContain(WRONG_PASSWORD)
    expect(html).toContain(
      `<h2 id="store-0">PostgreSQL postgres://${SECRET_USER}:***@127.0.0.1:${postgres.port}/postgres</h2>`,
    )
    expect(html).toMatch(
      /<div class="error" role="alert"><p>locks: cannot reach PostgreSQL at postgres:\/\/\S+:\*\*\*@\S+: password authentication failed/,
    )
    // No claim about a history it could not read.
    expect(html).not.toContain('This store keeps no run history')
    expect(html).toContain('data-task="mailer"')
  })

  it('answers /healthz with 503, naming the store that cannot be read', async () => {
    const response = await fetch(`${url}healthz`)
    expect(response.status).toBe(503)
    const text = await response.text()
    expect(text).not.toContain(WRONG_PASSWORD)
    const report = JSON.parse(text) as { healthy: boolean; stores: { store: string; errors: string[] }[] }
    expect(report.healthy).toBe(false)
    expect(report.stores[0]).toMatchObject({
      store: `PostgreSQL postgres://${SECRET_USER}:***@127.0.0.1:${postgres.port}/postgres`,
      errors: [expect.stringMatching(/^locks: cannot reach PostgreSQL at .*password authentication failed/)],
    })
    expect(report.stores[1]).toMatchObject({ store: expect.stringContaining('second.db'), errors: [] })
  })

  describe.skipIf(!CHROMIUM)('in a browser', () => {
    let browser: Browser
    beforeAll(async () => {
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
    })
    afterAll(async () => {
      await browser?.close()
    })

    for (const width of [390, 1366]) {
      it(`at ${width} px: the error panel shows, and the page does not scroll sideways`, async () => {
        const context = await browser.newContext({ viewport: { width, height: 844 } })
        const page = await context.newPage()
        await page.goto(url)
        const panel = page.locator('#store-0 ~ .error, section.store:first-of-type .error').first()
        expect(await panel.isVisible()).toBe(true)
        expect(await panel.textContent()).toContain('password authentication failed')
        expect(await page.locator('tr.task[data-task="mailer"]').isVisible()).toBe(true)
        expect(await page.evaluate<boolean>('document.scrollingElement.scrollWidth <= innerWidth')).toBe(true)
        await context.close()
      })
    }
  })
})
