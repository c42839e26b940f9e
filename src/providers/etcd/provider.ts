import { type Clock, systemClock } from '../../core/clock.ts'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { addedValue } from '../../support/added-value.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { type StoreAction, storeGuard } from '../../support/store-errors.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import type { EtcdClient, EtcdLease, EtcdTransactionResult } from './client.ts'
import { type EtcdLockInspectorOptions, etcdLockInspector } from './inspector.ts'
export type {
  EtcdClient,
  EtcdDeleteBuilder,
  EtcdLease,
  EtcdOperation,
  EtcdPutBuilder,
  EtcdTransaction,
  EtcdTransactionResult,
} from './client.ts'
import { checkedEtcdLockKey, DEFAULT_ENVIRONMENT, describeEtcdError, etcdKeySpace, PROVIDER } from './format.ts'

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

const NO_KEEP_ALIVE = Object.freeze({ autoKeepAlive: false })
// etcd's lease.MaxLeaseTTL: a longer lease is refused ("etcdserver: too large lease TTL").
const MAX_LEASE_TTL_S = 9_000_000_000

/**
 * Locks as etcd keys on leases in Java ShedLock's format (`shedlock:<environment>:<name>`, its
 * `EtcdLockProvider`), through your `etcd3` client, so Java and Node nodes share locks.
 * Extensible; the etcd server decides expiry; a lock's `fencingToken` is the revision of the
 * transaction that took it. Leases have whole-second TTLs of at least etcd's minimum (2 s by
 * default): every duration rounds up to them.
 *
 * ```ts
 * import { Etcd3 } from 'etcd3'
 * import { etcdLockProvider } from 'shedlock/etcd'
 * const provider = etcdLockProvider({ client: new Etcd3({ hosts: 'http://127.0.0.1:2379' }), environment: 'production' })
 * ```
 *
 * See docs/providers/etcd.md.
 *
 * @throws LockConfigurationError for a missing client, an empty `environment` or `lockedBy`, an
 *   `environment` containing `:`, or a `timeout` that is not a positive duration.
 */
export function etcdLockProvider(options: EtcdLockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError('etcd: pass options { client, environment?, lockedBy? }')
  }
  const { client } = options
  if (
    !client ||
    typeof client.lease !== 'function' ||
    typeof client.if !== 'function' ||
    typeof client.put !== 'function' ||
    typeof client.delete !== 'function'
  ) {
    throw new LockConfigurationError('etcd: pass your Etcd3 client (etcd3 1.x) as { client }')
  }
  const space = etcdKeySpace(options.environment ?? DEFAULT_ENVIRONMENT)
  if (options.lockedBy !== undefined && (typeof options.lockedBy !== 'string' || options.lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `etcd: lockedBy must be a non-empty string (it starts the owner part of each value), got ${JSON.stringify(options.lockedBy)}`,
    )
  }
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('etcd: timeout must be longer than 0ms')
  const clock = options.clock ?? systemClock

  const storeCall = storeGuard((error, action, name) => describeEtcdError(error, action, name, timeout))
  const guard = <T>(action: StoreAction, name: string, run: () => Promise<T>): Promise<T> =>
    storeCall(action, name, () => withTimeout(run(), timeout, { store: 'etcd' }))

  // Builders are thenables that execute themselves when awaited: build them inline, never return
  // one from an async function.
  const putIfMine = (key: string, value: string, leaseId: string): Promise<{ succeeded: boolean }> =>
    client.if(key, 'Value', '==', value).then(client.put(key).value(value).lease(leaseId)).commit()

  // The latest deadline a lease granted now can reach.
  const longestLease = (): { ms: number; why: string } => ({
    ms: clock.now() + MAX_LEASE_TTL_S * 1000,
    why: LONGEST_LEASE,
  })

  return {
    name: PROVIDER,
    // An Etcd3 client has the calls the inspector makes as well as the provider's.
    inspector: () =>
      etcdLockInspector({
        client: options.client as unknown as EtcdLockInspectorOptions['client'],
        environment: space.environment,
        timeout,
      }),
    async lock(configuration) {
      checkLockRequest(PROVIDER, configuration, clock, { latestDeadline: longestLease() })
      const { name } = configuration
      // Checked before anything is sent: an oversized request breaks the client for other locks.
      const key = checkedEtcdLockKey(space, name)
      const now = clock.now()
      const owner = lockOwner(options.lockedBy)
      const value = addedValue(now, owner)
      // Mutable: unlock and extend move the key to new leases. An object, because it is first
      // assigned inside a closure.
      const held: { lease: EtcdLease | undefined } = { lease: undefined }
      // The revision of the transaction that took the lock: etcd's revision counts every write of
      // the cluster, so it is greater than that of every earlier acquisition of any name, Java's too.
      let fencingToken: bigint | undefined
      try {
        fencingToken = await guard('acquire', name, async () => {
          const lease = client.lease(leaseSeconds(configuration.lockAtMostUntil.getTime() - now), NO_KEEP_ALIVE)
          held.lease = lease
          const id = await lease.grant()
          const result = await client.if(key, 'Version', '==', 0).then(client.put(key).value(value).lease(id)).commit()
          return result.succeeded ? revisionOf(result) : undefined
        })
      } catch (error) {
        // Whether or not the transaction committed (or still will, after a timeout), nobody uses
        // this acquisition: revoking its lease deletes the key it may have created, so a late
        // acquisition cannot block the name. Not awaited: the server is most likely unreachable.
        if (held.lease) void quietly(held.lease.revoke())
        throw error
      }
      let lease = held.lease!
      if (fencingToken === undefined) {
        // The key belongs to another lease, this one holds nothing: revoke it, so that failed
        // attempts leave no leases behind.
        await quietly(withTimeout(lease.revoke(), timeout, { store: 'etcd' }))
        return undefined
      }

      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        fencingToken,
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
        extend: (next) => {
          // Thrown, not wrapped by the guard: the extension is refused before anything is sent,
          // and the handle stays usable.
          checkLockRequest(PROVIDER, next, clock, { latestDeadline: longestLease() })
          return guard('extend', name, async () => {
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
          })
        },
      })
    },
  }
}

// Built once: toLocaleString() costs about 2 µs, and the limit is checked on every acquisition.
const LONGEST_LEASE = `etcd grants leases of at most ${MAX_LEASE_TTL_S.toLocaleString('en-US')} s, about 285 years`

/** Whole seconds, rounded up and at least 1: etcd lease TTLs are whole seconds, and etcd3 refuses TTLs below 1. */
// A client that reports no revision fails the acquisition (its lease revoked, so the key goes):
// a lock without its token would break the promise that every etcd lock carries one.
function revisionOf(result: EtcdTransactionResult): bigint {
  const revision = result.header?.revision
  if (
    (typeof revision === 'string' && /^[1-9][0-9]*$/.test(revision)) ||
    (Number.isSafeInteger(revision) && (revision as number) > 0)
  )
    return BigInt(revision as string | number)
  throw new TypeError(
    `the etcd client reported no revision for the transaction that took the lock (header.revision: ${String(revision)}); pass an Etcd3 client (etcd3 1.x)`,
  )
}

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
