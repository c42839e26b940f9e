import { UsageError } from './command.ts'

/** The stores the CLI can open, one per file in `stores/`. */
export type StoreScheme = 'postgres' | 'mysql' | 'sqlite' | 'redis' | 'mongodb' | 'dynamodb' | 'etcd' | 'zookeeper' | 'nats' | 'memcached'

/** A parsed `--url`. Print {@link StoreUrl.redacted}, never `raw`. */
export interface StoreUrl {
  readonly scheme: StoreScheme
  /** As given: may hold a password. Only drivers get it. */
  readonly raw: string
  /** `raw` with its password replaced by `***`: what output and errors show. */
  readonly redacted: string
  /** The parsed URL; `undefined` for `sqlite:PATH` and for URLs the WHATWG parser refuses (MongoDB host lists). */
  readonly url: URL | undefined
}

const SCHEMES: Readonly<Record<string, StoreScheme>> = {
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
  'mysql:': 'mysql',
  'mariadb:': 'mysql',
  'sqlite:': 'sqlite',
  'redis:': 'redis',
  'rediss:': 'redis',
  'mongodb:': 'mongodb',
  'mongodb+srv:': 'mongodb',
  'dynamodb:': 'dynamodb',
  'etcd:': 'etcd',
  'zookeeper:': 'zookeeper',
  'nats:': 'nats',
  'memcached:': 'memcached',
}

/** What `--help` texts list as accepted URLs. */
export const URL_FORMS = `  postgres://USER[:PASSWORD]@HOST[:PORT]/DB   (also postgresql://)
  mysql://USER[:PASSWORD]@HOST[:PORT]/DB      (also mariadb://)
  sqlite:PATH                                 (sqlite:///abs/path too)
  redis://[:PASSWORD@]HOST[:PORT][/DB][?environment=E&keyPrefix=P]  (also rediss://)
  mongodb://[USER:PASSWORD@]HOST[:PORT]/DB    (also mongodb+srv://)
  dynamodb://[HOST:PORT][?region=R&table=T]   (HOST:PORT: a local http endpoint)
  etcd://HOST:PORT[?environment=E]
  zookeeper://HOST:PORT[/CHROOT][?path=/shedlock]
  nats://HOST:PORT[?bucket=shedlock-locks]
  memcached://HOST:PORT[?environment=E]`

// Passwords and other secrets, as given and percent-decoded: every line the CLI prints passes
// through redactSecrets(), which replaces them, so that a driver error quoting the URL or the
// password cannot leak one.
const secrets = new Set<string>()

// scheme://user:password@ anywhere in a text (also in driver messages about other URLs).
const USERINFO = /([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*):([^@\s/]*)@/gi
// Query parameters that carry secrets in the drivers' URL formats.
const SECRET_PARAMETER = /^(password|passwd|pass|secret|token|sslpassword|authtoken|aws_secret_access_key|secretaccesskey)$/i

/**
 * Parses a store URL, remembers its secrets for {@link redactSecrets}, and picks the store.
 * @throws UsageError for an empty URL or an unknown scheme, naming the accepted ones.
 */
export function parseStoreUrl(raw: string): StoreUrl {
  const text = raw.trim()
  if (text === '') throw new UsageError('the store URL is empty; pass --url URL or set SHEDLOCK_URL')
  rememberSecrets(text)
  let redacted = redactUrl(text)
  // nats://TOKEN@host: NATS takes a token in place of the user, with no password after it.
  const token = /^nats:\/\/([^:/@\s]+)@/i.exec(text)?.[1]
  if (token) {
    rememberSecret(token)
    redacted = redacted.replace(`//${token}@`, '//***@')
  }
  const protocol = /^([a-z][a-z0-9+.-]*:)/i.exec(text)?.[1]?.toLowerCase()
  const scheme = protocol === undefined ? undefined : SCHEMES[protocol]
  if (!scheme) {
    throw new UsageError(
      `unknown store URL ${JSON.stringify(redacted)}: use postgres://, postgresql://, mysql://, mariadb://, sqlite:PATH, redis://, rediss://, mongodb://, mongodb+srv://, dynamodb://, etcd://, zookeeper://, nats:// or memcached://`,
    )
  }
  let url: URL | undefined
  if (scheme !== 'sqlite') {
    try {
      url = new URL(text)
    } catch {
      // MongoDB host lists (h1:27017,h2:27017) are not WHATWG URLs; the driver parses them.
      if (scheme !== 'mongodb') throw new UsageError(`${JSON.stringify(redacted)} is not a valid URL; see the URL forms in shedlock --help`)
    }
  }
  return { scheme, raw: text, redacted, url }
}

/** `raw` with the password of every `scheme://user:password@` and every secret query parameter replaced by `***`. */
export function redactUrl(raw: string): string {
  const withoutPassword = raw.replace(USERINFO, '$1:***@')
  const query = withoutPassword.indexOf('?')
  if (query < 0) return withoutPassword
  const hashAt = withoutPassword.indexOf('#', query)
  const end = hashAt < 0 ? withoutPassword.length : hashAt
  const params = withoutPassword
    .slice(query + 1, end)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=')
      return equals > 0 && SECRET_PARAMETER.test(pair.slice(0, equals)) ? `${pair.slice(0, equals)}=***` : pair
    })
  return `${withoutPassword.slice(0, query + 1)}${params.join('&')}${withoutPassword.slice(end)}`
}

/** `text` with every remembered secret, and the password of any URL in it, replaced by `***`. */
export function redactSecrets(text: string): string {
  let out = text.replace(USERINFO, '$1:***@')
  // Longest first, so that a secret containing another is replaced whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join('***')
  return out
}

function rememberSecrets(text: string): void {
  for (const match of text.matchAll(USERINFO)) if (match[2]) rememberSecret(match[2])
  const query = text.indexOf('?')
  if (query >= 0) {
    for (const pair of text.slice(query + 1).split(/[&#]/)) {
      const equals = pair.indexOf('=')
      if (equals > 0 && SECRET_PARAMETER.test(pair.slice(0, equals))) rememberSecret(pair.slice(equals + 1))
    }
  }
}

function rememberSecret(value: string): void {
  // Replacing one or two characters everywhere would garble every line; such a password is
  // still redacted wherever it appears in a URL, by pattern.
  if (value.length < 3) return
  secrets.add(value)
  try {
    const decoded = decodeURIComponent(value)
    if (decoded.length >= 3) secrets.add(decoded)
    const encoded = encodeURIComponent(decoded)
    if (encoded.length >= 3) secrets.add(encoded)
  } catch {
    // Not valid percent-encoding: the value as given is enough.
  }
}

/**
 * The path of a `sqlite:` URL: `sqlite:PATH` (relative or absolute) or `sqlite:///abs/path`.
 * @throws UsageError when it is empty.
 */
export function sqlitePath(url: StoreUrl): string {
  let path = url.raw.slice('sqlite:'.length)
  if (path.startsWith('//')) path = path.slice(2)
  if (path === '') throw new UsageError('sqlite: URL without a path; use sqlite:PATH, e.g. sqlite:./locks.db or sqlite:///var/lib/app/locks.db')
  return path
}

/**
 * The query parameters of a URL whose scheme the CLI defines (no driver reads them).
 * @throws UsageError for a parameter not in `allowed` or given twice.
 */
export function ownParameters(url: StoreUrl, allowed: readonly string[]): Map<string, string> {
  const found = new Map<string, string>()
  for (const [key, value] of url.url?.searchParams ?? []) {
    if (!allowed.includes(key)) {
      throw new UsageError(`${url.scheme} URLs take ${allowed.length === 0 ? 'no query parameters' : `only ${allowed.map((a) => `?${a}=`).join(', ')}`}, got ?${key}= in ${url.redacted}`)
    }
    if (found.has(key)) throw new UsageError(`?${key}= appears twice in ${url.redacted}`)
    found.set(key, value)
  }
  return found
}

/**
 * `HOST:PORT` of a URL, with the default port when none is given.
 * @throws UsageError when the URL has a path, user or password the store cannot use.
 */
export function hostAndPort(url: StoreUrl, defaultPort: number, options: { allowPath?: boolean } = {}): { host: string; port: number } {
  const parsed = url.url
  if (!parsed || parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use ${url.scheme}://HOST:PORT`)
  if (parsed.username !== '' || parsed.password !== '') throw new UsageError(`${url.scheme} URLs take no user or password, got ${url.redacted}`)
  if (!options.allowPath && parsed.pathname !== '' && parsed.pathname !== '/') throw new UsageError(`${url.scheme} URLs take no path, got ${url.redacted}`)
  return { host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'), port: parsed.port === '' ? defaultPort : Number(parsed.port) }
}

/**
 * The store URL of a command: `--url`, else the `SHEDLOCK_URL` environment variable.
 * @throws UsageError when neither is set.
 */
export function storeUrlOption(values: Record<string, string | boolean | undefined>): StoreUrl {
  const given = typeof values.url === 'string' ? values.url : process.env.SHEDLOCK_URL
  if (given === undefined || given.trim() === '') {
    throw new UsageError('no store: pass --url URL or set SHEDLOCK_URL, e.g. --url postgres://app@db.internal/app')
  }
  return parseStoreUrl(given)
}

/** Help text of the `--url` and `--table` options, shared by the commands. */
export const URL_HELP: string = `  --url URL      the lock store (default: $SHEDLOCK_URL), e.g. postgres://app@db/app,
                 redis://cache:6379, sqlite:./locks.db; "shedlock --help" lists
                 every form
  --table NAME   SQL table, MongoDB collection or DynamoDB table
                 (default: shedlock; MongoDB: shedLock; DynamoDB: Shedlock)`
