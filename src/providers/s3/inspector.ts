import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import { conditionalInspector } from '../../support/conditional-objects.ts'
import { inBatches } from '../../support/inspection.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { checkBucket, checkName, checkPrefix, describeS3Error, META, PROVIDER } from './format.ts'
import { type LockObject, lockObjects, PROBE_PREFIX } from './objects.ts'
import { checkClient, commandLoader, type S3Lib, type S3SendClient } from './sdk.ts'

/** Options of {@link s3LockInspector}: the provider's client, bucket, prefix and clock. */
export interface S3LockInspectorOptions {
  /** Your `S3Client` (the provider's). */
  client: S3SendClient
  /** The bucket, as the provider's `bucket`. */
  bucket: string
  /** The key prefix, as the provider's. @default "shedlock/" */
  prefix?: string
  /** The SDK's command classes. @default `await import('@aws-sdk/client-s3')` on first use */
  lib?: S3Lib
  /**
   * The clock the providers decide expiry on: `now`, `held` and `remainingMs` are read on it,
   * and a force-release writes its time. @default systemClock
   */
  clock?: Clock
  /**
   * Whether the server honours `If-Match` on DeleteObject. AWS S3 does (since 2024); Ceph RGW
   * 16.2 ignores it and deletes unconditionally, which could delete a lock another node took a
   * moment before. Where it does not, `removeExpired()` deletes nothing and resolves to 0.
   * `'detect'` measures it on the first `removeExpired()` (4 requests on a probe object
   * `<prefix>.shedlock-delete-probe-<uuid>`, once per client). @default 'detect'
   */
  conditionalDeletes?: boolean | 'detect'
}

/**
 * Reads and force-releases the locks of an S3 bucket, in the provider's (and Java ShedLock's)
 * format: one object per lock under the prefix, the lock in user metadata. For dashboards, health
 * endpoints and operators. `list()` is a ListObjectsV2 of the prefix (1,000 keys a page) and a
 * HEAD of each object (16 at a time), as the listing carries no user metadata; `get()` is one HEAD;
 * `release()` one PutObject with `If-Match` (plus a HEAD given a name, or a record whose holder
 * extended it since).
 *
 * Expiry is decided on each node's clock, so `now`, `held` and `remainingMs` are read on
 * `clock`, this host's by default. An object without a valid `lock-until` (not written by
 * ShedLock) is held, with an unknown `lockUntil`, as the provider never takes it over.
 *
 * A force-release overwrites the object, on `If-Match` of the version read, with `lock-until`
 * now and `locked-by` `"released"`: the lock is free at once, and the holder's release or
 * extension, conditional on the ETag of its own write, change nothing. Given a record whose holder
 * extended it since (a new ETag), it reads the object again and writes on its new ETag if it still
 * holds the acquisition read (`locked-by`, `locked-at` and the fencing counter unchanged).
 *
 * `removeExpired()` deletes the objects that are not held, each with a DeleteObject on `If-Match`
 * of the version read, so that an object another node took meanwhile stays; on a server that
 * ignores that condition (Ceph RGW 16.2) it deletes nothing (see `conditionalDeletes`).
 *
 * ```ts
 * import { S3Client } from '@aws-sdk/client-s3'
 * import { s3LockInspector } from 'shedlock/s3'
 * const inspector = s3LockInspector({ client: new S3Client({}), bucket: 'my-app-locks' })
 * const { locks } = await inspector.list()
 * ```
 *
 * @throws LockConfigurationError for a missing client, an invalid bucket name or prefix, or a
 *   `lib` without the command classes. `get` and `release` reject with it for a name whose key
 *   would be over 1024 bytes, which no lock can have.
 */
export function s3LockInspector(options: S3LockInspectorOptions): LockInspector {
  const { client, bucket } = options ?? {}
  checkClient(client)
  checkBucket(bucket)
  const prefix = checkPrefix(options.prefix)
  const commands = commandLoader(options.lib)
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('s3: clock must have a now() method returning epoch milliseconds')
  const conditionalDeletes = options.conditionalDeletes ?? 'detect'
  if (conditionalDeletes !== true && conditionalDeletes !== false && conditionalDeletes !== 'detect') {
    throw new LockConfigurationError(
      `s3: conditionalDeletes must be true, false or 'detect', got ${JSON.stringify(conditionalDeletes)}`,
    )
  }
  const objects = lockObjects(client, bucket, prefix, commands)
  const guard = storeGuard(describeS3Error(bucket))

  /** The names under the prefix (and the selection's), every page of the listing. */
  const names = async (selectionPrefix: string): Promise<string[]> => {
    const { ListObjectsV2Command } = await commands()
    const found: string[] = []
    let token: string | undefined
    do {
      const page = (await client.send(
        new ListObjectsV2Command({
          Bucket: bucket,
          Prefix: prefix + selectionPrefix,
          ...(token ? { ContinuationToken: token } : {}),
        }),
      )) as {
        Contents?: { Key?: string }[]
        NextContinuationToken?: string
        IsTruncated?: boolean
      }
      for (const entry of page.Contents ?? []) {
        if (entry.Key?.startsWith(prefix) && !entry.Key.startsWith(prefix + PROBE_PREFIX))
          found.push(entry.Key.slice(prefix.length))
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
    return found
  }

  return conditionalInspector({
    provider: PROVIDER,
    clockLabel: "this host's clock (S3 locks expire on each node's clock)",
    store: objects,
    keys: META,
    clock,
    guard,
    checkName: (name) => checkName(prefix, name),
    // The listing carries no user metadata: a HEAD of each object; those deleted since are left out.
    list: async (namePrefix) => {
      const heads = await inBatches(await names(namePrefix), async (name) => ({
        name,
        record: await objects.head(name),
      }))
      return heads.filter((h): h is { name: string; record: LockObject } => h.record !== undefined)
    },
    canRemove: async () =>
      conditionalDeletes === true || (conditionalDeletes === 'detect' && (await objects.deletesAreConditional())),
  })
}
