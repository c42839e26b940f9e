import { describe, expect, it } from 'vitest'
import { UsageError } from '../../src/cli/command.ts'
import { parseStoreUrl } from '../../src/cli/store-url.ts'
import { STORES } from '../../src/providers/registry.ts'
import { ownParameters, redactSecrets, redactUrl } from '../../src/support/store-url.ts'

describe('parseStoreUrl', () => {
  it.each([
    ['postgres://app@db/app', 'postgres'],
    ['postgresql://app@db/app', 'postgres'],
    ['mysql://root@db/test', 'mysql'],
    ['MariaDB://root@db/test', 'mysql'],
    ['sqlite:./locks.db', 'sqlite'],
    ['sqlite:///var/lib/app/locks.db', 'sqlite'],
    ['redis://cache:6379/2', 'redis'],
    ['rediss://:pw@cache:6380', 'redis'],
    ['mongodb://h1:27017,h2:27017/app?replicaSet=rs', 'mongodb'],
    ['mongodb+srv://cluster0.example.net/app', 'mongodb'],
    ['dynamodb://', 'dynamodb'],
    ['dynamodb://127.0.0.1:8000?region=eu-west-1&table=Locks', 'dynamodb'],
    ['etcd://127.0.0.1:2379', 'etcd'],
    ['zookeeper://127.0.0.1:2181/chroot', 'zookeeper'],
    ['nats://127.0.0.1:4222?bucket=locks', 'nats'],
    ['memcached://127.0.0.1:11211', 'memcached'],
  ])('%s is a %s store', (raw, scheme) => {
    expect(parseStoreUrl(raw).scheme).toBe(scheme)
  })

  it('refuses unknown schemes and empty URLs with a UsageError listing the accepted ones, the password redacted', () => {
    expect(() => parseStoreUrl('  ')).toThrow(UsageError)
    const error = (() => {
      try {
        parseStoreUrl('oracle://scott:tiger-s3cret@db/orcl')
      } catch (e) {
        return e as Error
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(UsageError)
    expect(error!.message).toContain('"oracle://scott:***@db/orcl"')
    expect(error!.message).toContain('postgres://')
    expect(error!.message).not.toContain('tiger-s3cret')
  })
})

describe('redaction', () => {
  it('replaces the password of a URL, and secret query parameters, by ***', () => {
    expect(redactUrl('postgres://app:p%40ss-s3cret@db:5432/app?sslmode=require')).toBe(
      'postgres://app:***@db:5432/app?sslmode=require',
    )
    expect(redactUrl('redis://:only-s3cret@cache:6379')).toBe('redis://:***@cache:6379')
    expect(redactUrl('mongodb://u:pw-s3cret@h1:1,h2:2/app?authSource=admin&password=x-s3cret')).toBe(
      'mongodb://u:***@h1:1,h2:2/app?authSource=admin&password=***',
    )
    expect(redactUrl('postgres://app@db/app')).toBe('postgres://app@db/app')
  })

  it('treats the user of a nats:// URL without password as the token it is', () => {
    const parsed = parseStoreUrl('nats://tok-s3cret-123@127.0.0.1:4222?bucket=b')
    expect(parsed.redacted).toBe('nats://***@127.0.0.1:4222?bucket=b')
    expect(redactSecrets('authorization violation for tok-s3cret-123')).toBe('authorization violation for ***')
  })

  it('removes a parsed URL’s password, decoded or not, from any later text, such as a driver message', () => {
    parseStoreUrl('mysql://root:w%C3%B6rd-s3cret@db/test')
    expect(redactSecrets('auth failed for wörd-s3cret and w%C3%B6rd-s3cret')).toBe('auth failed for *** and ***')
    expect(redactSecrets('retrying mysql://root:other-secret@db2/x')).toBe('retrying mysql://root:***@db2/x')
  })
})

describe('passwords with @, : and /', () => {
  it('hides all of a raw password up to the last @, and each part of it a driver might print alone', () => {
    const parsed = parseStoreUrl('postgres://app:Zq8@Wx3:Kv5@127.0.0.1:1/db')
    expect(parsed.redacted).toBe('postgres://app:***@127.0.0.1:1/db')
    expect(parsed.url?.hostname).toBe('127.0.0.1')
    expect(redactSecrets('no route to host Wx3:Kv5, user Zq8@Wx3 refused; decoded Zq8@Wx3:Kv5')).toBe(
      'no route to host ***, user *** refused; decoded ***',
    )
  })

  it('refuses a raw / ? or # in a password, which a URL parser reads as the end of the host, naming the fix', () => {
    for (const raw of [
      'postgres://app:Zq8/Wx3@h/db',
      'mysql://root:Zq8?Wx3@h/db',
      'redis://:Zq8#Wx3@h',
      'mongodb://u:a@b/c@h1,h2/app',
    ]) {
      expect(() => parseStoreUrl(raw)).toThrow(UsageError)
      expect(() => parseStoreUrl(raw)).toThrow(
        /the password holds a raw "\/", "\?" or "#", which ends the host part of a URL; percent-encode them \(%2F, %3F, %23\)/,
      )
      expect(() => parseStoreUrl(raw)).not.toThrow(/Zq8|Wx3|b\/c/)
    }
    expect(parseStoreUrl('postgres://app:Zq8%2FWx3@h/db').redacted).toBe('postgres://app:***@h/db')
  })
})

describe('passwords with whitespace', () => {
  it('hides all of a password with spaces in the redacted URL, and its forms in any later text', () => {
    const parsed = parseStoreUrl('postgres://u:correct horse staple@127.0.0.1:5432/test')
    expect(parsed.redacted).toBe('postgres://u:***@127.0.0.1:5432/test')
    expect(redactSecrets('tried correct horse staple, correct%20horse%20staple and correct+horse+staple')).toBe(
      'tried ***, *** and ***',
    )
  })

  it('a secret query parameter with spaces: all of its value', () => {
    expect(parseStoreUrl('redis://cache:6379?password=two spaced words&db=1').redacted).toBe(
      'redis://cache:6379?password=***&db=1',
    )
    expect(redactSecrets('AUTH two spaced words failed')).toBe('AUTH *** failed')
  })

  it('a password with a quote and a space, which a text reading stops at', () => {
    expect(parseStoreUrl('mysql://root:say "no more"@h/db').redacted).toBe('mysql://root:***@h/db')
    expect(redactSecrets('{"password":"say \\"no more\\""}')).not.toMatch(/no more/)
  })
})

// Every URL form that a driver percent-decodes (all but sqlite:PATH), with its schemes.
const DECODED = STORES.filter((store) => store.urlKind !== 'opaque').flatMap((store) => store.schemes)

describe('a "%" that is not a percent escape', () => {
  it.each(DECODED)('%s//: in the password: the URL redacted, where, and the fix; never the characters', (scheme) => {
    const raw = `${scheme}//root:Pw%zz9Q@127.0.0.1:1/x`
    expect(() => parseStoreUrl(raw)).toThrow(UsageError)
    expect(() => parseStoreUrl(raw)).toThrow(
      `"${scheme}//root:***@127.0.0.1:1/x": the password holds a "%" that is not a percent escape (% and two hexadecimal digits), at its character 3; percent-encode a "%" that stands for itself as %25`,
    )
  })

  it.each(DECODED)('%s//: in the user name (a NATS token), or elsewhere, where the escape is named', (scheme) => {
    expect(() => parseStoreUrl(`${scheme}//to%kn@127.0.0.1:1/x`)).toThrow(
      `"${scheme}//${scheme === 'nats:' ? '***' : 'to%kn'}@127.0.0.1:1/x": the user name holds a "%" that is not a percent escape (% and two hexadecimal digits), at its character 3; percent-encode a "%" that stands for itself as %25`,
    )
    expect(() => parseStoreUrl(`${scheme}//127.0.0.1:1/a%g1`)).toThrow(
      `"${scheme}//127.0.0.1:1/a%g1": "%g1" is not a percent escape (% and two hexadecimal digits); percent-encode a "%" that stands for itself as %25`,
    )
    expect(() => parseStoreUrl(`${scheme}//127.0.0.1:1/a%`)).toThrow(/"%" is not a percent escape/)
  })

  it('accepts escapes, and leaves sqlite:PATH as it is', () => {
    expect(parseStoreUrl('mysql://root:Pw%25zz9Q@127.0.0.1/test').redacted).toBe('mysql://root:***@127.0.0.1/test')
    expect(parseStoreUrl('sqlite:./50%.db').scheme).toBe('sqlite')
  })
})

describe('ownParameters', () => {
  it('returns the parameters a scheme defines and refuses the others', () => {
    expect(ownParameters(parseStoreUrl('nats://h:4222?bucket=b'), ['bucket']).get('bucket')).toBe('b')
    expect(() => ownParameters(parseStoreUrl('nats://h:4222?buckets=b'), ['bucket'])).toThrow(
      /nats URLs take only \?bucket=, got \?buckets=/,
    )
    expect(() => ownParameters(parseStoreUrl('etcd://h?environment=a&environment=b'), ['environment'])).toThrow(
      /appears twice/,
    )
  })
})
