import type { IncomingMessage, ServerResponse } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLockingTaskExecutor,
  type ExtensibleLock,
  LockConfigurationError,
  lockConfiguration,
  type SimpleLock,
} from '../../src/index.ts'
import { createDashboard, type RunningDashboard, startDashboard } from '../../src/dashboard/index.ts'
import { loadSqliteDriver, type SqliteConnection } from '../../src/providers/sqlite/driver.ts'
import {
  sqliteLockInspector,
  sqliteLockProvider,
  sqliteRunLedger,
  sqliteRunsSchema,
  sqliteSchema,
} from '../../src/providers/sqlite/index.ts'

// The dashboard's guards, over HTTP on loopback against a SQLite store: who may see it, and who
// may release a lock.

const TOKEN = 'a-token-of-24-characters'

describe('dashboard handler', () => {
  let dir: string
  let db: SqliteConnection
  let stores: Parameters<typeof createDashboard>[0]['stores']
  let held: SimpleLock | undefined

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-dashboard-handler-'))
    db = (await loadSqliteDriver()).open(join(dir, 'locks.db'))
    db.exec(sqliteSchema())
    db.exec(sqliteRunsSchema())
    stores = [
      {
        label: 'sqlite://app:s3cret-pass@host/locks',
        inspector: sqliteLockInspector({ database: db }),
        runLedger: sqliteRunLedger({ database: db }),
      },
    ]
    held = await sqliteLockProvider({ database: db, lockedBy: 'holder' }).lock(
      lockConfiguration({ name: 'job', lockAtMostFor: '10m' }),
    )
  })

  afterAll(() => {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  async function running(options: Partial<Parameters<typeof startDashboard>[0]> = {}): Promise<RunningDashboard> {
    return startDashboard({ stores, port: 0, refreshSeconds: 0, audit: () => undefined, ...options })
  }

  it('refuses to listen beyond loopback without auth', async () => {
    await expect(running({ host: '0.0.0.0' })).rejects.toThrow(LockConfigurationError)
    await expect(running({ host: '0.0.0.0' })).rejects.toThrow(/SHEDLOCK_DASHBOARD_TOKEN/)
    const open = await running({ host: '0.0.0.0', auth: { token: TOKEN } })
    await open.close()
  })

  it('serves a non-loopback client only with auth', async () => {
    const handler = createDashboard({ stores })
    const answer = await call(handler, { remoteAddress: '10.1.2.3', localAddress: '10.0.0.1' })
    expect(answer.status).toBe(403)
    expect(answer.body).toMatch(/serves this host only/)
    expect((await call(handler, { remoteAddress: '127.0.0.1', localAddress: '127.0.0.1' })).status).toBe(200)
  })

  it('asks for basic auth or a bearer token when given one, and never shows the URL password', async () => {
    const dashboard = await running({ auth: { user: 'ops', password: 'pw-of-ops', token: TOKEN } })
    try {
      const none = await fetch(dashboard.url)
      expect(none.status).toBe(401)
      expect(none.headers.get('www-authenticate')).toMatch(/^Basic /)
      expect(
        (await fetch(dashboard.url, { headers: { authorization: 'Bearer wrong-token-of-24-chars!' } })).status,
      ).toBe(401)
      const bearer = await fetch(dashboard.url, { headers: { authorization: `Bearer ${TOKEN}` } })
      expect(bearer.status).toBe(200)
      const page = await bearer.text()
      expect(page).toContain('sqlite://app:***@host/locks')
      expect(page).not.toContain('s3cret-pass')
      const basic = await fetch(`${dashboard.url}healthz`, {
        headers: { authorization: `Basic ${Buffer.from('ops:pw-of-ops').toString('base64')}` },
      })
      expect(basic.status).toBe(200)
    } finally {
      await dashboard.close()
    }
  })

  it('is read-only by default, and releases only with a valid CSRF token from the same origin', async () => {
    const readOnly = await running()
    try {
      expect(await (await fetch(readOnly.url)).text()).not.toContain('Release…')
      const post = await fetch(readOnly.url, {
        method: 'POST',
        body: new URLSearchParams({ lock: 'job', store: '0', step: 'release' }),
      })
      expect(post.status).toBe(403)
    } finally {
      await readOnly.close()
    }
    const audit: string[] = []
    const dashboard = await running({ allowRelease: true, audit: (line) => audit.push(line) })
    try {
      const fieldOf = (page: string, name: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(page)![1]!
      const page = await (await fetch(dashboard.url)).text()
      const csrf = fieldOf(page, 'csrf')
      const lockedAt = fieldOf(page, 'lockedAt')
      const lockedBy = fieldOf(page, 'lockedBy')
      const form = (fields: Record<string, string>) =>
        new URLSearchParams({ store: '0', lock: 'job', lockedBy, lockedAt, step: 'confirm', ...fields })
      expect((await fetch(dashboard.url, { method: 'POST', body: form({ csrf: 'forged' }) })).status).toBe(403)
      const otherSite = await fetch(dashboard.url, {
        method: 'POST',
        body: form({ csrf }),
        headers: { origin: 'https://evil.example' },
      })
      expect(otherSite.status).toBe(403)
      // The acquisition as read: a release of another one (another lockedAt) frees nothing.
      const stale = await fetch(dashboard.url, {
        method: 'POST',
        body: form({ csrf, lockedAt: new Date(0).toISOString() }),
      })
      expect(await stale.text()).toContain('changed since the page showed it')
      expect((await stores[0]!.inspector.get('job'))?.held).toBe(true)
      // Each form is good once: the next step needs the token of a new page.
      const fresh = fieldOf(await (await fetch(dashboard.url)).text(), 'csrf')
      const confirm = await (await fetch(dashboard.url, { method: 'POST', body: form({ csrf: fresh }) })).text()
      expect(confirm).toContain('Release lock “job”?')
      // The holder renews its lease between the page and the confirmation: the same acquisition.
      held = await (held as ExtensibleLock).extend(600_000, 0)
      expect(held, 'the holder extended its lock').toBeDefined()
      expect((await stores[0]!.inspector.get('job'))?.held).toBe(true)
      const done = await fetch(dashboard.url, {
        method: 'POST',
        body: form({ csrf: fieldOf(confirm, 'csrf'), step: 'release' }),
        headers: { origin: dashboard.url.replace(/\/$/, '') },
      })
      expect(await done.text()).toContain('Released lock &quot;job&quot;')
      expect((await stores[0]!.inspector.get('job'))?.held).toBe(false)
      expect(audit).toEqual([
        expect.stringMatching(
          /anonymous@127\.0\.0\.1 released lock "job" of sqlite:\/\/app:\*\*\*@host\/locks \(held by holder:/,
        ),
      ])
    } finally {
      await dashboard.close()
    }
  })

  it('triggers a task with allowTrigger behind a confirmation and a token scoped to it; never a paused task', async () => {
    const provider = (lockedBy: string) => sqliteLockProvider({ database: db, lockedBy })
    expect(() => createDashboard({ stores, allowTrigger: true })).toThrow(/allowTrigger needs a store with a provider/)
    await (await provider('node-a').lock(lockConfiguration({ name: 'hourly', lockAtMostFor: '1m' })))!.unlock()
    const audit: string[] = []
    const dashboard = await running({
      stores: [{ ...stores[0]!, provider }],
      allowTrigger: true,
      audit: (line) => audit.push(line),
    })
    const post = async (fields: Record<string, string>) =>
      (await fetch(dashboard.url, { method: 'POST', body: new URLSearchParams({ store: '0', ...fields }) })).text()
    const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)![1]!
    try {
      const page = await (await fetch(dashboard.url)).text()
      expect(page).toContain('aria-label="Run hourly now…"')
      expect(page, 'pausing is off').not.toContain('Pause…')
      const confirm = await post({ csrf: csrfOf(page), lock: 'hourly', step: 'trigger-confirm' })
      expect(confirm).toContain('Run task “hourly” now?')
      expect(await post({ csrf: csrfOf(confirm), lock: 'other', step: 'trigger' }), 'scoped to the task').toContain(
        'CSRF check failed',
      )
      const again = await post({
        csrf: csrfOf(await (await fetch(dashboard.url)).text()),
        lock: 'hourly',
        step: 'trigger-confirm',
      })
      // Nobody polls here: the trigger is placed and left pending, and the page says so.
      expect(await post({ csrf: csrfOf(again), lock: 'hourly', step: 'trigger' })).toContain(
        'Triggered task &quot;hourly&quot;: no replica has picked it up within 5 s.',
      )
      expect((await stores[0]!.inspector.get('hourly@trigger'))?.lockedBy).toMatch(
        /^triggered by anonymous@127\.0\.0\.1:/,
      )
      expect(audit).toEqual([expect.stringMatching(/anonymous@127\.0\.0\.1 triggered task "hourly" of /)])
      // A paused task is refused (every replica would find its lock held).
      await provider('paused by ops — freeze').lock(lockConfiguration({ name: 'frozen', lockAtMostFor: '1h' }))
      const refused = await post({
        csrf: csrfOf(await (await fetch(dashboard.url)).text()),
        lock: 'frozen',
        step: 'trigger-confirm',
      })
      expect(refused).toContain('Task &quot;frozen&quot; is paused by ops')
      expect(refused).toContain('resume it first; not triggered.')
    } finally {
      await dashboard.close()
    }
  })

  it('pauses and resumes a task with allowPause, each behind a confirmation and a single-use token, never a running one', async () => {
    const provider = (lockedBy: string) => sqliteLockProvider({ database: db, lockedBy })
    const pausable = [{ ...stores[0]!, provider }]
    expect(() => createDashboard({ stores, allowPause: true })).toThrow(/allowPause needs a store with a provider/)
    // A task that ran once (its lock free now), and one that is running.
    await (await provider('node-a').lock(lockConfiguration({ name: 'nightly', lockAtMostFor: '1m' })))!.unlock()
    const busy = await provider('node-b').lock(lockConfiguration({ name: 'busy', lockAtMostFor: '10m' }))
    const audit: string[] = []
    const dashboard = await running({ stores: pausable, allowPause: true, audit: (line) => audit.push(line) })
    const post = async (fields: Record<string, string>) =>
      (await fetch(dashboard.url, { method: 'POST', body: new URLSearchParams({ store: '0', ...fields }) })).text()
    const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)![1]!
    try {
      const page = await (await fetch(dashboard.url)).text()
      expect(page).toContain('aria-label="Pause nightly…"')
      expect(page).not.toContain('aria-label="Pause busy…"')
      expect(page, 'releasing is off').not.toContain('Release…')
      expect(await post({ csrf: csrfOf(page), lock: 'busy', step: 'pause-confirm' })).toContain(
        'Task &quot;busy&quot; is running',
      )
      const confirm = await post({
        csrf: csrfOf(await (await fetch(dashboard.url)).text()),
        lock: 'nightly',
        step: 'pause-confirm',
      })
      expect(confirm).toContain('Pause task “nightly”?')
      // A newline in the reason would forge an audit line: it becomes a space.
      const pauseForm = { csrf: csrfOf(confirm), lock: 'nightly', step: 'pause', for: '1h', reason: 'deploy\nfreeze' }
      expect(await post(pauseForm)).toContain('Paused task &quot;nightly&quot; for 1h')
      expect(await post(pauseForm), 'a token is good once').toContain('CSRF check failed')
      const record = await stores[0]!.inspector.get('nightly')
      expect(record?.lockedBy).toMatch(/^paused by anonymous@127\.0\.0\.1 — deploy freeze/)
      const executor = createLockingTaskExecutor(provider('node-c'))
      expect(await executor.executeWithLock(() => undefined, { name: 'nightly', lockAtMostFor: '1m' })).toEqual({
        executed: false,
        reason: 'paused',
      })
      const paused = await (await fetch(dashboard.url)).text()
      expect(paused).toContain('<span class="badge paused">paused</span>')
      const resume = await post({
        csrf: csrfOf(paused),
        lock: 'nightly',
        lockedBy: record!.lockedBy!,
        lockedAt: record!.lockedAt!.toISOString(),
        step: 'resume-confirm',
      })
      expect(resume).toContain('Resume task “nightly”?')
      const resumeFields = Object.fromEntries(
        [...resume.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!]),
      )
      expect(
        await post({ ...resumeFields, lockedAt: new Date(0).toISOString() }),
        'the scope names the pause',
      ).toContain('CSRF check failed')
      const fresh = await post({
        csrf: csrfOf(await (await fetch(dashboard.url)).text()),
        lock: 'nightly',
        lockedBy: record!.lockedBy!,
        lockedAt: record!.lockedAt!.toISOString(),
        step: 'resume-confirm',
      })
      const fields = Object.fromEntries(
        [...fresh.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!]),
      )
      expect(await post(fields)).toContain('Resumed task &quot;nightly&quot;')
      expect((await stores[0]!.inspector.get('nightly'))?.held).toBe(false)
      expect((await executor.executeWithLock(() => undefined, { name: 'nightly', lockAtMostFor: '1m' })).executed).toBe(
        true,
      )
      expect(audit).toEqual([
        expect.stringMatching(
          /anonymous@127\.0\.0\.1 paused task "nightly" of sqlite:\/\/app:\*\*\*@host\/locks for 1h \(deploy freeze\)$/,
        ),
        expect.stringMatching(
          /anonymous@127\.0\.0\.1 resumed task "nightly" of .* \(paused by anonymous@127\.0\.0\.1\)$/,
        ),
      ])
    } finally {
      await dashboard.close()
      await busy?.unlock()
    }
  })
  it('says of a store without a run ledger where runs come from: its noHistoryNote, or the runLedger option', async () => {
    const { runLedger: _ledger, ...locksOnly } = stores[0]!
    const dashboard = await running({
      stores: [locksOnly, { ...locksOnly, label: 'second', noHistoryNote: 'this one is read from a cron log.' }],
    })
    try {
      const html = await (await fetch(dashboard.url)).text()
      expect(html).toContain(
        'This store keeps no run history: tasks and runs are shown for a store given a run ledger (the runLedger option).',
      )
      expect(html).toContain('This store keeps no run history: this one is read from a cron log.')
    } finally {
      await dashboard.close()
    }
  })

  it('says on the page, not as a 500, when a store cannot hold a pause', async () => {
    const refusing = [
      {
        ...stores[0]!,
        provider: (): never => {
          throw new Error('memcached cannot hold a pause: its locks keep no holder name')
        },
      },
    ]
    const dashboard = await running({ stores: refusing, allowPause: true })
    try {
      const post = async (fields: Record<string, string>) =>
        fetch(dashboard.url, { method: 'POST', body: new URLSearchParams({ store: '0', lock: 'weekly', ...fields }) })
      const csrf = /name="csrf" value="([^"]+)"/.exec(await (await fetch(dashboard.url)).text())![1]!
      const confirm = await (await post({ csrf, step: 'pause-confirm' })).text()
      const token = /name="csrf" value="([^"]+)"/.exec(confirm)![1]!
      const paused = await post({ csrf: token, step: 'pause', for: '', reason: '' })
      expect(paused.status).toBe(200)
      expect(await paused.text()).toContain(
        'Task &quot;weekly&quot; was not paused: memcached cannot hold a pause: its locks keep no holder name',
      )
    } finally {
      await dashboard.close()
    }
  })
})

/**
 * Calls the handler with a request from `remoteAddress` to `localAddress` (port 7070, in `Host` too),
 * without a socket: the address is what is tested.
 */
async function call(
  handler: ReturnType<typeof createDashboard>,
  options: { remoteAddress: string; localAddress: string },
): Promise<{ status: number; body: string }> {
  const request = {
    url: '/',
    method: 'GET',
    headers: { host: `${options.localAddress}:7070` },
    socket: { remoteAddress: options.remoteAddress, localAddress: options.localAddress, localPort: 7070 },
  } as unknown as IncomingMessage
  let body = ''
  const response = {
    statusCode: 0,
    headersSent: false,
    setHeader: () => undefined,
    end: (text?: string) => {
      body = text ?? ''
    },
  }
  await handler(request, response as unknown as ServerResponse)
  return { status: response.statusCode, body }
}
