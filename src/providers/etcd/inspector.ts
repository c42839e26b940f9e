import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord } from '../../core/lock-inspector.ts'
import { parseAddedValue } from '../../support/added-value.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import {
  checkedEtcdLockKey,
  DEFAULT_ENVIRONMENT,
  describeEtcdError,
  etcdKeySpace,
  etcdLockName,
  PROVIDER,
} from './format.ts'
import type { EtcdDeleteBuilder, EtcdTransaction } from './client.ts'
import { byName, inBatches, keyedGetAndRelease } from '../../support/inspection.ts'

/** One key as an etcd3 range read returns it (`IKeyValue`). */
export interface EtcdKeyValue {
  key: Uint8Array
  value: Uint8Array
  /** The ID of the key's lease, `"0"` when it has none. */
  lease: string
}

/** What an etcd3 range builder (`client.get(key)`, `client.getAll().prefix(p)`) resolves to on `exec()`. */
export interface EtcdRangeBuilder {
  exec(): Promise<{ kvs: EtcdKeyValue[] }>
}

/**
 * The part of an `Etcd3` client (etcd3 1.x) that {@link etcdLockInspector} calls. We don't import
 * etcd3: pass your `new Etcd3(...)`, the provider's client.
 */
export interface EtcdInspectorClient {
  get(key: string): EtcdRangeBuilder
  getAll(): { prefix(prefix: string): EtcdRangeBuilder }
  /** The raw lease service; its `TimeToLive` RPC gives a lease's remaining and granted TTL, in whole seconds (`-1`: gone). */
  leaseClient: { leaseTimeToLive(request: { ID: string }): Promise<{ TTL: string; grantedTTL: string }> }
  if(key: string, column: 'Value', cmp: '==', value: string): EtcdTransaction
  delete(): EtcdDeleteBuilder
}

/** Options of {@link etcdLockInspector}: the provider's client and environment. */
export interface EtcdLockInspectorOptions {
  /** Your `Etcd3` client (the provider's). */
  client: EtcdInspectorClient
  /** Second part of every key, `shedlock:<environment>:<name>`: the provider's. @default "default" */
  environment?: string
  /**
   * How long one etcd call may take, in milliseconds or a duration string; past it, the call
   * rejects with `LockProviderError`. `list()` makes one range read and one lease read per key,
   * each with this bound. @default "5s"
   */
  timeout?: Duration
}

/**
 * Reads and force-releases the locks of the etcd lock provider, in its (and Java ShedLock's)
 * format: keys `shedlock:<environment>:<name>` holding `ADDED:<ISO time>@<owner>`, each on a
 * lease whose TTL is what remains of the lock. For dashboards, health endpoints and operators.
 *
 * - `list()` reads every key under `shedlock:<environment>:` in one range request, `get(name)`
 *   one key; then each key's lease (the `TimeToLive` RPC).
 * - Times: etcd has no clock to read, so `now` is this host's clock, and `lockUntil` is now plus
 *   the lease's remaining TTL. etcd gives that TTL in whole seconds, rounded down (the lease ends
 *   within the next second): `lockUntil` is the time in the value plus the lease's granted TTL
 *   when that falls within this second (a lease granted when the lock was taken, which is how
 *   both shedlock and Java take them), else the end of it, so a lock never shows as free while
 *   etcd may still hold it. A key without a lease (which neither writes) has no `lockUntil` and
 *   is held until deleted; a key whose lease just ended (etcd deletes it within about 0.5 s)
 *   reads as free.
 * - `release(nameOrRecord)` deletes the key in one transaction, `If(value == <value read>)
 *   Then delete(key)`, so that a lock another node took meanwhile is left alone. The holder's
 *   later unlock or extension compares its own value with a key that is gone: it changes nothing
 *   (the operator wins). The holder's lease is left to end by itself; it holds no key.
 *
 * `get` and `release` reject with `LockConfigurationError` for a name whose key is longer than
 * the provider allows (512 KiB): no lock can have it, and etcd3 would break on the request.
 *
 * ```ts
 * import { Etcd3 } from 'etcd3'
 * import { etcdLockInspector } from 'shedlock/etcd'
 * const inspector = etcdLockInspector({ client: new Etcd3({ hosts: 'http://127.0.0.1:2379' }), environment: 'production' })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing client, an empty `environment` or one containing
 *   `:`, or a `timeout` that is not a positive duration.
 */
export function etcdLockInspector(options: EtcdLockInspectorOptions): LockInspector {
  if (options === null || typeof options !== 'object')
    throw new LockConfigurationError('etcd: pass options { client, environment? } to etcdLockInspector')
  const { client } = options
  if (
    !client ||
    typeof client.get !== 'function' ||
    typeof client.getAll !== 'function' ||
    typeof client.if !== 'function' ||
    typeof client.delete !== 'function' ||
    typeof client.leaseClient?.leaseTimeToLive !== 'function'
  ) {
    throw new LockConfigurationError('etcd: pass your Etcd3 client (etcd3 1.x) as { client }')
  }
  const space = etcdKeySpace(options.environment ?? DEFAULT_ENVIRONMENT)
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('etcd: timeout must be longer than 0ms')
  const guard = storeGuard((error, action, name) => describeEtcdError(error, action, name, timeout, 'inspector'))
  const bounded = <T>(promise: Promise<T>): Promise<T> => withTimeout(promise, timeout, { store: 'etcd' })
  // The value a record was read with: release(record) deletes the key only while it holds that.
  const readAs = new WeakMap<LockRecord, string>()

  /** When the lease ends, on this host's clock; `undefined` for a key without a lease. */
  const leaseEnd = async (lease: string, lockedAt: number | undefined, now: number): Promise<number | undefined> => {
    if (lease === '0' || lease === '') return undefined
    const before = Date.now()
    const { TTL, grantedTTL } = await bounded(client.leaseClient.leaseTimeToLive({ ID: lease }))
    const after = Date.now()
    const ttl = Number(TTL)
    // -1: the lease has ended, at an unknown time (etcd deletes its keys within about half a second).
    if (!(ttl >= 0)) return now
    // The lease ends within (TTL, TTL + 1] seconds of when etcd answered.
    const earliest = before + ttl * 1000
    const latest = after + (ttl + 1) * 1000
    const granted = lockedAt === undefined ? undefined : lockedAt + Number(grantedTTL) * 1000
    return granted !== undefined && granted >= earliest && granted <= latest ? granted : latest
  }

  /** The record of `kv`, with `held` and `remainingMs` against `now`, the read's now. */
  const toRecord = async (kv: EtcdKeyValue, name: string, now: number): Promise<LockRecord> => {
    const value = Buffer.from(kv.value).toString('utf8')
    const added = parseAddedValue(value)
    const until = await leaseEnd(String(kv.lease), added.lockedAt, now)
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: until === undefined ? undefined : new Date(until),
      lockedAt: added.lockedAt === undefined ? undefined : new Date(added.lockedAt),
      lockedBy: added.lockedBy,
      held: until === undefined || until > now,
      remainingMs: until === undefined ? undefined : Math.max(0, until - now),
    })
    readAs.set(record, value)
    return record
  }
  const read = async (name: string, key: string): Promise<LockRecord | undefined> => {
    const now = Date.now()
    const kv = (await bounded(client.get(key).exec())).kvs[0]
    return kv && toRecord(kv, name, now)
  }

  return {
    name: PROVIDER,
    clock: "this host's clock, plus each key's remaining lease time (whole seconds, counted by etcd)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const now = Date.now()
        // Names are raw in keys, so a name prefix is a key prefix.
        const { kvs } = await bounded(
          client
            .getAll()
            .prefix(`${space.prefix}${selection?.prefix ?? ''}`)
            .exec(),
        )
        const named = kvs.flatMap((kv) => {
          const name = etcdLockName(space, Buffer.from(kv.key).toString('utf8'))
          return name === undefined ? [] : [{ kv, name }]
        })
        const records = await inBatches(named, ({ kv, name }) => toRecord(kv, name, now))
        return { now: new Date(now), locks: records.sort(byName) }
      }),
    // Keys checked as the provider checks them, before anything is sent.
    ...keyedGetAndRelease(
      guard,
      (name) => checkedEtcdLockKey(space, name),
      read,
      readAs,
      async (key, value) =>
        (await bounded(client.if(key, 'Value', '==', value).then(client.delete().key(key)).commit())).succeeded,
    ),
    // etcd deletes a lock's key with its lease: there is never an expired record.
    removeExpired: async () => 0,
  }
}
