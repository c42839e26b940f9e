import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Browser, type BrowserContext, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../src/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import { sqliteLockInspector, sqliteLockProvider, sqliteSchema } from '../../src/providers/sqlite/index.ts'
import { startCli, type StartedCli } from '../cli/support/cli.ts'
import { waitFor } from '../helpers/processes.ts'

// Issue 42 in Chromium, against `shedlock dashboard --allow-release` (the built bin) on a SQLite
// store: a DNS rebinding page (a name of the attacker's that resolves to 127.0.0.1, mapped so by
// --host-resolver-rules) can neither read the page nor release a lock, while the dashboard's own
// address and its --public-url work; and locks whose names hold String.replace patterns are
// confirmed and released from the page, each alone.

const CHROMIUM =
  process.env.SHEDLOCK_CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path))
const required = process.env.CI === 'true'

if (!CHROMIUM) {
  if (required)
    throw new Error('chromium is missing: bash scripts/services.sh chromium installs it (Debian package chromium)')
  console.warn('dashboard hardening browser tests skipped: no chromium (bash scripts/services.sh chromium installs it)')
}

/** A port free at the time of asking: the public URL names it before the dashboard starts. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

// The attacker's script, run in a page of the rebound name (as the attacker's own page would
// be, same origin as far as the browser knows): it reads the dashboard, takes the release form of
// "rebind-target", confirms and releases it; without a form, it posts a release blind.
const ATTACK = `(async function () {
  var steps = []
  try {
    var page = await fetch('/')
    steps.push('page ' + page.status)
    var doc = new DOMParser().parseFromString(await page.text(), 'text/html')
    var form = doc.querySelector('tr[data-lock="rebind-target"] form')
    if (form) {
      var confirm = await fetch('/', { method: 'POST', body: new URLSearchParams(new FormData(form)) })
      steps.push('confirm ' + confirm.status)
      var next = new DOMParser().parseFromString(await confirm.text(), 'text/html').querySelector('main form')
      if (next) steps.push('release ' + (await fetch('/', { method: 'POST', body: new URLSearchParams(new FormData(next)) })).status)
    } else {
      var blind = await fetch('/', { method: 'POST', body: new URLSearchParams({ store: '0', lock: 'rebind-target', step: 'release' }) })
      steps.push('blind ' + blind.status)
    }
  } catch (error) {
    steps.push('error ' + error)
  }
  return steps.join(', ')
})()`

const HOSTILE = ['pay$$roll', 'pay$&roll', 'pay$`roll', "pay$'roll", '$1$<i>$&']

describe.skipIf(!CHROMIUM)('shedlock dashboard against DNS rebinding and hostile names, in a browser', () => {
  let dir: string
  let db: SqliteConnection
  let inspector: ReturnType<typeof sqliteLockInspector>
  let server: StartedCli
  let port: number
  let browser: Browser
  let context: BrowserContext

  const hold = async (name: string, holder: string) => {
    const lock = await sqliteLockProvider({ database: db, lockedBy: holder }).lock(
      lockConfiguration({ name, lockAtMostFor: '10m' }),
    )
    expect(lock, name).toBeDefined()
  }
  const held = async (name: string) => (await inspector.get(name))?.held

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-hardening-'))
    const file = join(dir, 'locks.db')
    db = (await loadSqliteDriver()).open(file)
    db.exec(sqliteSchema())
    inspector = sqliteLockInspector({ database: db })
    port = await freePort()
    const args = ['dashboard', '--url', `sqlite:${file}`, '--port', String(port), '--allow-release', '--refresh', '0']
    server = startCli([...args, '--public-url', `http://dashboard.test:${port}/`], { cwd: dir })
    const started = await waitFor(() => /on (http:\/\/\S+\/) /.test(server.stdout()), 15_000)
    expect(started, `${server.stdout()}${server.stderr()}`).toBe(true)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-dev-shm-usage',
        // Both names resolve to this host: one is the attacker's (rebound), one the public URL's.
        '--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP dashboard.test 127.0.0.1',
      ],
    })
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    server?.child.kill('SIGTERM')
    await server?.exited
    db?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('refuses a rebound name: its page cannot read a token or release a lock; the real addresses work', async () => {
    await hold('rebind-target', 'node-a')
    const page = await context.newPage()
    const direct = await page.goto(`http://rebind.test:${port}/`)
    expect(direct?.status()).toBe(421)
    expect(await page.locator('body').textContent()).toMatch(
      /refused a request for host "rebind\.test:\d+".*DNS rebinding/,
    )
    // Run where the attacker's script runs: in a document of the rebound origin, loaded from this host.
    const title = await page.evaluate(ATTACK)
    expect(title).toBe('page 421, blind 421')
    expect(await held('rebind-target')).toBe(true)
    expect(server.stderr()).not.toMatch(/released lock "rebind-target"/)
    for (const address of [
      `http://127.0.0.1:${port}/`,
      `http://localhost:${port}/`,
      `http://dashboard.test:${port}/`,
    ]) {
      const own = await context.newPage()
      expect((await own.goto(address))?.status(), address).toBe(200)
      expect(await own.locator('#store-0-locks tr[data-lock="rebind-target"]').getAttribute('data-held')).toBe('true')
      await own.close()
    }
  })

  it("confirms and releases, from the page, locks whose names hold $$, $&, $` and $', each alone", async () => {
    for (const name of HOSTILE) await hold(name, `ops-${name}`)
    const page = await context.newPage()
    for (const [i, name] of HOSTILE.entries()) {
      await page.goto(`http://dashboard.test:${port}/`)
      await page.locator(`#store-0-locks tr[data-lock="${name}"] button`).click()
      await page.waitForSelector('button.danger', { timeout: 5000 })
      expect(await page.locator('main h2').textContent()).toBe(`Release lock “${name}”?`)
      expect(await page.locator('main form').count()).toBe(1)
      expect(await page.locator('main input[name="lock"]').getAttribute('value')).toBe(name)
      await page.locator('button.danger').click()
      await page.waitForSelector('.notice')
      const notice = (await page.locator('.notice').textContent()) ?? ''
      expect(notice.startsWith(`Released lock "${name}" (held by ops-${name}:`), notice).toBe(true)
      expect(await held(name), name).toBe(false)
      for (const other of HOSTILE.slice(i + 1)) expect(await held(other), `${other} after ${name}`).toBe(true)
      expect(await held('rebind-target')).toBe(true)
    }
    expect(server.stderr().match(/released lock/g)).toHaveLength(HOSTILE.length)
  })

  it('shows hostile lock names as text under an effective Content-Security-Policy', async () => {
    const names = [
      '<script>window.__pwned=1</script>',
      '"><img src=x onerror="window.__pwned=2">',
      "' autofocus onfocus='window.__pwned=3",
      '</title><svg onload=window.__pwned=4>',
    ]
    for (const name of names) await hold(name, `${name}-holder`)
    const page = await context.newPage()
    const violations: string[] = []
    page.on('console', (message) => {
      if (message.type() === 'error') violations.push(message.text())
    })
    const response = await page.goto(`http://dashboard.test:${port}/`)
    const csp = response?.headers()['content-security-policy'] ?? ''
    expect(csp).toMatch(/default-src 'none'; style-src 'nonce-[^']+'; script-src 'nonce-[^']+';/)
    for (const name of names) {
      const row = page.locator(`#store-0-locks tbody tr`).filter({ has: page.locator('th', { hasText: name }) })
      expect(await row.count(), name).toBe(1)
      expect(await row.locator('th').textContent(), name).toBe(name)
    }
    // A script put into the page without the nonce (as an injection would be) does not run.
    await page.evaluate(`(function () {
      var s = document.createElement('script'); s.textContent = 'window.__pwned = 5'; document.body.appendChild(s)
    })()`)
    await page.locator('#store-0-q').focus()
    expect(await page.evaluate('typeof window.__pwned')).toBe('undefined')
    expect(violations.join('\n')).toMatch(/Content Security Policy/)
  })
})
