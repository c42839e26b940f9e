import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { conditionalLock } from '../../support/conditional-objects.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { checkBucket, checkName, checkPrefix, describeS3Error, META, PROVIDER } from './format.ts'
import { s3LockInspector } from './inspector.ts'
import { lockObjects } from './objects.ts'
import { checkClient, commandLoader, type S3Lib, type S3SendClient } from './sdk.ts'

/** Options of {@link s3LockProvider}. */
export interface S3LockProviderOptions {
  /**
   * Your `S3Client`. Give it request timeouts (`requestHandler: { connectionTimeout,
   * requestTimeout }`), or a lock attempt may wait as long as the network does. For Ceph RGW,
   * MinIO and other servers on a plain host name, set `forcePathStyle: true`.
   */
  client: S3SendClient
  /** The bucket that holds the lock objects; it must exist. */
  bucket: string
  /** Prepended to each lock name to make its object key; `''` for the bucket's root. @default "shedlock/" (Java ShedLock's default) */
  prefix?: string
  /**
   * Prefix of the `locked-by` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /** The SDK's command classes. @default `await import('@aws-sdk/client-s3')` on first use */
  lib?: S3Lib
  /**
   * The clock that decides expiry. S3 has no conditional write on a time and no clock to ask:
   * each node compares the object's `lock-until` with its own now, so nodes must keep their
   * clocks in sync. @default systemClock
   */
  clock?: Clock
  /** Passed to {@link s3LockInspector} by `inspector()`: whether DeleteObject honours `If-Match`. @default 'detect' */
  conditionalDeletes?: boolean | 'detect'
}

/**
 * Locks in an S3 bucket in Java ShedLock's format (its `S3LockProvider`): one object per lock, key
 * = prefix + name, the lock in user metadata `lock-until`, `locked-at` (ISO-8601 UTC instants)
 * and `locked-by`, and a body of 16 random bytes so that every write gets a new ETag. Java and
 * Node fleets can share a bucket. Works with AWS S3 and with Ceph RGW (tested on 16.2); needs a
 * server that honours `If-None-Match: *` and `If-Match` on PutObject (AWS since 2024).
 *
 * Acquire is a HEAD, then one conditional PutObject: `If-None-Match: *` when there is no
 * object, or `If-Match: <etag read>` when its `lock-until` has passed (on this node's clock); a
 * 412 or 409 means another node was first. A 5xx on a conditional write (Ceph RGW answers a
 * contended one with 500 now and then) is decided by a HEAD: our write, another's, or none, then
 * sent again. Two requests to take a lock, one (the HEAD) to find
 * it held. Release (to `lockAtLeastUntil`, or now) and extend are one PutObject with `If-Match:
 * <etag of our write>`, so they only touch the version this acquisition wrote: a holder whose
 * lock was taken over finds another ETag and changes nothing. Java ShedLock's extend and release
 * do the same after a HEAD. Objects are never deleted by the provider; a deleted object is
 * recreated by the next acquire, and a release never recreates one.
 *
 * The ETag goes quoted, as S3 returns it; Ceph RGW refuses the quoted form with 412, so after a
 * 412 on an object that a HEAD shows unchanged, the client's requests go unquoted from then on.
 *
 * S3 has been strongly consistent (read-after-write, and for HEAD and List) since December
 * 2020, and conditional writes on one key are atomic: one of concurrent `If-None-Match: *` puts
 * wins. Expiry is decided on this process's clock (see `clock`).
 *
 * An object under the prefix without a valid `lock-until` was not written by ShedLock: `lock()`
 * rejects with `LockProviderError` naming it rather than take it over or wait for ever.
 *
 * ```ts
 * import { S3Client } from '@aws-sdk/client-s3'
 * import { s3LockProvider } from 'shedlock/s3'
 * const provider = s3LockProvider({ client: new S3Client({}), bucket: 'my-app-locks' })
 * ```
 *
 * Each handle's `lockedBy` is the owner this acquisition stored. `provider.inspector()` is
 * {@link s3LockInspector} over the same client, bucket, prefix, clock and `lib`.
 *
 * @throws LockConfigurationError for a missing client, an invalid bucket name or prefix, an
 *   empty `lockedBy`, or a `lib` without the command classes.
 */
export function s3LockProvider(options: S3LockProviderOptions): ExtensibleLockProvider & InspectableLockProvider {
  const { client, bucket, lockedBy } = options ?? {}
  checkClient(client)
  checkBucket(bucket)
  const prefix = checkPrefix(options.prefix)
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `s3: lockedBy must be a non-empty string (it prefixes the locked-by metadata), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const commands = commandLoader(options.lib)
  const clock = options.clock ?? systemClock
  const objects = lockObjects(client, bucket, prefix, commands)
  const guard = storeGuard(describeS3Error(bucket))

  // A object without a valid lock-until was not written by shedlock: refused, never taken over.
  const notALock = (lockName: string, lockUntil: string | undefined): LockProviderError =>
    new LockProviderError(
      `s3: could not acquire lock "${lockName}": object s3://${bucket}/${objects.key(lockName)} has no valid ${META.lockUntil} metadata (${JSON.stringify(lockUntil ?? null)}), so it was not written by ShedLock; delete the object or use another prefix`,
      { provider: PROVIDER, lockName },
    )

  return {
    name: PROVIDER,
    inspector: () =>
      s3LockInspector({
        client,
        bucket,
        prefix,
        clock,
        ...(options.lib ? { lib: options.lib } : {}),
        ...(options.conditionalDeletes === undefined ? {} : { conditionalDeletes: options.conditionalDeletes }),
      }),
    async lock(configuration: LockConfiguration) {
      checkLockRequest(PROVIDER, configuration, clock)
      checkName(prefix, configuration.name)
      return conditionalLock(configuration, { store: objects, keys: META, clock, guard, lockedBy, notALock })
    },
  }
}
