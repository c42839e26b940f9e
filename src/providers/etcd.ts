import { type Clock, systemClock } from '../core/clock.ts'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { defineLock } from '../support/define-lock.ts'
import { lockOwner } from '../support/lock-owner.ts'
import { withTimeout } from '../support/with-timeout.ts'

/** One operation of a transaction: an etcd3 `PutBuilder` or `DeleteBuilder`. Never awaited here (builders are thenables that run themselves). */
export interface EtcdOperation {
  op(): Promise<object>
}

/** The part of an etcd3 `PutBuilder` this provider calls. */
export interface EtcdPutBuilder extends EtcdOperation {
  value(value: string): EtcdPutBuilder
  lease(id: string): EtcdPutBuilder
}

/** The part of an etcd3 `DeleteBuilder` this provider calls. */
export interface EtcdDeleteBuilder {
  key(key: string): EtcdOperation
}

/** The part of an etcd3 `ComparatorBuilder` (a transaction) this provider calls. */
export interface EtcdTransaction {
  then(...operations: EtcdOperation[]): EtcdTransaction
  commit(): Promise<{ succeeded: boolean }>
}

/** The part of an etcd3 `Lease` this provider calls. */
export interface EtcdLease {
  /** Resolves to the lease ID once etcd granted it. */
  grant(): Promise<string>
  /** Revokes the lease, deleting the keys attached to it. */
  revoke(): Promise<void>
}

/**
 * The part of an `Etcd3` client (etcd3 1.x) that this provider calls. We don't import etcd3: any
 * client with these methods works. The provider never closes it.
 */
export interface EtcdClient {
  lease(ttl: number, options: { autoKeepAlive: boolean }): EtcdLease
  if(key: string, column: 'Version' | 'Value', cmp: '==', value: string | number): EtcdTransaction
  put(key: string): EtcdPutBuilder
  delete(): EtcdDeleteBuilder
}

/** Options of {@link etcdLockProvider}. */
export interface EtcdLockProviderOptions {
  /** Your `Etcd3` client. */
  client: EtcdClient
  /** Second part of every key, `shedlock:<environment>:<name>`. Must not be empty or contain `:`. @default "default" */
  environment?: string
  /**
   * Prefix of the owner in each value. Each acquisition stores
   * `ADDED:<ISO time>@<lockedBy>:<pid>:<random>`, unique per acquisition. @default the host name
   */
  lockedBy?: string
  /**
   * How long one lock operation (its lease grants, transaction and revokes together) may take,
   * in milliseconds or a duration string. Past it, the operation rejects with
   * `LockProviderError` and the task does not run. etcd3 fails at once when the server refuses
   * connections, but waits without end for a server that accepts them and never answers.
   * @default "5s"
   */
  timeout?: Duration
  /** Clock for the time in each value and the rest of `lockAtLeastFor` on unlock. @default systemClock */
  clock?: Clock
}

const PROVIDER = 'etcd'
const NO_KEEP_ALIVE = Object.freeze({ autoKeepAlive: false })

type Action = 'acquire' | 'extend' | 'release'

/**
 * Locks in etcd keys in Java ShedLock's format (its `EtcdLockProvider`), so Java and Node nodes
 * can share locks: the key is `shedlock:<environment>:<name>`, the value
 * `ADDED:<ISO-8601 time, 3 fraction digits>@<owner>`, and the key is attached to a lease whose
 * TTL is the lock's remaining duration; etcd deletes the key when the lease expires.
 *
 * - acquire: grant a lease of `lockAtMostUntil - now` (no keep-alive), then one transaction
 *   `If(version(key) == 0) Then put(key, value, lease)`; when the key exists the lease is revoked
 *   and `lock()` resolves to `undefined`;
 * - unlock: when `lockAtLeastUntil` has passed, `If(value == mine) Then delete(key)`; otherwise
 *   the key moves to a new lease of what remains of `lockAtLeastFor`,
 *   `If(value == mine) Then put(key, value, newLease)`. The old lease is revoked either way;
 * - extend: the key moves to a new lease of `lockAtMostFor`, `If(value == mine) Then put(...)`.
 *   Resolves to `undefined` when the key expired or another acquisition holds it.
 *
 * Unlike Java's provider, unlock and extend are owner-checked: the value is unique to each
 * acquisition, so a holder whose lock expired touches nothing of the next holder's. A key Java
 * wrote (`ADDED:<time>@<host>`) counts as held as long as it exists.
 *
 * Durations: etcd leases have whole-second TTLs, so every duration rounds up to whole seconds
 * (a `lockAtMostFor` of 1.2 s holds the key 2 s), and etcd raises TTLs below its minimum to that
 * minimum (`ceil(1.5 × election timeout)`: 2 s with the default 1 s election timeout), so no
 * lock, and no `lockAtLeastFor` after an unlock, lasts less than 2 s. etcd also deletes expired
 * leases' keys in a background pass every 500 ms, so a key may outlive its lease by up to about
 * half a second. Expiry runs on the etcd leader's clock; the app clock only measures durations.
 *
 * Lock names go into keys as they are: etcd keys are arbitrary bytes and `environment` cannot
 * contain `:`, so every name (with `:`, `/`, spaces, any Unicode) has its own key, the key Java
 * uses. etcd limits a request to 1.5 MiB by default, far above any lock name.
 *
 * Leases: each acquire attempt grants one; an attempt that finds the lock held revokes it at once.
 * After a timeout or a lost connection a lease may stay behind, without keys or with the key it
 * was meant for, until its TTL ends (never longer than the lock's own duration).
 *
 * ```ts
 * import { Etcd3 } from 'etcd3'
 * import { etcdLockProvider } from 'shedlock/etcd'
 * const provider = etcdLockProvider({ client: new Etcd3({ hosts: 'http://127.0.0.1:2379' }), environment: 'production' })
 * ```
 *
 * @throws LockConfigurationError for a missing client, an empty `environment` or `lockedBy`, an
 *   `environment` containing `:`, or a `timeout` that is not a positive duration.
 */
export function etcdLockProvider(options: EtcdLockProviderOptions): ExtensibleLockProvider {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('etcd: pass options { client, environment?, lockedBy? }')
  }
  const { client } = options
  if (!client || typeof client.lease !== 'function' || typeof client.if !== 'function' || typeof client.put !== 'function' || typeof client.delete !== 'function') {
    throw new LockConfigurationError('etcd: pass your Etcd3 client (etcd3 1.x) as { client }')
  }
  const environment = options.environment ?? 'default'
  if (typeof environment !== 'string' || environment === '' || environment.includes(':')) {
    throw new LockConfigurationError(
      `etcd: environment must be a non-empty string without ':' (keys are shedlock:<environment>:<name>, and ':' would let two environments share keys), got ${JSON.stringify(environment)}`,
    )
  }
  if (options.lockedBy !== undefined && (typeof options.lockedBy !== 'string' || options.lockedBy.trim() === '')) {
    throw new LockConfigurationError(`etcd: lockedBy must be a non-empty string (it starts the owner part of each value), got ${JSON.stringify(options.lockedBy)}`)
  }
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('etcd: timeout must be longer than 0ms')
  const clock = options.clock ?? systemClock

  const guard = async <T>(action: Action, name: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await withTimeout(run(), timeout, { store: 'etcd' })
    } catch (error) {
      throw describeEtcdError(error, action, name, timeout)
    }
  }

  // Builders are thenables that execute themselves when awaited: build them inline, never return
  // one from an async function.
  const putIfMine = (key: string, value: string, leaseId: string): Promise<{ succeeded: boolean }> =>
    client.if(key, 'Value', '==', value).then(client.put(key).value(value).lease(leaseId)).commit()

  return {
    name: PROVIDER,
    async lock(configuration) {
      const { name } = configuration
      const key = `shedlock:${environment}:${name}`
      const now = clock.now()
      const value = `ADDED:${new Date(now).toISOString()}@${lockOwner(options.lockedBy)}`
      // Mutable: unlock and extend move the key to new leases. An object, because it is first
      // assigned inside a closure.
      const held: { lease: EtcdLease | undefined } = { lease: undefined }
      let acquired: boolean
      try {
        acquired = await guard('acquire', name, async () => {
          const lease = client.lease(leaseSeconds(configuration.lockAtMostUntil.getTime() - now), NO_KEEP_ALIVE)
          held.lease = lease
          const id = await lease.grant()
          return (await client.if(key, 'Version', '==', 0).then(client.put(key).value(value).lease(id)).commit()).succeeded
        })
      } catch (error) {
        // Whether or not the transaction committed (or still will, after a timeout), nobody uses
        // this acquisition: revoking its lease deletes the key it may have created, so a late
        // acquisition cannot block the name. Not awaited: the server is most likely unreachable.
        if (held.lease) void quietly(held.lease.revoke())
        throw error
      }
      let lease = held.lease!
      if (!acquired) {
        // The key belongs to another lease, this one holds nothing: revoke it, so that failed
        // attempts leave no leases behind.
        await quietly(withTimeout(lease.revoke(), timeout, { store: 'etcd' }))
        return undefined
      }

      return defineLock(configuration, {
        clock,
        unlock: (current) =>
          guard('release', name, async () => {
            const old = lease
            const keepMs = current.lockAtLeastUntil.getTime() - clock.now()
            if (keepMs <= 0) {
              await client.if(key, 'Value', '==', value).then(client.delete().key(key)).commit()
            } else {
              const keep = client.lease(leaseSeconds(keepMs), NO_KEEP_ALIVE)
              // On an error after the grant the new lease is not revoked: the put may have
              // committed, and revoking would release the lock before lockAtLeastUntil. It ends
              // after `keep` seconds anyway.
              const { succeeded } = await putIfMine(key, value, await keep.grant())
              if (succeeded) lease = keep
              else await quietly(keep.revoke())
            }
            // The key is gone or on the new lease (or was never ours any more): the old lease
            // holds nothing of this lock.
            await quietly(old.revoke())
          }),
        extend: (next) =>
          guard('extend', name, async () => {
            const old = lease
            const fresh = client.lease(leaseSeconds(next.lockAtMostUntil.getTime() - clock.now()), NO_KEEP_ALIVE)
            const { succeeded } = await putIfMine(key, value, await fresh.grant())
            if (!succeeded) {
              // The key expired or belongs to another acquisition: neither lease holds it.
              await Promise.all([quietly(fresh.revoke()), quietly(old.revoke())])
              return false
            }
            lease = fresh
            await quietly(old.revoke())
            return true
          }),
      })
    },
  }
}

/** Whole seconds, rounded up and at least 1: etcd lease TTLs are whole seconds, and etcd3 refuses TTLs below 1. */
function leaseSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}

/** Waits for `promise` and ignores its failure: for best-effort lease revokes. */
async function quietly(promise: Promise<unknown>): Promise<void> {
  try {
    await promise
  } catch {
    // A lease that could not be revoked ends with its TTL.
  }
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
const DENIED = new Set(['EtcdPermissionDeniedError', 'EtcdAuthenticationFailedError', 'EtcdInvalidAuthTokenError', 'GRPCUnauthenticatedError', 'GRPCPermissionDeniedError'])

function describeEtcdError(error: unknown, action: Action, lockName: string, timeout: number): LockProviderError {
  const kind = errorName(error)
  const detail = error instanceof Error ? error.message : String(error)
  let advice: string
  if (kind === 'ClientClosedError') {
    advice = `the Etcd3 client was closed (${detail}); the task was not run. Pass a client that stays open while locks are used`
  } else if (kind === 'OperationTimeoutError') {
    advice = `etcd did not answer within ${timeout}ms; the task was not run. Check the server, or raise the provider's timeout; the provider recovers by itself once etcd answers`
  } else if (UNREACHABLE.has(kind) || /ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|UNAVAILABLE/.test(detail)) {
    advice = `etcd is unreachable (${detail}); the task was not run. Check the server; the provider recovers by itself once it is back`
  } else if (DENIED.has(kind)) {
    advice = `etcd refused the request (${detail}); the client's user needs read and write access to the keys shedlock:* and permission to grant and revoke leases`
  } else {
    advice = detail
  }
  return new LockProviderError(`etcd: could not ${action} lock "${lockName}": ${advice}`, { cause: error, provider: PROVIDER, lockName })
}

function errorName(error: unknown): string {
  if (error === null || typeof error !== 'object') return ''
  const ctor = (error as { constructor?: { name?: unknown } }).constructor
  return typeof ctor?.name === 'string' && ctor.name !== 'Error' ? ctor.name : String((error as { name?: unknown }).name ?? '')
}
