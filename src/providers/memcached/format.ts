import { LockConfigurationError, type LockProviderError } from '../../core/errors.ts'
import { keyTooLong } from '../../support/lock-request.ts'
import {
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  type StoreAction,
  storeError,
  SOCKET_FAILURE_CODES,
} from '../../support/store-errors.ts'
import { OperationTimeoutError } from '../../support/with-timeout.ts'

// Java ShedLock's lock keys in memcached, the escaping of names memcached cannot carry, and what
// memcached's errors mean. The provider, the inspector and the CLI read them from here. Values
// are the shared `ADDED:<time>@<owner>` (support/added-value.ts).

export const PROVIDER = 'memcached'
export const DEFAULT_ENVIRONMENT = 'default'
// memcached's KEY_MAX_LENGTH. Measured on memcached 1.6 with memjs: a 251-byte key is refused
// ("Invalid arguments"), and the next request on the same connection never gets an answer.
export const MAX_KEY_BYTES = 250
// Characters that memcached's text protocol (Java's spymemcached) cannot carry in a key.
const UNSAFE = /[\x00-\x20\x7f]/
// What an encoded name escapes: those, and '%', the escape character itself.
const ESCAPED = /[\x00-\x20\x7f%]/
// An escape in an encoded key: '%' and the uppercase hex code of one escaped character.
const ESCAPE = /%(?:[01][0-9A-F]|20|25|7F)/y
const LONE_SURROGATE = /\p{Cs}/u
const UNREACHABLE = new Set([...SOCKET_FAILURE_CODES, 'ECONNABORTED'])

/**
 * The memcached key of lock `name`: `shedlock:<environment>:<name>`, as Java ShedLock writes it.
 * Every name memcached holds as it is, a leading `%` included, is written as it is. A name with a
 * space or an ASCII control character, which memcached's text protocol cannot carry, is written
 * as `%` followed by the name with each of those characters, and every `%`, as `%XX` (uppercase
 * hex): `daily report` → `%daily%20report`.
 *
 * No two names share a key: a name that is exactly the encoded form of another name (such as
 * `%daily%20report`, the key of `daily report`) is refused.
 *
 * @throws LockConfigurationError for an invalid environment, a name that is the encoded form of
 *   another name or is not well-formed Unicode, or a key longer than memcached's 250 bytes.
 */
export function memcachedLockKey(name: string, environment: string = DEFAULT_ENVIRONMENT): string {
  const key = encodeKey(memcachedKeyPrefix(environment), name)
  if (typeof key !== 'string') throw key
  return key
}

/**
 * `shedlock:<environment>:`, the start of every lock key of `environment`.
 * @throws LockConfigurationError for an empty environment, one with spaces, control characters or `:`, or one too long for any key.
 */
export function memcachedKeyPrefix(environment: unknown): string {
  if (typeof environment !== 'string' || environment === '') {
    throw new LockConfigurationError(
      `memcached: environment must be a non-empty string (keys are shedlock:<environment>:<name>), got ${JSON.stringify(environment) ?? String(environment)}`,
    )
  }
  // ':' separates the key's parts: environment "a:b" with lock "c" would be environment "a" with lock "b:c".
  if (UNSAFE.test(environment) || environment.includes(':') || LONE_SURROGATE.test(environment)) {
    throw new LockConfigurationError(
      `memcached: environment ${JSON.stringify(environment)} must not contain spaces, control characters or ':' (keys are shedlock:<environment>:<name>)`,
    )
  }
  const prefix = `shedlock:${environment}:`
  if (Buffer.byteLength(prefix) >= MAX_KEY_BYTES) {
    throw new LockConfigurationError(
      `memcached: environment ${JSON.stringify(environment)} is too long: keys are shedlock:<environment>:<name>, at most ${MAX_KEY_BYTES} bytes`,
    )
  }
  return prefix
}

/** The key of `name` under `prefix`, or the LockConfigurationError that says why it has none. */
export function encodeKey(prefix: string, name: string): string | LockConfigurationError {
  // UTF-8 cannot represent a lone surrogate: it would be sent as U+FFFD and make distinct names collide.
  if (LONE_SURROGATE.test(name))
    return new LockConfigurationError(
      `Lock name ${JSON.stringify(name)} is not well-formed Unicode (it has a lone surrogate); memcached keys cannot hold it`,
    )
  let key: string
  if (!UNSAFE.test(name)) {
    // Raw names map to themselves, so the encoded form of a name memcached cannot hold must
    // never be taken as a raw one.
    const decoded = decodeName(name)
    if (decoded !== undefined) {
      return new LockConfigurationError(
        `Lock name ${JSON.stringify(name)} is the memcached key of the lock name ${JSON.stringify(decoded)}, which memcached cannot hold as it is; use another name (shedlock refuses it so that no two names share a key)`,
      )
    }
    key = prefix + name
  } else {
    key = prefix + escapeName(name)
  }
  return keyTooLong(PROVIDER, name, key, MAX_KEY_BYTES, prefix) ?? key
}

function escapeName(name: string): string {
  let encoded = '%'
  for (const char of name)
    encoded += ESCAPED.test(char) ? `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}` : char
  return encoded
}

/** The name memcached cannot hold whose encoded form is exactly `name`, if there is one. */
function decodeName(name: string): string | undefined {
  if (!name.startsWith('%')) return undefined
  let decoded = ''
  for (let i = 1; i < name.length; i++) {
    ESCAPE.lastIndex = i
    if (ESCAPE.test(name)) {
      decoded += String.fromCharCode(Number.parseInt(name.slice(i + 1, i + 3), 16))
      i += 2
    } else if (name[i] === '%') {
      // A '%' that is no escape: no encoded form has one.
      return undefined
    } else {
      decoded += name[i]
    }
  }
  // Only names memcached cannot hold are encoded.
  return UNSAFE.test(decoded) ? decoded : undefined
}

/**
 * The lock name whose key is `key`, the inverse of {@link memcachedLockKey}: the rest of the key
 * after `shedlock:<environment>:`, unescaped when it is the escaped form of a name memcached
 * cannot carry. `undefined` for a key outside the environment or that no name has.
 */
export function memcachedLockName(key: string, environment: string = DEFAULT_ENVIRONMENT): string | undefined {
  const prefix = memcachedKeyPrefix(environment)
  if (!key.startsWith(prefix)) return undefined
  const rest = key.slice(prefix.length)
  const name = decodeName(rest) ?? rest
  // Exactly the names that have this key: the encoding is the one definition.
  return encodeKey(prefix, name) === key ? name : undefined
}

/** A value as memjs returns it (a Buffer, with the default serializer) as text; `undefined` for a missing key. */
export function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8')
  return undefined
}

/** What a memcached (memjs) error means for the lock and what to do about it. `role` is who calls (`provider` or `inspector`). */
export function describeMemcachedError(
  error: unknown,
  action: StoreAction,
  lockName: string,
  role: string = 'provider',
): LockProviderError {
  // memjs reports a failed SASL login as a bare string.
  const detail =
    error instanceof OperationTimeoutError
      ? `memcached did not answer within ${error.timeoutMs}ms`
      : redactUrlPasswords(messageOf(error))
  const code = (error as { code?: unknown } | null)?.code
  let advice: string
  if (/authentication failed/i.test(detail)) {
    advice = `memcached rejected the client's credentials (${detail}); check the username and password of your memjs client`
  } else if (
    (typeof code === 'string' && UNREACHABLE.has(code)) ||
    /timed out|No servers available|did not answer/i.test(detail)
  ) {
    advice = `memcached is unreachable (${detail}); ${outcomeOf(action)}. Check the server; the ${role} recovers by itself once it is back`
  } else {
    advice = detail
  }
  return storeError(PROVIDER, action, lockName, advice, error)
}
