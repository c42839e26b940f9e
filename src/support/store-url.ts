import { UsageError } from './admin-errors.ts'
import { passwordSpanOfUrl, redact, redactSoleUrl } from '../core/redact.ts'

/** A parsed store URL. Print {@link StoreUrl.redacted}, never `raw`. */
export interface StoreUrl {
  /** The store's id in the registry, e.g. `postgres` for `postgresql://` URLs too. */
  readonly scheme: string
  /** As given: may hold a password. Only drivers get it. */
  readonly raw: string
  /** `raw` with its password replaced by `***`: what output and errors show. */
  readonly redacted: string
  /** The parsed URL; `undefined` for `sqlite:PATH` and for URLs the WHATWG parser refuses (MongoDB host lists). */
  readonly url: URL | undefined
}

/** How a store's URLs are parsed: as WHATWG URLs (the default), not at all (`sqlite:PATH`), or where possible (MongoDB host lists). */
export type UrlParsing = 'url' | 'opaque' | 'lenient'

// Passwords and other secrets, as given and percent-decoded: every line the CLI prints passes
// through redactSecrets(), which replaces them, so that a driver error quoting the URL or the
// password cannot leak one.
const secrets = new Set<string>()

// Query parameters that carry secrets in the drivers' URL formats.
const SECRET_PARAMETER =
  /^(password|passwd|pass|secret|token|sslpassword|authtoken|aws_secret_access_key|secretaccesskey)$/i

/**
 * Parses the URL of store `id` (its scheme already recognised), and remembers its secrets for
 * {@link redactSecrets}.
 * @throws UsageError for a URL the WHATWG parser refuses, where the store needs one.
 */
export function parseStoreUrl(text: string, id: string, parsing: UrlParsing = 'url'): StoreUrl {
  rememberSecrets(text)
  let redacted = redactUrl(text)
  // nats://TOKEN@host: NATS takes a token in place of the user, with no password after it.
  const token = /^nats:\/\/([^:/@\s]+)@/i.exec(text)?.[1]
  if (token) {
    rememberSecret(token)
    redacted = redacted.replace(`//${token}@`, '//***@')
  }
  const password = passwordOf(text)
  // A raw '/', '?' or '#' ends the authority for a URL parser: the driver would read part of the
  // password as the host (and look it up in DNS, and print it in its errors).
  if (parsing !== 'opaque' && password !== undefined && /[/?#]/.test(password)) {
    throw new UsageError(
      `${JSON.stringify(redacted)}: the password holds a raw "/", "?" or "#", which ends the host part of a URL; percent-encode them (%2F, %3F, %23), and an "@" in the path or query (%40)`,
    )
  }
  if (parsing !== 'opaque') checkPercentEscapes(text, redacted)
  let url: URL | undefined
  if (parsing !== 'opaque') {
    try {
      url = new URL(text)
    } catch {
      if (parsing !== 'lenient')
        throw new UsageError(`${JSON.stringify(redacted)} is not a valid URL; see the URL forms in shedlock --help`)
    }
  }
  return { scheme: id, raw: text, redacted, url }
}

/** `raw`, a URL given alone, with its password (spaces and all) and every secret query parameter replaced by `***` (see `redact()`). */
export function redactUrl(raw: string): string {
  return redactSoleUrl(raw)
}

/** `text` with every remembered secret, and every secret `redact()` recognises, replaced by `***`. */
export function redactSecrets(text: string): string {
  let out = redact(text)
  // Longest first, so that a secret containing another is replaced whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join('***')
  return out
}

/** The password of a URL given alone, as written there. */
function passwordOf(url: string): string | undefined {
  const span = passwordSpanOfUrl(url)
  return span && url.slice(span[0], span[1])
}

/**
 * Drivers percent-decode the URL with `decodeURIComponent()`, which fails on a `%` not followed by
 * two hexadecimal digits with "URI malformed", naming neither the URL nor the place.
 * @throws UsageError naming the redacted URL, where the bad escape is and the fix; in the user name
 * or the password (a NATS token is a user name), its position, not its characters.
 */
function checkPercentEscapes(text: string, redacted: string): void {
  const bad = /%(?![0-9a-f]{2})/i.exec(text)
  if (!bad) return
  const fix = 'percent-encode a "%" that stands for itself as %25'
  const span = passwordSpanOfUrl(text)
  const userStart = /^[a-z][a-z0-9+.-]*:\/\//i.exec(text)?.[0].length ?? 0
  const userEnd = span ? span[0] - 1 : text.lastIndexOf('@')
  const inPart =
    span && bad.index >= span[0] && bad.index < span[1]
      ? { part: 'password', from: span[0] }
      : bad.index >= userStart && bad.index < userEnd
        ? { part: 'user name', from: userStart }
        : undefined
  if (inPart) {
    throw new UsageError(
      `${JSON.stringify(redacted)}: the ${inPart.part} holds a "%" that is not a percent escape (% and two hexadecimal digits), at its character ${bad.index - inPart.from + 1}; ${fix}`,
    )
  }
  throw new UsageError(
    `${JSON.stringify(redacted)}: ${JSON.stringify(text.slice(bad.index, bad.index + 3))} is not a percent escape (% and two hexadecimal digits); ${fix}`,
  )
}

function rememberSecrets(text: string): void {
  const password = passwordOf(text)
  if (password !== undefined) {
    rememberSecret(password)
    // A driver that splits the URL at another '@', ':' or '/' than we do would print the rest.
    for (let i = 0; i < password.length; i++) {
      if ('@:/?#'.includes(password[i]!)) {
        rememberSecret(password.slice(0, i))
        rememberSecret(password.slice(i + 1))
      }
    }
  }
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
  const forms = [value]
  try {
    const decoded = decodeURIComponent(value)
    forms.push(decoded, encodeURIComponent(decoded))
  } catch {
    // Not valid percent-encoding: the value as given is enough.
  }
  // As a form encodes a space: 'correct+horse'.
  for (const form of [...forms]) if (form.includes(' ')) forms.push(form.replaceAll(' ', '+'))
  // As --json output escapes it (a '"' or '\\' in a password).
  for (const form of [...forms]) forms.push(JSON.stringify(form).slice(1, -1))
  for (const form of forms) if (form.length >= 3) secrets.add(form)
}

/**
 * The query parameters of a URL whose scheme the CLI defines (no driver reads them).
 * @throws UsageError for a parameter not in `allowed` or given twice.
 */
export function ownParameters(url: StoreUrl, allowed: readonly string[]): Map<string, string> {
  const found = new Map<string, string>()
  for (const [key, value] of url.url?.searchParams ?? []) {
    if (!allowed.includes(key)) {
      throw new UsageError(
        `${url.scheme} URLs take ${allowed.length === 0 ? 'no query parameters' : `only ${allowed.map((a) => `?${a}=`).join(', ')}`}, got ?${key}= in ${url.redacted}`,
      )
    }
    if (found.has(key)) throw new UsageError(`?${key}= appears twice in ${url.redacted}`)
    found.set(key, value)
  }
  return found
}
