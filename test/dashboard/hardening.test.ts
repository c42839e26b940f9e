import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { lockConfiguration } from '../../src/index.ts'
import { type RunningDashboard, startDashboard } from '../../src/dashboard/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import {
  sqliteLockInspector,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../src/providers/sqlite/index.ts'

// The defects of issue 42 in the dashboard, over HTTP on loopback against a SQLite store: DNS
// rebinding (a foreign Host), release tokens (short-lived, single-use, bound to the lock
// confirmed), lock names with String.replace patterns, oversized forms, secrets that another writer
// left in the run history, a missing runs table, and /healthz as docs/dashboard.md shows it.

interface Answer {
  readonly status: number
  readonly body: string
}

/** An HTTP request with the headers given as they are (fetch would not send a chosen Host). */
function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end(options.body)
  })
}

/** The hidden fields of the first form of `html` that has a `lock` field equal to `lock` (any when undefined). */
function formOf(html: string, lock?: string): Record<string, string> {
  for (const form of html.match(/<form method="post"[\s\S]*?<\/form>/g) ?? []) {
    const fields: Record<string, string> = {}
    for (const [, name, value] of form.matchAll(/<input type="hidden" name="(\w+)" value="([^"]*)">/g))
      fields[name!] = unentity(value!)
    if (lock === undefined || fields.lock === lock) return fields
  }
  throw new Error(`no form for lock ${JSON.stringify(lock)} in ${html.slice(0, 2000)}`)
}

function unentity(text: string): string {
  return text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
}

describe('dashboard hardening (issue 42)', () => {
  let dir: string
  let db: SqliteConnection
  let store: {
    label: string
    inspector: ReturnType<typeof sqliteLockInspector>
    runLedger: ReturnType<typeof sqliteRunLedger>
  }
  const open: RunningDashboard[] = []

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-hardening-'))
    db = (await loadSqliteDriver()).open(join(dir, 'locks.db'))
    db.exec(sqliteSchema())
    db.exec(sqliteRunsSchema())
    store = {
      label: 'locks',
      inspector: sqliteLockInspector({ database: db }),
      runLedger: sqliteRunLedger({ database: db }),
    }
  })

  afterEach(async () => {
    vi.useRealTimers()
    await Promise.all(open.splice(0).map((d) => d.close()))
  })

  afterAll(() => {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  async function running(options: Partial<Parameters<typeof startDashboard>[0]> = {}): Promise<RunningDashboard> {
    const dashboard = await startDashboard({
      stores: [store],
      port: 0,
      refreshSeconds: 0,
      allowRelease: true,
      audit: () => undefined,
      ...options,
    })
    open.push(dashboard)
    return dashboard
  }

  async function hold(name: string, holder = 'holder'): Promise<void> {
    const lock = await sqliteLockProvider({ database: db, lockedBy: holder }).lock(
      lockConfiguration({ name, lockAtMostFor: '10m' }),
    )
    expect(lock, name).toBeDefined()
  }

  const held = async (name: string): Promise<boolean | undefined> => (await store.inspector.get(name))?.held

  /** Posts `fields` as a form, from the dashboard's own origin unless `headers` say otherwise. */
  const post = (dashboard: RunningDashboard, fields: Record<string, string> | string, headers = {}) =>
    call(dashboard.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: dashboard.url.slice(0, -1), ...headers },
      body: typeof fields === 'string' ? fields : new URLSearchParams(fields).toString(),
    })

  it('refuses a request for a foreign Host, as a DNS rebinding page sends it, and serves its own addresses', async () => {
    await hold('rebind-target')
    const dashboard = await running()
    const port = new URL(dashboard.url).port
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`])
      expect((await call(dashboard.url, { headers: { host } })).status, host).toBe(200)
    // The attacker's name, now resolving to 127.0.0.1: the page, /healthz and a release are refused.
    const rebound = `rebind.attacker.example:${port}`
    const page = await call(dashboard.url, { headers: { host: rebound } })
    expect(page.status).toBe(421)
    expect(page.body).toMatch(/refused a request for host "rebind\.attacker\.example:\d+".*DNS rebinding/)
    expect(page.body).toContain('--public-url')
    expect(page.body).not.toContain('csrf')
    expect((await call(`${dashboard.url}healthz`, { headers: { host: rebound } })).status).toBe(421)
    for (const host of [`127.0.0.1:${Number(port) + 1}`, '127.0.0.1', 'evil.example', `127.0.0.1:${port}@evil`])
      expect((await call(dashboard.url, { headers: { host } })).status, host).toBe(421)
    const token = formOf((await call(dashboard.url)).body, 'rebind-target')
    const attack = await post(dashboard, { ...token, step: 'confirm' }, { host: rebound, origin: `http://${rebound}` })
    expect(attack.status).toBe(421)
    // With the real Host, the rebinding origin is still refused: Origin is checked against the
    // dashboard's own addresses, not against the Host header.
    const foreignOrigin = await post(dashboard, { ...token, step: 'confirm' }, { origin: `http://${rebound}` })
    expect(foreignOrigin.status).toBe(403)
    expect(await held('rebind-target')).toBe(true)
  })

  it('serves the public URL it is given, and forms from that origin', async () => {
    const dashboard = await running({ publicUrl: 'https://ops.example.com/shedlock/' })
    expect((await call(dashboard.url, { headers: { host: 'ops.example.com' } })).status).toBe(200)
    expect((await call(dashboard.url, { headers: { host: 'ops.example.com:443' } })).status).toBe(200)
    expect((await call(dashboard.url, { headers: { host: 'ops.example.com:8443' } })).status).toBe(421)
    await hold('public-target')
    const fields = formOf((await call(dashboard.url)).body, 'public-target')
    // A reverse proxy sends its upstream's Host; the browser, the public origin.
    const confirm = await post(dashboard, { ...fields, step: 'confirm' }, { origin: 'https://ops.example.com' })
    expect(confirm.body).toContain('Release lock “public-target”?')
    await expect(startDashboard({ stores: [store], publicUrl: 'ops.example.com' })).rejects.toThrow(
      /publicUrl "ops\.example\.com" is not an http\(s\) URL/,
    )
  })

  it('takes each release token once, for 5 minutes', async () => {
    await hold('token-target')
    const dashboard = await running()
    const fields = formOf((await call(dashboard.url)).body, 'token-target')
    expect((await post(dashboard, { ...fields, step: 'confirm' })).status).toBe(200)
    const again = await post(dashboard, { ...fields, step: 'confirm' })
    expect(again.status).toBe(403)
    expect(again.body).toMatch(/good once, for 5 minutes/)
    const later = formOf((await call(dashboard.url)).body, 'token-target')
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 5 * 60_000 + 1000 })
    expect((await post(dashboard, { ...later, step: 'confirm' })).status).toBe(403)
    vi.useRealTimers()
    expect(await held('token-target')).toBe(true)
  })

  const HOSTILE = ['pay$$roll', 'pay$&roll', 'pay$`roll', "pay$'roll", '$1$<x>$&']

  it("confirms and releases locks whose names and holders hold $$, $&, $` and $'", async () => {
    for (const name of HOSTILE) await hold(name, `ops ${name} $& $'`)
    const dashboard = await running()
    for (const name of HOSTILE) {
      const confirm = await post(dashboard, { ...formOf((await call(dashboard.url)).body, name), step: 'confirm' })
      expect(confirm.status, name).toBe(200)
      const forms = confirm.body.match(/<form method="post"/g) ?? []
      expect(forms, name).toHaveLength(1)
      const fields = formOf(confirm.body)
      const { lockedBy } = (await store.inspector.get(name))!
      expect(lockedBy, name).toMatch(/^ops .* \$& \$'/)
      expect(fields, name).toMatchObject({ lock: name, lockedBy, step: 'release' })
      expect(unentity(confirm.body)).toContain(`Release lock “${name}”?`)
      const done = await post(dashboard, fields)
      expect(unentity(done.body), name).toContain(`Released lock "${name}"`)
      expect(await held(name), name).toBe(false)
    }
  })

  it('releases only the lock its confirmation page named, whatever a hand-made form says', async () => {
    await hold('victim')
    await hold('confirmed')
    const dashboard = await running()
    const page = (await call(dashboard.url)).body
    const victim = formOf(page, 'victim')
    // The main page's token asks for a confirmation; it cannot release.
    expect((await post(dashboard, { ...victim, step: 'release' })).status).toBe(403)
    const next = (await call(dashboard.url)).body
    const confirmPage = await post(dashboard, { ...formOf(next, 'confirmed'), step: 'confirm' })
    const confirmed = formOf(confirmPage.body)
    // The confirmation's token, on a form naming another lock.
    const forged = { ...formOf(next, 'victim'), csrf: confirmed.csrf!, step: 'release' }
    expect((await post(dashboard, forged)).status).toBe(403)
    // Two lock fields: which one was confirmed?
    const twice = `${new URLSearchParams(confirmed)}&lock=victim`
    expect((await post(dashboard, twice)).status).toBe(400)
    expect(await held('victim')).toBe(true)
    expect(await held('confirmed')).toBe(true)
    // The token of a refused post is used up (with every form of its page): confirm again, and release.
    const again = formOf(
      (await post(dashboard, { ...formOf((await call(dashboard.url)).body, 'confirmed'), step: 'confirm' })).body,
    )
    expect((await post(dashboard, again)).body).toContain('Released lock &quot;confirmed&quot;')
    expect(await held('confirmed')).toBe(false)
    expect(await held('victim')).toBe(true)
  })

  it('answers a form larger than 16 KiB with 413', async () => {
    const dashboard = await running()
    const big = await post(dashboard, { lock: 'x'.repeat(20_000), step: 'confirm' })
    expect(big.status).toBe(413)
    expect(big.body).toMatch(/larger than 16 KiB/)
    expect((await call(dashboard.url)).status).toBe(200)
  })

  it('masks passwords in run errors that another writer stored as they were, on the page and in /healthz', async () => {
    await store.runLedger.record({
      name: 'leaky',
      slot: undefined,
      node: 'node-x',
      startedAt: new Date(),
      finishedAt: new Date(),
      outcome: 'failed',
      durationMs: 5,
      error: { type: 'Error', message: 'placeholder' },
    })
    // As a writer that does not mask (another library, a hand-made INSERT) leaves it.
    db.exec(
      "UPDATE shedlock_runs SET error_message = 'could not connect to postgres://bob:S3cretPW@db/x', node = 'node-x password=S3cretPW' WHERE name = 'leaky'",
    )
    const dashboard = await running()
    for (const path of ['', '?fragment=main', '?window=hour', 'healthz']) {
      const answer = await call(`${dashboard.url}${path}`)
      expect(answer.body, path).not.toContain('S3cretPW')
      expect(answer.body, path).toContain('postgres://bob:***@db/x')
    }
  })

  it('says which table failed, with the whole advice to create it', async () => {
    const missing = { ...store, runLedger: sqliteRunLedger({ database: db, tableName: 'missing_runs' }) }
    const dashboard = await running({ stores: [missing] })
    const page = unentity((await call(dashboard.url)).body)
    expect(page).not.toContain('could not list the locks')
    expect(page).toContain(
      'runs: sqlite: could not read the run history: table missing_runs does not exist. Create it with:</p><pre>CREATE TABLE IF NOT EXISTS missing_runs (',
    )
    expect(page).toContain('CREATE INDEX IF NOT EXISTS missing_runs_name_started ON missing_runs (name, started_at);')
    const health = await call(`${dashboard.url}healthz`)
    expect(health.status).toBe(503)
    const [error] = (JSON.parse(health.body) as { stores: { errors: string[] }[] }).stores[0]!.errors
    expect(error).toMatch(
      /^runs: sqlite: could not read the run history: table missing_runs does not exist\. Create it with: CREATE TABLE/,
    )
    // On one line, as `shedlock status --json` prints it, but whole.
    expect(error).toContain(sqliteRunsSchema({ tableName: 'missing_runs' }).replace(/\s*\n\s*/g, ' '))
    expect(error).not.toContain('\n')
  })

  it('answers /healthz with the fields docs/dashboard.md shows', async () => {
    const dashboard = await running({ maxAge: '1h' })
    const report = JSON.parse((await call(`${dashboard.url}healthz`)).body) as {
      stores: { tasks: Record<string, unknown>[] }[]
    }
    const docs = readFileSync(new URL('../../docs/dashboard.md', import.meta.url), 'utf8')
    const section = docs.slice(docs.indexOf('## Health endpoint'))
    const shown = JSON.parse(/```json\n([\s\S]*?)```/.exec(section)![1]!) as typeof report
    const keys = (o: object) => Object.keys(o).sort()
    expect(keys(shown)).toEqual(keys(report))
    expect(keys(shown.stores[0]!)).toEqual(keys(report.stores[0]!))
    const task = report.stores[0]!.tasks.find((t) => t.name === 'leaky')!
    expect(keys(shown.stores[0]!.tasks[0]!)).toEqual(keys(task))
    expect(keys(shown.stores[0]!.tasks[0]!.lastFailure as object)).toEqual(keys(task.lastFailure as object))
  })
})
