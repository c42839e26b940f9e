// Secrets in free text (error messages, driver messages, logs): the password of a URL and the
// value of a `password=`-style setting. Both are found by pattern on the original text and every
// span either finds is replaced, so that one reading's mistake cannot show what the other hides:
// `postgres://h:1/db?password=p@ss` read as a URL has the userinfo `h:1/db?password=p`, and only
// the union of the two spans hides all of `p@ss`.

// A URL from its `scheme://` to the next whitespace, `<`, `>`, backquote or unescaped `"` (the end
// of a JSON string). A raw password may hold `@`, `:`, `/`, `?` and `#`, so the authority's usual
// ends (`/`, `?`, `#`) cannot end it; group 1 is what follows `//`.
const URL_TOKEN = /[a-z][a-z0-9+.-]*:\/\/((?:\\.|[^\s"<>`\\])*)/gi

// Keys whose value is a secret: `password`, `sslpassword`, `client_secret`, `access_token`,
// `api_key`, `aws_secret_access_key`, `secretAccessKey`, `pwd`, `pass`... A key must end with one
// of these words and not be part of a longer word or dotted name on its left. A fencing token
// (`fencingToken`, `fencing_token`) is a lock's public sequence number, shown on purpose.
const KEY = String.raw`(?<![\w.-])(?!fencing[_-]?token\b)(?:[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)|pwd|pass)`
const QUOTED = String.raw`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"`
// `key=value`: a query parameter (up to `&`), a libpq setting (`password='it''s'`, up to
// whitespace), a setting of a `;`-separated connection string.
const KEY_EQUALS = new RegExp(String.raw`(${KEY})\s*=\s*(${QUOTED}|[^\s&;"]+)`, 'dgi')
// `?password=...` or `&token=...` in the query of a URL given alone: up to the next `&` or `#`.
const QUERY_SECRET = new RegExp(`([?&](?:${KEY})=)[^&#]*`, 'gi')
// `"password": "..."` (JSON), `password: '...'` (util.inspect): after a colon, only a quoted value
// counts, so that prose ("token: expired") is left alone.
const KEY_COLON = new RegExp(String.raw`(["']?)(${KEY})\1\s*:\s*(${QUOTED})`, 'dgi')

type Span = readonly [start: number, end: number]

// What can follow the `@` that ends a userinfo: a host name or an IPv6 literal, then the end of
// the authority, of the text, or of the sentence around it (`'root'@'localhost'` is no host).
const HOST_AFTER_AT = /^@(?:[a-z0-9_~-][a-z0-9_.~-]*|\[[0-9a-f:.]+\])(?=[:/?#\s,;)'"]|$)/i
// A `:` followed by a port (`db:5432/app`, `db:5432 refused`, `db:5432, then`): a host, no
// password (a password of digits then a space or punctuation is taken for a port too).
const PORT = /^\d+(?:[^\w%@~-]|$)/

/**
 * The password of every `scheme://user:password@host` in `text`: everything between the first `:`
 * after `//` and the last `@` of the URL, as a WHATWG parser reads a raw `@` in a password (the
 * last one ends the userinfo). A URL without `:` before its `@` has a user and no password
 * (`postgres://app@db/app`), and one whose text after `//` starts with `[` an IPv6 host. A raw
 * space ends the URL's text, unless no `@` came before it: then the password may hold spaces
 * (pg and mysql2 accept `postgres://u:correct horse@db/app`), and it runs to the last `@` of the
 * line that a host follows (see {@link spacedPasswordEnd}).
 */
function urlPasswordSpans(text: string): Span[] {
  const spans: Span[] = []
  for (const match of text.matchAll(URL_TOKEN)) {
    const token = match[1]!
    const start = match.index + match[0].length - token.length
    if (token.startsWith('[')) continue
    const at = token.lastIndexOf('@')
    const colon = token.indexOf(':')
    if (colon < 0) continue
    if (at >= 0) {
      if (colon < at - 1) spans.push([start + colon + 1, start + at])
      continue
    }
    if (/[/?#]/.test(token.slice(0, colon)) || PORT.test(token.slice(colon + 1))) continue
    const end = spacedPasswordEnd(text, start + token.length)
    if (end !== undefined) spans.push([start + colon + 1, end])
  }
  return spans
}

/**
 * Where a password that holds whitespace ends: the last `@` followed by a host, from `from` to the
 * end of the line, the next `://` (another URL) or the end of a JSON string (an unescaped `"`);
 * `undefined` when there is none (`postgres://db:x refused` has no password). Taking the last
 * such `@` may hide some prose after the password, never part of the password.
 */
function spacedPasswordEnd(text: string, from: number): number | undefined {
  let found: number | undefined
  for (let i = from; i < text.length; i++) {
    const c = text[i]!
    if (c === '\\') i++
    else if (c === '\n' || c === '\r' || c === '"' || c === '<' || c === '>' || c === '`') break
    else if (c === ':' && text.startsWith('//', i + 1)) break
    else if (c === '@' && HOST_AFTER_AT.test(text.slice(i, i + 300))) found = i
  }
  return found
}

/** The values of `password=...`, `"token": "..."` and the like in `text`, inside their quotes. */
function keyValueSpans(text: string): Span[] {
  const spans: Span[] = []
  for (const [pattern, group] of [
    [KEY_EQUALS, 2],
    [KEY_COLON, 3],
  ] as const) {
    for (const match of text.matchAll(pattern)) {
      let [start, end] = match.indices![group]!
      const first = text[start]
      if ((first === '"' || first === "'") && end - start >= 2 && text[end - 1] === first) {
        start++
        end--
      }
      if (end > start) spans.push([start, end])
    }
  }
  return spans
}

/**
 * `text` with every secret it recognises replaced by `***`: the password of each
 * `scheme://user:password@host` (raw `@`, `:`, `/` in it included; percent-encoded ones are
 * plain characters), and the value of each `password=`, `pwd=`, `passwd=`, `pass=`, `secret=`,
 * `token=`, `api_key=`, `access_key=` (and longer keys ending so, such as `sslpassword` or
 * `aws_secret_access_key`), quoted or not, and of each `"password": "..."`. The user of a URL is
 * kept. Every error text shedlock stores or prints passes through here; the CLI also replaces
 * the exact secrets of the URL it was given (`redactSecrets()` in `support/store-url.ts`).
 */
export function redact(text: string): string {
  if (!text.includes('://') && !/pass|pwd|secret|token|key/i.test(text)) return text
  const spans = [...urlPasswordSpans(text), ...keyValueSpans(text)].sort((a, b) => a[0] - b[0])
  if (spans.length === 0) return text
  let out = ''
  let at = 0
  let open: [number, number] | undefined
  const flush = (): void => {
    if (!open) return
    out += `${text.slice(at, open[0])}***`
    at = open[1]
  }
  for (const [start, end] of spans) {
    if (open && start <= open[1]) open[1] = Math.max(open[1], end)
    else {
      flush()
      open = [start, end]
    }
  }
  flush()
  return out + text.slice(at)
}

/**
 * The passwords of the URLs in `text` as written there (for `password@` forms, all of what
 * {@link redact} hides), so that a caller can also hide them where a driver quotes them alone.
 */
export function urlPasswords(text: string): string[] {
  return urlPasswordSpans(text).map(([start, end]) => text.slice(start, end))
}

/**
 * The password of `url`, a URL given alone, as `[start, end)` offsets into it; `undefined` when it
 * has none. All of `url` is the URL, whitespace and quotes included: the password runs from the
 * first `:` after `//` to the last `@`, as {@link redact} reads a URL within a line of text.
 */
export function passwordSpanOfUrl(url: string): readonly [start: number, end: number] | undefined {
  const slashes = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)
  if (!slashes || url[slashes[0].length] === '[') return undefined
  const start = slashes[0].length
  const at = url.lastIndexOf('@')
  const colon = url.indexOf(':', start)
  if (at < start || colon < 0 || colon >= at - 1) return undefined
  return [colon + 1, at]
}

/**
 * `url`, a URL given alone, with its password (see {@link passwordSpanOfUrl}), the values of its
 * secret query parameters (`?password=correct horse&`, spaces included) and every secret
 * {@link redact} recognises replaced by `***`. What output shows of a store URL.
 */
export function redactSoleUrl(url: string): string {
  const span = passwordSpanOfUrl(url)
  const masked = span ? `${url.slice(0, span[0])}***${url.slice(span[1])}` : url
  // In a URL given alone, a secret parameter's value runs to the next `&` or `#`, spaces included.
  const query = masked.indexOf('?')
  return redact(query < 0 ? masked : masked.slice(0, query) + masked.slice(query).replace(QUERY_SECRET, '$1***'))
}
