import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { conditionalLock } from '../../support/conditional-objects.ts'
import { FencingFloor } from '../../support/fencing.ts'
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
 * Locks as objects of an S3 bucket in Java ShedLock's format (its `S3LockProvider`), through your
 * `S3Client`, so Java and Node fleets can share a bucket. Extensible; expiry is decided on each
 * node's `clock`; every lock carries a `fencingToken` at no extra request. Needs a server that
 * honours `If-None-Match: *` and `If-Match` on PutObject (AWS S3, Ceph RGW).
 *
 * ```ts
 * import { S3Client } from '@aws-sdk/client-s3'
 * import { s3LockProvider } from 'shedlock/s3'
 * const provider = s3LockProvider({ client: new S3Client({}), bucket: 'my-app-locks' })
 * ```
 *
 * The bucket must exist. Give the client request timeouts, or a lock attempt waits as long as the
 * network does. See docs/providers/s3.md.
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
  const floor = new FencingFloor(clock)
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
      return conditionalLock(configuration, { store: objects, keys: META, clock, floor, guard, lockedBy, notALock })
    },
  }
}
