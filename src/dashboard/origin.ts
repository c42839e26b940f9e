import type { IncomingMessage } from 'node:http'
import { isIP } from 'node:net'
import { LockConfigurationError } from '../core/errors.ts'
import { isLoopback } from './auth.ts'

// DNS rebinding: a page of the attacker's domain, once that name resolves to this host, reaches
// the dashboard with the attacker's name in `Host` and in `Origin`. Neither header can then be
// trusted to vouch for the other: both are checked against what the dashboard itself knows, the
// address the connection came in on and the public URLs it was given.

/** Where a request may name the dashboard by (`Host`) and come from (`Origin`). */
export interface Audience {
  /** `hostname port` pairs, hostname lowercased and without brackets. */
  readonly hosts: ReadonlySet<string>
  /** `scheme: hostname port` triples, as {@link originKey} makes them. */
  readonly origins: ReadonlySet<string>
}

/** A `Host` header: a name or IPv4 address, or a bracketed IPv6 address, and an optional port. */
const HOST_HEADER = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?$/i

/**
 * The `publicUrl` option as URLs. @throws LockConfigurationError for anything but an http(s) URL.
 */
export function publicUrlsOf(given: string | readonly string[] | undefined): readonly URL[] {
  if (given === undefined) return []
  const list = typeof given === 'string' ? [given] : given
  if (!Array.isArray(list))
    throw new LockConfigurationError('createDashboard(): publicUrl must be a URL or a list of URLs')
  return list.map((text: unknown) => {
    let url: URL | undefined
    try {
      url = typeof text === 'string' ? new URL(text) : undefined
    } catch {}
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
      throw new LockConfigurationError(
        `createDashboard(): publicUrl ${JSON.stringify(text)} is not an http(s) URL; give the address people open the dashboard at, e.g. https://ops.example.com/shedlock/`,
      )
    }
    return url
  })
}

/**
 * Who `request` may name and come from: the address its connection came in on (and `localhost`,
 * `127.0.0.1`, `[::1]`, `0.0.0.0` and `[::]` when that address is loopback, as for a server on
 * 0.0.0.0 reached over loopback), at the port it came in on; and every public URL's host and origin.
 */
export function audienceOf(request: IncomingMessage, publicUrls: readonly URL[]): Audience {
  const hosts = new Set<string>()
  const origins = new Set<string>()
  for (const url of publicUrls) {
    const port = url.port || defaultPort(url.protocol)
    hosts.add(hostKey(url.hostname, port))
    origins.add(originKey(url.protocol, url.hostname, port))
  }
  const socket = request.socket as (IncomingMessage['socket'] & { encrypted?: boolean }) | undefined
  const local = socket?.localAddress
  const port = socket?.localPort
  if (local !== undefined && port !== undefined) {
    const address = local.startsWith('::ffff:') && isIP(local.slice(7)) === 4 ? local.slice(7) : local
    // 0.0.0.0 and [::] too: the address startDashboard() prints for a server on all interfaces,
    // which clients connect to over loopback (an address, not a name an attacker could own).
    const names = isLoopback(address) ? [address, '127.0.0.1', 'localhost', '::1', '0.0.0.0', '::'] : [address]
    const scheme = socket?.encrypted === true ? 'https:' : 'http:'
    for (const name of names) {
      hosts.add(hostKey(name, String(port)))
      origins.add(originKey(scheme, name, String(port)))
    }
  }
  return { hosts, origins }
}

/** True when the `Host` header names the dashboard (a missing one names nothing). */
export function hostAllowed(host: string | undefined, audience: Audience): boolean {
  const match = HOST_HEADER.exec(host ?? '')
  if (!match) return false
  const name = match[1]!
  // Without a port, the browser used the default one of the scheme, which the header does not say.
  const ports = match[2] === undefined ? ['80', '443'] : [String(Number(match[2]))]
  return ports.some((port) => audience.hosts.has(hostKey(name, port)))
}

/**
 * True when a form post comes from the dashboard's own page: its `Origin` (or, without one, its
 * `Referer`) is one of the audience's origins. A post with neither header (not a browser's) passes:
 * the CSRF token still has to match.
 */
export function originAllowed(request: IncomingMessage, audience: Audience): boolean {
  const origin = request.headers.origin ?? request.headers.referer
  if (origin === undefined) return true
  try {
    const url = new URL(origin)
    return audience.origins.has(originKey(url.protocol, url.hostname, url.port || defaultPort(url.protocol)))
  } catch {
    return false
  }
}

/** What the refusal of a foreign `Host` says: which names the dashboard answers to, and the fix. */
export function foreignHostMessage(host: string | undefined, audience: Audience): string {
  const known = [...audience.hosts].map((key) => {
    const [name, port] = key.split(' ') as [string, string]
    return `${name.includes(':') ? `[${name}]` : name}:${port}`
  })
  const shown = host === undefined ? 'no Host header' : `host ${JSON.stringify(host.slice(0, 200))}`
  return `shedlock dashboard: refused a request for ${shown}: this dashboard answers only to ${known.length > 0 ? known.join(', ') : 'its public URLs (none is set)'}. A page of another name may be a DNS rebinding attack. If people open the dashboard by another name (a DNS name, a reverse proxy), give it as a public URL: --public-url https://NAME/ (the publicUrl option; see docs/dashboard.md)\n`
}

function defaultPort(protocol: string): string {
  return protocol === 'https:' ? '443' : '80'
}

function bare(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '').toLowerCase()
}

function hostKey(hostname: string, port: string): string {
  return `${bare(hostname)} ${port}`
}

function originKey(protocol: string, hostname: string, port: string): string {
  return `${protocol} ${hostKey(hostname, port)}`
}
