import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkBucketName,
  checkedKey,
  decodeLockUntil,
  describeNatsError,
  encodeLockUntil,
  isWrongLastSequence,
  type NatsKvEntry,
  notALockRecord,
  PROVIDER,
} from './format.ts'
import { type NatsInspectableKv, natsLockInspector } from './inspector.ts'

/**
 * The part of a JetStream KV bucket (`KV` from `@nats-io/kv` 3) that this provider calls. We
 * don't import `@nats-io/kv`: pass the bucket that `new Kvm(nc).create('shedlock-locks')` or
 * `new Kvm(nc).open('shedlock-locks')` resolves to.
 */
export interface NatsKv {
  /** The last entry of `key`, a delete marker included, or `null` if it has none. */
  get(key: string): Promise<NatsKvEntry | null>
  /** Writes `key` if it has no entry, or only a delete marker; resolves to the new revision. */
  create(key: string, data: Uint8Array): Promise<number>
  /** Writes `key` if its last revision is `version`; resolves to the new revision. */
  update(key: string, data: Uint8Array, version: number): Promise<number>
  /** Leaves a delete marker on `key`, if its last revision is `previousSeq`. */
  delete(key: string, options: { previousSeq: number }): Promise<void>
}

/** Options of {@link natsLockProvider}. */
export interface NatsLockProviderOptions {
  /**
   * Your JetStream KV bucket, from `@nats-io/kv` 3. Java ShedLock's bucket is named
   * {@link NATS_LOCK_BUCKET} (`shedlock-locks`); use it to share locks with Java nodes.
   */
  kv: NatsKv
  /** Decides when locks expire: the stored `lockUntil` is this clock's time. @default systemClock */
  clock?: Clock
}

/**
 * Locks as keys of a NATS JetStream KV bucket in Java ShedLock's format (the value is the 8-byte
 * `lockUntil`, nothing else), so Java and Node nodes share locks. Extensible; expiry is decided on
 * each node's `clock`; a lock's `fencingToken` is the revision of the write that took it.
 *
 * Create the bucket once, with one value per key (the default) and no TTL, and connect with
 * `maxReconnectAttempts: -1` (by default the client stops reconnecting after 10 attempts):
 *
 * ```ts
 * import { connect } from '@nats-io/transport-node'
 * import { Kvm } from '@nats-io/kv'
 * import { natsLockProvider, NATS_LOCK_BUCKET } from 'shedlock/nats'
 * const nc = await connect({ servers: 'nats://127.0.0.1:4222', maxReconnectAttempts: -1 })
 * const provider = natsLockProvider({ kv: await new Kvm(nc).create(NATS_LOCK_BUCKET) })
 * ```
 *
 * Each call waits at most the JetStream client's timeout (5 s by default), then rejects with
 * `LockProviderError`. See docs/providers/nats.md.
 *
 * @throws LockConfigurationError when `kv` lacks `get`, `create`, `update` or `delete`, or its
 *   bucket name is so long (over 1,905 characters) that no key fits in a subject.
 */
export function natsLockProvider(options: NatsLockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  const { kv } = options ?? {}
  if (!kv || (['get', 'create', 'update', 'delete'] as const).some((method) => typeof kv[method] !== 'function')) {
    throw new LockConfigurationError(
      'nats: pass your JetStream KV bucket as { kv }, e.g. await new Kvm(nc).create("shedlock-locks") from @nats-io/kv',
    )
  }
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('nats: clock must have a now() method returning epoch milliseconds')
  // @nats-io/kv's Bucket has a `bucket` name, which sets the key limit and improves error messages.
  const bucket = checkBucketName(kv)
  const guard = storeGuard(describeNatsError(bucket))

  // Resolves to the new revision, or undefined when another write came first.
  const conditional = async (write: () => Promise<number>): Promise<number | undefined> => {
    try {
      return await write()
    } catch (error) {
      if (isWrongLastSequence(error)) return undefined
      throw error
    }
  }

  return {
    name: PROVIDER,
    // The bucket's keys() and history(), which a @nats-io/kv bucket has, list and clean its records.
    inspector: () => natsLockInspector({ kv: kv as NatsKv & NatsInspectableKv, clock }),
    async lock(configuration: LockConfiguration) {
      checkLockRequest(PROVIDER, configuration, clock)
      const { name } = configuration
      // Checked before anything is sent: a name the server cannot take must not reach the connection.
      const key = checkedKey(name, bucket)
      const value = encodeLockUntil(configuration.lockAtMostUntil.getTime())
      const revision = await guard('acquire', name, async () => {
        const entry = await kv.get(key)
        if (entry?.operation !== 'PUT') {
          // create() also writes over a delete marker, conditionally on the marker's revision.
          return conditional(() => kv.create(key, value))
        }
        const lockUntil = decodeLockUntil(entry.value)
        if (lockUntil === undefined) throw notALockRecord(key, entry.value)
        if (lockUntil > clock.now()) return undefined
        return conditional(() => kv.update(key, value, entry.revision))
      })
      if (revision === undefined) return undefined

      // The revision of this acquisition's last write: if the entry has another one now, another
      // node took the lock after it expired, and this acquisition must not touch it.
      let current = revision
      return defineLock(configuration, {
        clock,
        // The revision of the write that took the lock, the bucket stream's sequence number: every
        // write to the bucket, of any key and by Java too, gets a greater one.
        fencingToken: BigInt(revision),
        unlock: (held) =>
          guard('release', name, async () => {
            const lockAtLeastUntil = held.lockAtLeastUntil.getTime()
            if (lockAtLeastUntil > clock.now())
              await conditional(() => kv.update(key, encodeLockUntil(lockAtLeastUntil), current))
            else {
              await conditional(async () => {
                await kv.delete(key, { previousSeq: current })
                return current
              })
            }
          }),
        extend: (next, held) =>
          guard('extend', name, async () => {
            // An expired lock is not extended even if no other node took it yet: the caller was
            // told it may lose the lock at lockAtMostUntil, and another node may be acquiring it now.
            if (held.lockAtMostUntil.getTime() <= clock.now()) return false
            const written = await conditional(() =>
              kv.update(key, encodeLockUntil(next.lockAtMostUntil.getTime()), current),
            )
            if (written === undefined) return false
            current = written
            return true
          }),
      })
    },
  }
}
