import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { type Duration, formatDuration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { redact } from '../core/redact.ts'
import { DEFAULT_IGNORE_OLDER_THAN, type Staleness, staleness } from '../cli/status.ts'
import { healthJson } from '../cli/history.ts'
import { authenticate, checkAuth, CsrfTokens, type DashboardAuth } from './auth.ts'
import { type PageInput, renderConfirm, renderMain, renderPage } from './page.ts'
import { type DashboardStore, type DashboardWindow, readStore, type StoreSnapshot, WINDOW_MS } from './snapshot.ts'

/** Options of {@link createDashboard}. */
export interface DashboardOptions {
  /** The stores to show, on one page. At least one. */
  stores: readonly DashboardStore[]
  /**
   * The maximum age of each task's last success: a task older than its age is stale (as
   * `shedlock status --stale`). A duration for every task, or `{ taskName: duration, '*': duration }`
   * (milliseconds or strings like "26h"). @default no maximum: a task is stale never, failing after a failed run
   */
  maxAge?: Duration | Readonly<Record<string, Duration>>
  /**
   * Who may see the page: basic auth, a bearer token, or both. Without it, only requests from
   * this host (loopback addresses) are served, whatever address the server listens on.
   * @default no auth (loopback only)
   */
  auth?: DashboardAuth
  /**
   * Show a force-release button per held lock (with a confirmation page and CSRF protection); each
   * release writes an audit line. @default false (read-only)
   */
  allowRelease?: boolean
  /** Where audit lines go (who released which lock, when). @default console.warn */
  audit?: (line: string) => void
  /** Seconds between live refreshes of the page; 0 turns them off. @default 5 */
  refreshSeconds?: number
  /** The page's title. @default "shedlock" */
  title?: string
  /**
   * Tasks whose last run is older than this are left out (as `shedlock status --ignore-older-than`),
   * unless `maxAge` names them; 0 leaves none out. @default "7d"
   */
  ignoreOlderThan?: Duration
}

/** The verdict of `/healthz`: `shedlock status --json` per store, and whether all is well. */
export interface HealthReport {
  /** False when `shedlock status` would exit 1 for a store: a task checked is stale or failing, or the store could not be read. */
  readonly healthy: boolean
  /** This host's now, ISO-8601 UTC. */
  readonly now: string
  readonly stores: readonly {
    readonly store: string
    /** Why the store could not be read, one line each. */
    readonly errors: readonly string[]
    readonly stale: readonly string[]
    readonly failing: readonly string[]
    readonly ignored: readonly string[]
    /** As `shedlock status --json` prints them. */
    readonly tasks: readonly Record<string, unknown>[]
  }[]
}

/** A request handler for `node:http` (and Express, Fastify, NestJS), with the health check beside it. */
export interface DashboardHandler {
  /** Serves the page (any path), `…/healthz` and the release form. Never rejects: errors become a 500 page. */
  (request: IncomingMessage, response: ServerResponse): Promise<void>
  /** The health verdict, for an app's own health route: serve it with HTTP 200 when `healthy`, else 503. */
  health(): Promise<HealthReport>
}

/**
 * A dashboard of locks, tasks and runs, as a request handler. Mount it in any `node:http` server
 * (or Express, Fastify, NestJS: see docs/dashboard.md):
 *
 * ```ts
 * import { createServer } from 'node:http'
 * import { createDashboard } from 'shedlock/dashboard'
 * import { postgresLockInspector, postgresRunLedger } from 'shedlock/postgres'
 * import pg from 'pg'
 *
 * const client = new pg.Pool()
 * const dashboard = createDashboard({ stores: [{ label: 'orders', inspector: postgresLockInspector({ client }), runLedger: postgresRunLedger({ client }) }] })
 * createServer(dashboard).listen(8080, '127.0.0.1')
 * ```
 *
 * The page is HTML and SVG made on the server, readable with JavaScript off; it needs no CDN.
 * Without `auth`, it serves loopback clients only. Times are the stores' (UTC).
 *
 * @throws LockConfigurationError for no stores, bad durations or a bad auth.
 */
export function createDashboard(options: DashboardOptions): DashboardHandler {
  const settings = validate(options)
  const csrf = new CsrfTokens()
  const health = async (): Promise<HealthReport> => {
    const snapshots = await Promise.all(
      settings.stores.map((store) => readStore(store, settings.stale, settings.ignoreOlderThan, Date.now())),
    )
    return healthOf(snapshots)
  }
  const handler = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    try {
      await serve(request, response, settings, csrf, health)
    } catch (error) {
      if (!response.headersSent)
        send(response, 500, 'text/plain; charset=utf-8', `shedlock dashboard failed: ${redact(messageOf(error))}\n`)
      else response.end()
    }
  }
  return Object.assign(handler, { health })
}

interface Settings {
  readonly stores: readonly DashboardStore[]
  readonly stale: Staleness
  readonly auth: DashboardAuth | undefined
  readonly allowRelease: boolean
  readonly audit: (line: string) => void
  readonly refreshSeconds: number
  readonly title: string
  readonly ignoreOlderThan: number
}

function validate(options: DashboardOptions): Settings {
  if (
    options === null ||
    typeof options !== 'object' ||
    !Array.isArray(options.stores) ||
    options.stores.length === 0
  ) {
    throw new LockConfigurationError(
      'createDashboard() needs stores: [{ label, inspector, runLedger? }], e.g. inspector: postgresLockInspector({ client })',
    )
  }
  for (const [i, store] of options.stores.entries()) {
    if (typeof store?.inspector?.list !== 'function') {
      throw new LockConfigurationError(
        `createDashboard(): stores[${i}].inspector is not a LockInspector; pass one from the store's subpath, e.g. postgresLockInspector({ client })`,
      )
    }
  }
  const refreshSeconds = options.refreshSeconds ?? 5
  if (!Number.isFinite(refreshSeconds) || refreshSeconds < 0)
    throw new LockConfigurationError(`createDashboard(): refreshSeconds must be 0 or more, got ${refreshSeconds}`)
  return {
    stores: options.stores,
    stale: staleOf(options.maxAge),
    auth: checkAuth(options.auth),
    allowRelease: options.allowRelease === true,
    audit: options.audit ?? ((line) => console.warn(line)),
    refreshSeconds,
    title: options.title ?? 'shedlock',
    ignoreOlderThan: parseDuration(options.ignoreOlderThan ?? DEFAULT_IGNORE_OLDER_THAN),
  }
}

function staleOf(maxAge: DashboardOptions['maxAge']): Staleness {
  if (maxAge === undefined) return { byName: new Map(), all: undefined }
  if (typeof maxAge === 'number' || typeof maxAge === 'string') return { byName: new Map(), all: parseDuration(maxAge) }
  const byName = new Map<string, number>()
  let all: number | undefined
  for (const [name, age] of Object.entries(maxAge)) {
    const ms = parseDuration(age)
    if (name === '*') all = ms
    else byName.set(name, ms)
  }
  return { byName, all }
}

/** `--stale` values of the CLI as `maxAge`. */
export function maxAgeOfStale(given: readonly string[]): Record<string, Duration> {
  const { byName, all } = staleness(given)
  const out: Record<string, Duration> = Object.fromEntries(byName)
  if (all !== undefined) out['*'] = all
  return out
}

function healthOf(snapshots: readonly StoreSnapshot[]): HealthReport {
  const stores = snapshots.map((snapshot) => ({
    store: snapshot.label,
    errors: snapshot.errors,
    stale: snapshot.staleNames,
    failing: snapshot.failingNames,
    ignored: snapshot.ignored,
    tasks: (snapshot.tasks ?? []).map(({ task, state, maxAge }) => ({
      ...healthJson(task),
      state,
      maxAge: maxAge === undefined ? null : formatDuration(maxAge),
    })),
  }))
  const healthy = stores.every(
    (store) => store.errors.length === 0 && store.stale.length === 0 && store.failing.length === 0,
  )
  return { healthy, now: new Date().toISOString(), stores }
}

async function serve(
  request: IncomingMessage,
  response: ServerResponse,
  settings: Settings,
  csrf: CsrfTokens,
  health: () => Promise<HealthReport>,
): Promise<void> {
  const who = authenticate(request, settings.auth)
  if (who === undefined) {
    if (settings.auth === undefined) {
      send(
        response,
        403,
        'text/plain; charset=utf-8',
        'shedlock dashboard: this dashboard has no authentication, so it serves this host only; set a user and password or a token (see docs/dashboard.md)\n',
      )
    } else {
      response.setHeader('www-authenticate', `Basic realm="shedlock", charset="UTF-8"`)
      send(response, 401, 'text/plain; charset=utf-8', 'shedlock dashboard: authentication required\n')
    }
    return
  }
  const url = new URL(request.url ?? '/', 'http://dashboard.invalid')
  if (url.pathname.endsWith('/healthz')) {
    if (request.method !== 'GET' && request.method !== 'HEAD') return methodNotAllowed(response, 'GET, HEAD')
    const report = await health()
    send(
      response,
      report.healthy ? 200 : 503,
      'application/json; charset=utf-8',
      `${JSON.stringify(report, null, 2)}\n`,
    )
    return
  }
  const window = (['hour', 'day', 'week'] as const).find((w) => w === url.searchParams.get('window')) ?? 'day'
  const filter = (url.searchParams.get('q') ?? '').slice(0, 200)
  const nonce = randomBytes(16).toString('base64')
  const input = (snapshots: readonly StoreSnapshot[], notice?: string): PageInput => ({
    title: settings.title,
    stores: snapshots,
    window,
    filter,
    csrf: settings.allowRelease ? csrf.issue(who) : undefined,
    refreshSeconds: settings.refreshSeconds,
    nonce,
    notice,
  })
  const read = (): Promise<StoreSnapshot[]> =>
    Promise.all(
      settings.stores.map((store) =>
        readStore(store, settings.stale, settings.ignoreOlderThan, Date.now() - WINDOW_MS[window]),
      ),
    )
  if (request.method === 'POST') {
    if (!settings.allowRelease)
      return send(
        response,
        403,
        'text/plain; charset=utf-8',
        'shedlock dashboard: read-only; start it with --allow-release (allowRelease: true) to release locks\n',
      )
    const form = await readForm(request)
    if (!sameOrigin(request) || !csrf.verify(who, form.get('csrf'))) {
      return send(
        response,
        403,
        'text/plain; charset=utf-8',
        'shedlock dashboard: the form is stale or came from another site (CSRF check failed); reload the page and try again\n',
      )
    }
    const index = Number(form.get('store'))
    const store = settings.stores[index]
    const name = form.get('lock') ?? ''
    if (!store || name === '')
      return send(response, 400, 'text/plain; charset=utf-8', 'shedlock dashboard: the form names no lock\n')
    const current = await store.inspector.get(name)
    const unchanged =
      current?.held &&
      (current.lockedBy ?? '') === (form.get('lockedBy') ?? '') &&
      (current.lockUntil?.toISOString() ?? '') === (form.get('lockUntil') ?? '')
    let notice: string
    if (!unchanged)
      notice = `Lock "${name}" changed since the page showed it (or is no longer held): nothing was released. Look again.`
    else if (form.get('step') !== 'release') {
      const snapshots = await read()
      return send(
        response,
        200,
        'text/html; charset=utf-8',
        renderConfirm(input(snapshots), redact(store.label), current, index),
        nonce,
      )
    } else {
      // Only the state read just now is released: if its holder extended it or another node took
      // it since, release(record) changes nothing, and the old holder's late release cannot free
      // the new holder either (the inspector's guarantee).
      const released = await store.inspector.release(current)
      settings.audit(
        `shedlock dashboard: ${new Date().toISOString()} ${who} ${released ? 'released' : 'tried to release'} lock "${name}" of ${redact(store.label)} (held by ${current.lockedBy ?? 'unknown'} until ${current.lockUntil?.toISOString() ?? 'unknown'})${released ? '' : ': it had changed, nothing released'}`,
      )
      notice = released
        ? `Released lock "${name}" (held by ${current.lockedBy ?? 'unknown'}).`
        : `Lock "${name}" changed meanwhile: nothing was released.`
    }
    const snapshots = await read()
    return send(response, 200, 'text/html; charset=utf-8', renderPage(input(snapshots, notice)), nonce)
  }
  if (request.method !== 'GET' && request.method !== 'HEAD') return methodNotAllowed(response, 'GET, HEAD, POST')
  const snapshots = await read()
  if (url.searchParams.get('fragment') === 'main')
    return send(response, 200, 'text/html; charset=utf-8', renderMain(input(snapshots)), nonce)
  send(response, 200, 'text/html; charset=utf-8', renderPage(input(snapshots)), nonce)
}

function send(response: ServerResponse, status: number, type: string, body: string, nonce?: string): void {
  response.statusCode = status
  response.setHeader('content-type', type)
  response.setHeader('cache-control', 'no-store')
  response.setHeader('x-content-type-options', 'nosniff')
  // Not no-referrer: with it, a browser sends `Origin: null` with the form posts, which the CSRF check refuses.
  response.setHeader('referrer-policy', 'same-origin')
  response.setHeader(
    'content-security-policy',
    `default-src 'none'; ${nonce ? `style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; ` : ''}img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
  )
  response.end(body)
}

function methodNotAllowed(response: ServerResponse, allow: string): void {
  response.setHeader('allow', allow)
  send(response, 405, 'text/plain; charset=utf-8', `shedlock dashboard: use ${allow}\n`)
}

/** A browser's form post carries Origin (or at least Referer); from another host, it is refused. */
function sameOrigin(request: IncomingMessage): boolean {
  const origin = request.headers.origin ?? request.headers.referer
  if (origin === undefined || origin === 'null') return origin === undefined
  try {
    return new URL(origin).host === request.headers.host
  } catch {
    return false
  }
}

const MAX_FORM_BYTES = 16_384

/** The url-encoded body of a form post, at most 16 KiB. A framework may have parsed it already (`request.body`). */
async function readForm(request: IncomingMessage): Promise<URLSearchParams> {
  const parsed = (request as IncomingMessage & { body?: unknown }).body
  if (parsed !== undefined && parsed !== null && typeof parsed === 'object' && !Buffer.isBuffer(parsed)) {
    return new URLSearchParams(
      Object.entries(parsed as Record<string, unknown>).map(([k, v]): [string, string] => [k, String(v)]),
    )
  }
  if (typeof parsed === 'string') return new URLSearchParams(parsed)
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of request) {
    size += (chunk as Buffer).length
    if (size > MAX_FORM_BYTES) throw new Error('the form is larger than 16 KiB')
    chunks.push(chunk as Buffer)
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!
}

export type { DashboardWindow }
