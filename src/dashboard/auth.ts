import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { isIP } from 'node:net'
import { LockConfigurationError } from '../core/errors.ts'

/**
 * Who may open the dashboard. Give a user and password (HTTP basic auth), a bearer token, or
 * both (either is accepted). Without any, only requests from this host (loopback) are served.
 */
export interface DashboardAuth {
  /** Basic auth user name; needs `password`. */
  readonly user?: string | undefined
  readonly password?: string | undefined
  /** A bearer token (`Authorization: Bearer <token>`). At least 16 characters. */
  readonly token?: string | undefined
}

/**
 * The auth of the environment: `SHEDLOCK_DASHBOARD_USER` and `SHEDLOCK_DASHBOARD_PASSWORD`,
 * `SHEDLOCK_DASHBOARD_TOKEN`; `undefined` when none is set.
 */
export function authFromEnv(env: NodeJS.ProcessEnv = process.env): DashboardAuth | undefined {
  const auth = {
    user: env.SHEDLOCK_DASHBOARD_USER,
    password: env.SHEDLOCK_DASHBOARD_PASSWORD,
    token: env.SHEDLOCK_DASHBOARD_TOKEN,
  }
  return auth.user === undefined && auth.password === undefined && auth.token === undefined ? undefined : auth
}

/** Checks an auth's shape; `undefined` when it has no credential at all. @throws LockConfigurationError naming the fix. */
export function checkAuth(auth: DashboardAuth | undefined): DashboardAuth | undefined {
  if (auth === undefined) return undefined
  const { user, password, token } = auth
  if ((user === undefined) !== (password === undefined) || user === '' || password === '') {
    throw new LockConfigurationError(
      'dashboard auth: give both a user and a password (SHEDLOCK_DASHBOARD_USER and SHEDLOCK_DASHBOARD_PASSWORD), or neither',
    )
  }
  if (user?.includes(':')) throw new LockConfigurationError('dashboard auth: a basic auth user name cannot contain ":"')
  if (token !== undefined && token.length < 16) {
    throw new LockConfigurationError(
      'dashboard auth: the bearer token is shorter than 16 characters; use a random one, e.g. `openssl rand -hex 24`',
    )
  }
  return user === undefined && token === undefined ? undefined : auth
}

/** True for 127.0.0.0/8, ::1 and IPv4-mapped loopback addresses, and for `localhost`. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false
  const bare = address.replace(/^\[|\]$/g, '')
  if (bare === 'localhost' || bare === '::1') return true
  const v4 = bare.startsWith('::ffff:') ? bare.slice(7) : bare
  return isIP(v4) === 4 && v4.startsWith('127.')
}

/**
 * Who made the request, for the audit line, when `auth` lets it in; `undefined` when it does not.
 * Without auth, only a loopback client is let in.
 */
export function authenticate(request: IncomingMessage, auth: DashboardAuth | undefined): string | undefined {
  const from = request.socket.remoteAddress
  if (auth === undefined) return isLoopback(from) ? `anonymous@${from}` : undefined
  const header = request.headers.authorization ?? ''
  const [scheme, value = ''] = header.split(' ', 2)
  if (auth.token !== undefined && scheme?.toLowerCase() === 'bearer' && same(value.trim(), auth.token))
    return `token@${from}`
  if (auth.user !== undefined && scheme?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value.trim(), 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon > 0 && same(decoded.slice(0, colon), auth.user) && same(decoded.slice(colon + 1), auth.password ?? ''))
      return `${auth.user}@${from}`
  }
  return undefined
}

/** Compares secrets in constant time (hashes first, so that lengths do not leak either). */
function same(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest())
}

/** How long a release form's token is good for, in milliseconds: 5 minutes. */
export const RELEASE_TOKEN_MS: number = 5 * 60_000

// Bounds the memory a client that reloads without end can take: the oldest tokens go first.
const MAX_TOKENS = 10_000

/**
 * CSRF tokens for the release forms: random, each bound to who asked for it and to what it may
 * do (its scope), good for {@link RELEASE_TOKEN_MS} and for one post only. A page of another site
 * cannot read one; a token read by a page that should not have had it (a DNS rebinding, a shared
 * screen) is soon of no use; and a hand-made form cannot reuse a confirmation's token for another lock.
 */
export class CsrfTokens {
  readonly #tokens = new Map<string, { readonly who: string; readonly scope: string; readonly expires: number }>()

  /** A new token of `who` (as {@link authenticate} names them, address aside) for `scope`. */
  issue(who: string, scope: string): string {
    const now = Date.now()
    // Every token lives as long, so the Map's order (insertion) is the order of expiry.
    for (const [token, entry] of this.#tokens) {
      if (entry.expires > now && this.#tokens.size < MAX_TOKENS) break
      this.#tokens.delete(token)
    }
    const token = randomBytes(24).toString('base64url')
    this.#tokens.set(token, { who: identity(who), scope, expires: now + RELEASE_TOKEN_MS })
    return token
  }

  /** True when `token` was issued to `who` for `scope` and has not expired. Either way, it is used up. */
  take(who: string, token: unknown, scope: string): boolean {
    if (typeof token !== 'string') return false
    const entry = this.#tokens.get(token)
    if (entry === undefined) return false
    this.#tokens.delete(token)
    return entry.expires > Date.now() && entry.who === identity(who) && entry.scope === scope
  }
}

// The address is left out: a client behind NAT or a proxy may come from another one between two requests.
function identity(who: string): string {
  return who.slice(0, who.lastIndexOf('@'))
}
