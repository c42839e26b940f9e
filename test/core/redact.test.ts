import { describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError } from '../../src/core/errors.ts'
import { passwordSpanOfUrl, redact, redactSoleUrl, urlPasswords } from '../../src/core/redact.ts'
import { runErrorOf } from '../../src/core/run-ledger.ts'

// Each password's pieces between its '@', ':', '/': none may survive, whatever the split.
function pieces(password: string): string[] {
  return password.split(/[@:/]/).filter((piece) => piece.length >= 2)
}

describe('redact: URL passwords', () => {
  it.each([
    ['postgres://app:p@ss@host/db', 'postgres://app:***@host/db', 'p@ss'],
    ['postgres://app:p@ss:w/rd@127.0.0.1:1/db', 'postgres://app:***@127.0.0.1:1/db', 'p@ss:w/rd'],
    ['postgres://app:pa:ss@host:5432/db', 'postgres://app:***@host:5432/db', 'pa:ss'],
    ['postgres://app:pa/ss@host/db', 'postgres://app:***@host/db', 'pa/ss'],
    ['postgres://app:p%40ss@host/db', 'postgres://app:***@host/db', 'p%40ss'],
    ['postgres://app:p%2Fs%3As@host/db', 'postgres://app:***@host/db', 'p%2Fs%3As'],
    ['mysql://root:a@b@c@[::1]:3306/test', 'mysql://root:***@[::1]:3306/test', 'a@b@c'],
    ['redis://:only-s3cret@cache:6379', 'redis://:***@cache:6379', 'only-s3cret'],
    ['mongodb://u:pw@x@h1:1,h2:2/app?replicaSet=rs', 'mongodb://u:***@h1:1,h2:2/app?replicaSet=rs', 'pw@x'],
  ])('%s -> %s', (text, expected, password) => {
    expect(redact(text)).toBe(expected)
    for (const piece of pieces(password)) expect(redact(`connect to ${text} failed`)).not.toContain(piece)
  })

  it('keeps the user of a URL without password, and IPv6 hosts, unchanged', () => {
    for (const text of [
      'postgres://app@host/db',
      'postgres://app@[::1]:5432/db',
      'postgres://[::1]:5432/db',
      'postgres://[::1]:5432/db?application_name=a@b',
      'redis://cache:6379/2',
      'sqlite:./locks.db',
      'http://example.com/a:b',
    ]) {
      expect(redact(text)).toBe(text)
    }
  })

  it('redacts every URL of a text, up to whitespace or the end of a JSON string', () => {
    const text = 'tried postgres://a:p@1@h1/db, then "mysql://b:p:2@h2/db" and {"url":"redis://:p/3@h3","user":"x@y"}'
    expect(redact(text)).toBe(
      'tried postgres://a:***@h1/db, then "mysql://b:***@h2/db" and {"url":"redis://:***@h3","user":"x@y"}',
    )
  })

  it('hides a password whose raw text another reading would split differently', () => {
    // The URL reading ends the userinfo at the last '@' (in the query); the key reading hides
    // the value of ?password=: together they leave no part of p@ss.
    const text = 'postgres://h:1/db?password=p@ss'
    expect(redact(text)).not.toMatch(/p@ss|ss$/)
    expect(redact(text)).toBe('postgres://h:***')
  })

  it('lists the passwords of a text as written', () => {
    expect(urlPasswords('a postgres://app:p@ss:w/rd@h/db and redis://:x%40y@h2 and postgres://u@h3')).toEqual([
      'p@ss:w/rd',
      'x%40y',
    ])
  })
})

describe('redact: passwords with whitespace (pg and mysql2 accept postgres://u:correct horse@db/app)', () => {
  it.each([
    ['postgres://u:correct horse@host/db', 'postgres://u:***@host/db'],
    ['mysql://root:correct\thorse  battery@127.0.0.1:3306/test', 'mysql://root:***@127.0.0.1:3306/test'],
    ['postgres://u:a b@c d@host/db', 'postgres://u:***@host/db'],
    ['postgres://u: leading space@[::1]:5432/db', 'postgres://u:***@[::1]:5432/db'],
    ['redis://:two words@cache:6379', 'redis://:***@cache:6379'],
    [
      "cannot reach MySQL at mysql://root:correct horse@127.0.0.1/test: Access denied for user 'root'@'127.0.0.1' (using password: YES)",
      "cannot reach MySQL at mysql://root:***@127.0.0.1/test: Access denied for user 'root'@'127.0.0.1' (using password: YES)",
    ],
    [
      '{"store":"PostgreSQL postgres://u:correct horse@db/app","errors":["runs: x@y"]}',
      '{"store":"PostgreSQL postgres://u:***@db/app","errors":["runs: x@y"]}',
    ],
    [
      'Redis redis://u:correct horse@cache:6379 (keys job-lock:default:*): 0 tasks',
      'Redis redis://u:***@cache:6379 (keys job-lock:default:*): 0 tasks',
    ],
  ])('%s', (text, expected) => {
    expect(redact(text)).toBe(expected)
    expect(redact(`${text}\nnext line`)).toBe(`${expected}\nnext line`)
  })

  it('leaves hosts with ports and URLs without a password alone, whatever follows on the line', () => {
    for (const text of [
      'connect postgres://db:5432 refused; ask admin@example.com',
      'tried redis://cache:6379, then asked admin@example.com',
      'postgres://db:5432/app failed for bob@example.com',
      'see http://example.com/a:b by x@y.z',
      'postgres://app@db/app: user app@db has no password',
      "mysql://root@127.0.0.1/test: Access denied for user 'root'@'127.0.0.1'",
    ]) {
      expect(redact(text)).toBe(text)
    }
  })

  it('does not reach past the line, the JSON string or the next URL for the end of a password', () => {
    expect(redact('postgres://u:x y\nmail bob@example.com')).toBe('postgres://u:x y\nmail bob@example.com')
    expect(redact('["postgres://u:x y", "bob@example.com"]')).toBe('["postgres://u:x y", "bob@example.com"]')
    expect(redact('postgres://u:x y then redis://:p q@cache')).toBe('postgres://u:x y then redis://:***@cache')
  })

  it('a URL given alone: its password runs to its last "@", quotes and whitespace included', () => {
    const url = 'postgres://u:pa"ss <w>\tord@h/db?sslmode=require&password=q%20r'
    expect(redactSoleUrl(url)).toBe('postgres://u:***@h/db?sslmode=require&password=***')
    const span = passwordSpanOfUrl(url)!
    expect(url.slice(span[0], span[1])).toBe('pa"ss <w>\tord')
    expect(passwordSpanOfUrl('postgres://u@h/db')).toBeUndefined()
    expect(passwordSpanOfUrl('postgres://[::1]:5432/db')).toBeUndefined()
    expect(passwordSpanOfUrl('sqlite:./a b.db')).toBeUndefined()
    expect(redactSoleUrl('redis://cache:6379')).toBe('redis://cache:6379')
    expect(redactSoleUrl('postgres://h/db?sslmode=require&password=correct horse&x=1#y')).toBe(
      'postgres://h/db?sslmode=require&password=***&x=1#y',
    )
  })
})

describe('redact: key=value secrets', () => {
  it.each([
    ['host=db user=app password=p@ss:w/rd dbname=app', 'host=db user=app password=*** dbname=app'],
    ["host=db password='it\\'s p@ss' dbname=app", "host=db password='***' dbname=app"],
    ['{"user":"app","password":"p@ss\\"w/rd","db":"x"}', '{"user":"app","password":"***","db":"x"}'],
    ['{ "password" : "p@ss" }', '{ "password" : "***" }'],
    ["{ user: 'app', password: 'p@ss' }", "{ user: 'app', password: '***' }"],
    ['postgres://h/db?sslmode=require&password=p%40ss&x=1', 'postgres://h/db?sslmode=require&password=***&x=1'],
    ['Server=db;User Id=app;Password=p@ss;Database=x', 'Server=db;User Id=app;Password=***;Database=x'],
    ['pwd=abc passwd=def pass=ghi secret=jkl token=mno', 'pwd=*** passwd=*** pass=*** secret=*** token=***'],
    [
      'apikey=a1 api_key=a2 API-KEY=a3 access_key=a4 aws_secret_access_key=a5 sslpassword=a6',
      'apikey=*** api_key=*** API-KEY=*** access_key=*** aws_secret_access_key=*** sslpassword=***',
    ],
    ['client_secret = s3', 'client_secret = ***'],
  ])('%s', (text, expected) => {
    expect(redact(text)).toBe(expected)
  })

  it('leaves prose and lookalike keys alone', () => {
    for (const text of [
      'password authentication failed for user "app"',
      'token: expired',
      'max_tokens=5 bypass=1 monkey=2 passes=3',
      'the key "a=b" is not valid',
      '"fencingToken": "9007199254740993", fencing_token=42',
    ]) {
      expect(redact(text)).toBe(text)
    }
  })
})

describe('errors leave the library redacted', () => {
  it('a LockProviderError (and every shedlock error) has its secrets replaced in its message', () => {
    const error = new LockProviderError(
      'postgres: could not acquire lock "a": connect postgres://app:p@ss:w/rd@h/db failed (password=p@ss:w/rd)',
      {
        provider: 'postgres',
      },
    )
    expect(error.message).toBe(
      'postgres: could not acquire lock "a": connect postgres://app:***@h/db failed (password=***',
    )
    expect(new LockConfigurationError('token=abc is not valid').message).toBe('token=*** is not valid')
  })

  it('the run ledger stores a task error with its URL password and password=... redacted', () => {
    const stored = runErrorOf(
      new Error(
        'export to postgres://app:q7@z9:k4/m2@warehouse/db failed; retry with password=q7@z9:k4/m2\nsecond line',
      ),
    )
    expect(stored).toEqual({
      type: 'Error',
      message: 'export to postgres://app:***@warehouse/db failed; retry with password=***',
    })
    for (const piece of pieces('q7@z9:k4/m2')) expect(stored.message).not.toContain(piece)
  })
})
