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
// `"password": "..."` (JSON), `password: '...'` (util.inspect): after a colon, only a quoted value
// counts, so that prose ("token: expired") is left alone.
const KEY_COLON = new RegExp(String.raw`(["']?)(${KEY})\1\s*:\s*(${QUOTED})`, 'dgi')

type Span = readonly [start: number, end: number]

/**
 * The password of every `scheme://user:password@host` in `text`: everything between the first `:`
 * after `//` and the last `@` of the URL, as a WHATWG parser reads a raw `@` in a password (the
 * last one ends the userinfo). A URL without `:` before its `@` has a user and no password
 * (`postgres://app@db/app`), and one whose text after `//` starts with `[` an IPv6 host.
 */
function urlPasswordSpans(text: string): Span[] {
  const spans: Span[] = []
  for (const match of text.matchAll(URL_TOKEN)) {
    const token = match[1]!
    const start = match.index + match[0].length - token.length
    const at = token.lastIndexOf('@')
    if (at <= 0 || token.startsWith('[')) continue
    const colon = token.indexOf(':')
    if (colon < 0 || colon >= at - 1) continue
    spans.push([start + colon + 1, start + at])
  }
  return spans
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
