import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import type { OperatorProviders } from './operator-action.ts'
import { pauseOf } from '../core/pause.ts'
import { redact } from '../core/redact.ts'
import { statusRowJson } from '../status/health-json.ts'
import { type Staleness, staleness } from '../status/staleness.ts'
import { DEFAULT_IGNORE_OLDER_THAN, DEFAULT_OVERDUE_GRACE } from '../status/verdict.ts'
import { authenticate, checkAuth, CsrfTokens, type DashboardAuth } from './auth.ts'
import { methodNotAllowed, send, sendText } from './http.ts'
import { audienceOf, foreignHostMessage, hostAllowed, originAllowed, publicUrlsOf } from './origin.ts'
import { type PageInput, renderConfirm, renderMain, renderPage } from './page.ts'
import { operatorProviders, postAction } from './actions.ts'
import { CONFIRM_SCOPE, releaseScope } from './release.ts'
import { type DashboardStore, type ReadChecks, readStore, type StoreSnapshot } from './snapshot.ts'
import { readTask, renderTaskMain, taskQueryOf } from './task-page.ts'
import { type DashboardWindow, readSpanMs, windowMs, windowOf } from './window.ts'

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
   * The address(es) people open the dashboard at, when it is not the address it listens on: a DNS
   * name, or a reverse proxy's URL, e.g. `'https://ops.example.com/shedlock/'` (scheme, name and
   * port count; the path does not). Every request must name, in its `Host` header, the address its
   * connection came in on (with `localhost`, `127.0.0.1` and `[::1]` for a loopback one) or one of
   * these; any other is refused with 421, as a DNS rebinding attack would be. A release form must
   * come from one of these origins or from the address the dashboard is reached at.
   * @default none: the dashboard answers to its listening address only
   */
  publicUrl?: string | readonly string[]
  /**
   * Show a force-release button per held lock (with a confirmation page and CSRF protection); each
   * release writes an audit line. Each form's token is good once, for 5 minutes (`RELEASE_TOKEN_MS`).
   * @default false (read-only)
   */
  allowRelease?: boolean
  /**
   * Show Pause… and Resume… buttons on the task locks of each store that has a `provider`: a pause
   * (for a duration, or until resumed, with a reason) is what `shedlock pause` takes, a resume what
   * `shedlock resume` does; each behind a confirmation page and CSRF protection, with an audit
   * line. A running task cannot be paused.
   * @default false (read-only)
   */
  allowPause?: boolean
  /**
   * Show a Run now… button on the task locks of each store that has a `provider`: what `shedlock
   * trigger` asks for (one run now, on a replica whose executor polls for triggers, through the
   * task's lock), behind a confirmation, with an audit line. A paused task cannot be triggered.
   */
  allowTrigger?: boolean
  /** Where audit lines go (who released, paused or resumed which lock, when). @default console.warn */
  audit?: (line: string) => void
  /** Seconds between live refreshes of the page; 0 turns them off. @default 5 */
  refreshSeconds?: number
  /** The page's title. @default "shedlock" */
  title?: string
  /**
   * The timeline's window when the page's address names none (its links add `?window=`): `'auto'`
   * fits it to the tasks' period, as long as the busiest task's last 40 runs take, between 1 hour
   * and 1 day; `'hour'`, `'day'` or `'week'` fix it. @default "auto"
   */
  window?: DashboardWindow
  /**
   * Tasks whose last run is older than this are left out (as `shedlock status --ignore-older-than`),
   * unless `maxAge` names them; 0 leaves none out. @default "7d"
   */
  ignoreOlderThan?: Duration
  /**
   * How late past its next fire time (as its latest run recorded it) a task reads as overdue, in
   * milliseconds or a duration string (as `shedlock status --grace`): flagged on the page, and
   * `/healthz` answers 503. @default "1m"
   */
  overdueGrace?: Duration
}

/**
 * The verdict of `/healthz`: per store, its label, what could not be read, and the verdict of
 * `shedlock status --json` (its `stale`, `failing`, `ignored` and `tasks`); and whether all is well.
 */
export interface HealthReport {
  /** False when `shedlock status` would exit 1 for a store: a task checked is stale or failing, or the store could not be read. */
  readonly healthy: boolean
  /** This host's now, ISO-8601 UTC. */
  readonly now: string
  readonly stores: readonly {
    readonly store: string
    /**
     * What could not be read, one line each: `locks: ` or `runs: `, then the store's whole message
     * (a missing table's "Create it with:" and its CREATE TABLE included), secrets masked.
     */
    readonly errors: readonly string[]
    readonly stale: readonly string[]
    readonly overdue: readonly string[]
    readonly failing: readonly string[]
    readonly ignored: readonly string[]
    /** As `shedlock status --json` prints them. */
    readonly tasks: readonly Record<string, unknown>[]
  }[]
}

/** A request handler for `node:http` (and Express, Fastify, NestJS), with the health check beside it. */
export interface DashboardHandler {
  /** Serves the page (any path), `…/healthz` and the action forms. Never rejects: errors become a 500 page. */
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
 * Without `auth`, it serves loopback clients only. With or without, it answers only requests whose
 * `Host` is the address they came in on or a `publicUrl` (421 otherwise: DNS rebinding). Times are
 * the stores' (UTC).
 *
 * @throws LockConfigurationError for no stores, bad durations or a bad auth.
 */
export function createDashboard(options: DashboardOptions): DashboardHandler {
  const settings = validate(options)
  const csrf = new CsrfTokens()
  const health = async (): Promise<HealthReport> => {
    const snapshots = await Promise.all(settings.stores.map((store) => readStore(store, settings.checks, Date.now())))
    return healthOf(snapshots)
  }
  const handler = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    try {
      await serve(request, response, settings, csrf, health)
    } catch (error) {
      if (!response.headersSent) sendText(response, 500, `shedlock dashboard failed: ${redact(messageOf(error))}\n`)
      else response.end()
    }
  }
  return Object.assign(handler, { health })
}

interface Settings {
  readonly stores: readonly DashboardStore[]
  readonly auth: DashboardAuth | undefined
  readonly publicUrls: readonly URL[]
  readonly allowRelease: boolean
  /** Per store: its provider, where pausing is on and the store has one. */
  readonly pausers: OperatorProviders
  /** Per store: its provider, where triggering is on and the store has one. */
  readonly triggerers: OperatorProviders
  readonly audit: (line: string) => void
  readonly refreshSeconds: number
  readonly title: string
  readonly checks: ReadChecks
  readonly window: DashboardWindow
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
  const window = windowOf(options.window ?? 'auto')
  if (window === undefined)
    throw new LockConfigurationError(
      `createDashboard(): window must be 'auto', 'hour', 'day' or 'week', got ${JSON.stringify(options.window)}`,
    )
  const pausers = operatorProviders(options.stores, options.allowPause === true, 'allowPause')
  const triggerers = operatorProviders(options.stores, options.allowTrigger === true, 'allowTrigger')
  const refreshSeconds = options.refreshSeconds ?? 5
  if (!Number.isFinite(refreshSeconds) || refreshSeconds < 0)
    throw new LockConfigurationError(`createDashboard(): refreshSeconds must be 0 or more, got ${refreshSeconds}`)
  return {
    stores: options.stores,
    checks: {
      stale: staleOf(options.maxAge),
      ignoreOlderThan: parseDuration(options.ignoreOlderThan ?? DEFAULT_IGNORE_OLDER_THAN),
      overdueGrace: parseDuration(options.overdueGrace ?? DEFAULT_OVERDUE_GRACE),
    },
    auth: checkAuth(options.auth),
    publicUrls: publicUrlsOf(options.publicUrl),
    allowRelease: options.allowRelease === true,
    pausers,
    triggerers,
    audit: options.audit ?? ((line) => console.warn(line)),
    refreshSeconds,
    title: options.title ?? 'shedlock',
    window,
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
    // One line each, as `shedlock status --json` prints them; the page shows the advice's lines.
    errors: snapshot.errors.map((error) => error.replace(/\s*\n\s*/g, ' ')),
    stale: snapshot.staleNames,
    overdue: snapshot.overdueNames,
    failing: snapshot.failingNames,
    ignored: snapshot.ignored,
    tasks: (snapshot.tasks ?? []).map((row) => statusRowJson(row, pauseOf(row.lock))),
  }))
  const healthy = stores.every(
    (store) =>
      store.errors.length === 0 && store.stale.length === 0 && store.overdue.length === 0 && store.failing.length === 0,
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
  // Before anything else, auth included: the answer to a rebound name must tell that page nothing.
  const audience = audienceOf(request, settings.publicUrls)
  if (!hostAllowed(request.headers.host, audience))
    return sendText(response, 421, foreignHostMessage(request.headers.host, audience))
  const who = authenticate(request, settings.auth)
  if (who === undefined) {
    if (settings.auth === undefined) {
      return sendText(
        response,
        403,
        'shedlock dashboard: this dashboard has no authentication, so it serves this host only; set a user and password or a token (see docs/dashboard.md)\n',
      )
    }
    response.setHeader('www-authenticate', `Basic realm="shedlock", charset="UTF-8"`)
    return sendText(response, 401, 'shedlock dashboard: authentication required\n')
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
  const window = windowOf(url.searchParams.get('window')) ?? settings.window
  const pause = settings.pausers.map((pauser) => pauser !== undefined)
  const trigger = settings.triggerers.map((triggerer) => triggerer !== undefined)
  const actions =
    settings.allowRelease || pause.includes(true) || trigger.includes(true)
      ? { release: settings.allowRelease, pause, trigger }
      : undefined
  const filter = (url.searchParams.get('q') ?? '').slice(0, 200)
  const nonce = randomBytes(16).toString('base64')
  const read = (): Promise<StoreSnapshot[]> =>
    Promise.all(settings.stores.map((store) => readStore(store, settings.checks, Date.now() - readSpanMs(window))))
  const input = (stores: readonly StoreSnapshot[], token: string | undefined, notice?: string): PageInput => ({
    title: settings.title,
    stores,
    window,
    windowMs: windowMs(window, stores),
    healthHref: healthHrefOf(request),
    filter,
    csrf: token,
    actions,
    refreshSeconds: settings.refreshSeconds,
    nonce,
    notice,
  })
  const pageToken = (): string | undefined => (actions ? csrf.issue(who, CONFIRM_SCOPE) : undefined)
  if (request.method === 'POST') {
    if (!actions)
      return sendText(
        response,
        403,
        'shedlock dashboard: read-only; start it with --allow-release, --allow-pause or --allow-trigger (allowRelease, allowPause, allowTrigger: true) to act on locks\n',
      )
    return postAction(request, response, {
      stores: settings.stores,
      csrf,
      who,
      sameOrigin: originAllowed(request, audience),
      audit: settings.audit,
      nonce,
      allowRelease: settings.allowRelease,
      pausers: settings.pausers,
      triggerers: settings.triggerers,
      pageInput: (token) => input([], token),
      page: async (notice) => renderPage(input(await read(), pageToken(), notice)),
      confirm: async (index, lock) => {
        const scope = releaseScope(index, lock.name, lock.lockedBy ?? '', lock.lockedAt?.toISOString() ?? '')
        const label = redact(settings.stores[index]!.label)
        // The confirmation shows this lock alone: no store is read for it.
        return renderConfirm(input([], csrf.issue(who, scope)), label, lock, index)
      },
    })
  }
  if (request.method !== 'GET' && request.method !== 'HEAD') return methodNotAllowed(response, 'GET, HEAD, POST')
  const task = taskQueryOf(url.searchParams)
  if (task) {
    const store = settings.stores[task.store]
    if (store === undefined) return sendText(response, 404, `shedlock dashboard: no store ${task.store} on this page\n`)
    const main = renderTaskMain(input([], undefined), task, await readTask(store, task.name))
    if (url.searchParams.get('fragment') === 'main') return send(response, 200, 'text/html; charset=utf-8', main, nonce)
    const title = `${task.name} · ${settings.title}`
    return send(response, 200, 'text/html; charset=utf-8', renderPage({ ...input([], undefined), title }, main), nonce)
  }
  const page = input(await read(), pageToken())
  if (url.searchParams.get('fragment') === 'main')
    return send(response, 200, 'text/html; charset=utf-8', renderMain(page), nonce)
  send(response, 200, 'text/html; charset=utf-8', renderPage(page), nonce)
}

/**
 * The health endpoint relative to the page the browser shows. The page's path is the request's,
 * or, where a framework mounted the handler and cut its prefix from `url` (Express), its
 * `originalUrl`: `/shedlock` needs `./shedlock/healthz`, as a bare `healthz` would go to `/healthz`.
 */
function healthHrefOf(request: IncomingMessage): string {
  const original = (request as IncomingMessage & { originalUrl?: unknown }).originalUrl
  const path = new URL(typeof original === 'string' ? original : (request.url ?? '/'), 'http://dashboard.invalid')
    .pathname
  return path.endsWith('/') ? 'healthz' : `./${path.slice(path.lastIndexOf('/') + 1)}/healthz`
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!
}

export type { DashboardWindow }
