import { LockConfigurationError, type LockProviderError } from '../../core/errors.ts'
import { keyTooLong } from '../../support/lock-request.ts'
import { messageOf, outcomeOf, redactUrlPasswords, type StoreAction, storeError } from '../../support/store-errors.ts'

// Java ShedLock's lock keys in etcd (its EtcdLockProvider) and what etcd's errors mean. The
// provider, the inspector and the CLI read them from here. Values are the shared
// `ADDED:<time>@<owner>` (support/added-value.ts); each key hangs on a lease that expires it.

export const PROVIDER = 'etcd'
export const DEFAULT_ENVIRONMENT = 'default'

// The longest key the provider sends. etcd refuses a request over --max-request-bytes (1.5 MiB by
// default; the transactions carry the key twice, so keys break from 786,380 bytes here), and
// one over its gRPC limit (2 MiB) also opens etcd3's circuit breaker, failing every call of the
// client for a while. A third of the default leaves room for the values and a lowered setting.
export const MAX_KEY_BYTES: number = 512 * 1024

/** Where in etcd the locks of one fleet live: `shedlock:<environment>:`, the start of every lock key. */
export interface EtcdKeySpace {
  readonly environment: string
  /** `shedlock:<environment>:`. */
  readonly prefix: string
}

/**
 * The key space of the option `environment` (default `default`), checked as the provider checks it.
 * @throws LockConfigurationError for an empty environment or one that contains `:`.
 */
export function etcdKeySpace(environment: unknown = DEFAULT_ENVIRONMENT): EtcdKeySpace {
  if (typeof environment !== 'string' || environment === '' || environment.includes(':')) {
    throw new LockConfigurationError(
      `etcd: environment must be a non-empty string without ':' (keys are shedlock:<environment>:<name>, and ':' would let two environments share keys), got ${JSON.stringify(environment)}`,
    )
  }
  return { environment, prefix: `shedlock:${environment}:` }
}

/**
 * The key of lock `name`: `shedlock:<environment>:<name>`, the name as it is (etcd keys are
 * arbitrary bytes and the environment has no `:`, so every name has its own key, Java's).
 */
export function etcdLockKey(space: EtcdKeySpace, name: string): string {
  return space.prefix + name
}

/**
 * {@link etcdLockKey}, checked before anything is sent: an oversized request breaks the client
 * for other locks (see {@link MAX_KEY_BYTES}).
 * @throws LockConfigurationError for a name whose key is longer.
 */
export function checkedEtcdLockKey(space: EtcdKeySpace, name: string): string {
  const key = space.prefix + name
  const tooLong = keyTooLong(PROVIDER, name, key, MAX_KEY_BYTES, space.prefix)
  if (tooLong) throw tooLong
  return key
}

/** The lock name of `key`, the inverse of {@link etcdLockKey}; `undefined` for a key outside the key space. */
export function etcdLockName(space: EtcdKeySpace, key: string): string | undefined {
  return key.startsWith(space.prefix) ? key.slice(space.prefix.length) : undefined
}

// Error classes of etcd3 1.x (and cockatiel's, which it uses for retries and circuit breaking),
// recognised by name because we don't import etcd3.
const UNREACHABLE = new Set([
  'GRPCUnavailableError',
  'GRPCConnectFailedError',
  'GRPCDeadlineExceededError',
  'GRPCCancelledError',
  'BrokenCircuitError',
  'OperationTimeoutError',
  'TaskCancelledError',
])
const DENIED = new Set([
  'EtcdPermissionDeniedError',
  'EtcdAuthenticationFailedError',
  'EtcdInvalidAuthTokenError',
  'GRPCUnauthenticatedError',
  'GRPCPermissionDeniedError',
])

/**
 * What an etcd error means for the lock and what to do about it. `timeout` is the caller's
 * timeout in milliseconds, `role` who calls (`provider` or `inspector`).
 */
export function describeEtcdError(
  error: unknown,
  action: StoreAction,
  lockName: string,
  timeout: number,
  role: string = 'provider',
): LockProviderError {
  const kind = errorName(error)
  const detail = redactUrlPasswords(messageOf(error))
  let advice: string
  if (kind === 'ClientClosedError') {
    advice = `the Etcd3 client was closed (${detail}); ${outcomeOf(action)}. Pass a client that stays open while locks are used`
  } else if (kind === 'OperationTimeoutError') {
    advice = `etcd did not answer within ${timeout}ms; ${outcomeOf(action)}. Check the server, or raise the ${role}'s timeout; the ${role} recovers by itself once etcd answers`
  } else if (
    UNREACHABLE.has(kind) ||
    /ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|UNAVAILABLE/.test(detail)
  ) {
    advice = `etcd is unreachable (${detail}); ${outcomeOf(action)}. Check the server; the ${role} recovers by itself once it is back`
  } else if (DENIED.has(kind)) {
    advice = `etcd refused the request (${detail}); the client's user needs read and write access to the keys shedlock:* and permission to grant, revoke and read leases`
  } else {
    advice = detail
  }
  return storeError(PROVIDER, action, lockName, advice, error)
}

function errorName(error: unknown): string {
  if (error === null || typeof error !== 'object') return ''
  const ctor = (error as { constructor?: { name?: unknown } }).constructor
  return typeof ctor?.name === 'string' && ctor.name !== 'Error'
    ? ctor.name
    : String((error as { name?: unknown }).name ?? '')
}
