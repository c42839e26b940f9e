import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import { conditionalInspector } from '../../support/conditional-objects.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { type AzureContainerClient, checkContainerClient, lockBlobs } from './blobs.ts'
import { checkName, checkPrefix, describeAzureError, META, PROVIDER } from './format.ts'

/** Options of {@link azureBlobLockInspector}: the provider's container, prefix and clock. */
export interface AzureBlobLockInspectorOptions {
  /** Your `ContainerClient` (the provider's). */
  containerClient: AzureContainerClient
  /** The blob name prefix, as the provider's. @default "shedlock/" */
  prefix?: string
  /**
   * The clock the providers decide expiry on: `now`, `held` and `remainingMs` are read on it,
   * and a force-release writes its time. @default systemClock
   */
  clock?: Clock
}

/**
 * Reads and force-releases the locks of an Azure Storage container, in the provider's format:
 * one blob per lock under the prefix, the lock in metadata. For dashboards, health endpoints and
 * operators. `list()` is one blob listing with metadata (5,000 blobs a page); `get()` one HEAD;
 * `release()` one upload on `If-Match` (plus a HEAD given a name, or a record whose holder
 * extended it since).
 *
 * Expiry is decided on each node's clock, so `now`, `held` and `remainingMs` are read on
 * `clock`, this host's by default. A blob without a valid `lockUntil` (not written by shedlock)
 * is held, with an unknown `lockUntil`, as the provider never takes it over.
 *
 * A force-release overwrites the blob, on `If-Match` of the version read, with `lockUntil` now
 * and `lockedBy` `"released"`: the lock is free at once, and the holder's release or extension,
 * conditional on the ETag of its own write, change nothing. Given a record whose holder extended
 * it since (a new ETag), it reads the blob again and writes on its new ETag if it still holds the
 * acquisition read (`lockedBy`, `lockedAt` and the fencing counter unchanged).
 * `removeExpired()` deletes the blobs that are not held, each on `If-Match` of the version read:
 * a blob another node took meanwhile stays (and does not count).
 *
 * ```ts
 * import { BlobServiceClient } from '@azure/storage-blob'
 * import { azureBlobLockInspector } from 'shedlock/azure-blob'
 * const containerClient = BlobServiceClient.fromConnectionString(process.env.AZURE_STORAGE_CONNECTION_STRING!).getContainerClient('locks')
 * const { locks } = await azureBlobLockInspector({ containerClient }).list()
 * ```
 *
 * @throws LockConfigurationError for a missing or wrong client or prefix. `get` and `release`
 *   reject with it for a name whose blob name would be over 1024 characters.
 */
export function azureBlobLockInspector(options: AzureBlobLockInspectorOptions): LockInspector {
  const { containerClient } = options ?? {}
  checkContainerClient(containerClient)
  const prefix = checkPrefix(options.prefix)
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('azure-blob: clock must have a now() method returning epoch milliseconds')
  const blobs = lockBlobs(containerClient, prefix)
  const guard = storeGuard(describeAzureError(containerClient.containerName))
  return conditionalInspector({
    provider: PROVIDER,
    clockLabel: "this host's clock (Azure Blob locks expire on each node's clock)",
    store: blobs,
    keys: META,
    clock,
    guard,
    checkName: (name) => checkName(prefix, name),
    // The listing carries the metadata: one request a page, no HEADs.
    list: async (namePrefix) => (await blobs.list(namePrefix)).map(({ name, blob }) => ({ name, record: blob })),
  })
}
