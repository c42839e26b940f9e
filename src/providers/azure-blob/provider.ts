import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { conditionalLock } from '../../support/conditional-objects.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { type AzureContainerClient, checkContainerClient, lockBlobs } from './blobs.ts'
import { checkName, checkPrefix, describeAzureError, META, PROVIDER } from './format.ts'
import { azureBlobLockInspector } from './inspector.ts'

/** Options of {@link azureBlobLockProvider}. */
export interface AzureBlobLockProviderOptions {
  /**
   * Your `ContainerClient` (`@azure/storage-blob` 12.x); the container must exist. Its pipeline's
   * retries (`retryOptions: { maxTries, tryTimeoutInMs }`) bound how long a lock attempt may wait.
   */
  containerClient: AzureContainerClient
  /** Prepended to each lock name to make its blob name; `''` for the container's root. @default "shedlock/" */
  prefix?: string
  /**
   * Prefix of the `lockedBy` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * The clock that decides expiry: each node compares the blob's `lockUntil` with its own now
   * (a conditional write cannot compare a metadata time), so nodes must keep their clocks in
   * sync. @default systemClock
   */
  clock?: Clock
}

/**
 * Locks in an Azure Storage container: one block blob per lock, name = prefix + lock name, the
 * lock in metadata `lockUntil`, `lockedAt` (ISO-8601 UTC) and `lockedBy`, an empty body; the
 * shape of Java ShedLock's S3 objects (Java ShedLock has no Azure Blob store).
 *
 * Acquire is a HEAD (`getProperties`), then one conditional upload: `If-None-Match: *` when
 * there is no blob (409 `BlobAlreadyExists` when another node was first), or `If-Match: <etag
 * read>` when its `lockUntil` has passed on this node's clock (412 when another node was
 * first). Two requests to take a lock, one to find it held. Release (to `lockAtLeastUntil`, or
 * now) and extend are one upload on `If-Match: <etag of our write>`: Azure gives every write a
 * new ETag, so a holder whose lock was taken over changes nothing. Blobs are never deleted by the
 * provider; a deleted blob is recreated by the next acquire, and a release never recreates one.
 * Azure Storage is strongly consistent; a blob's conditional writes are atomic.
 *
 * ```ts
 * import { BlobServiceClient } from '@azure/storage-blob'
 * import { azureBlobLockProvider } from 'shedlock/azure-blob'
 * const containerClient = BlobServiceClient.fromConnectionString(process.env.AZURE_STORAGE_CONNECTION_STRING!).getContainerClient('locks')
 * await containerClient.createIfNotExists()
 * const provider = azureBlobLockProvider({ containerClient })
 * ```
 *
 * Each handle's `lockedBy` is the owner this acquisition stored. `provider.inspector()` is
 * {@link azureBlobLockInspector} over the same container, prefix and clock. A blob under the
 * prefix without a valid `lockUntil` was not written by shedlock: `lock()` rejects with
 * `LockProviderError` naming it.
 *
 * @throws LockConfigurationError for a missing or wrong client, a prefix that is not a string or
 *   too long, or an empty `lockedBy`.
 */
export function azureBlobLockProvider(
  options: AzureBlobLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { containerClient, lockedBy } = options ?? {}
  checkContainerClient(containerClient)
  const prefix = checkPrefix(options.prefix)
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `azure-blob: lockedBy must be a non-empty string (it prefixes the lockedBy metadata), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const clock = options.clock ?? systemClock
  const container = containerClient.containerName
  const blobs = lockBlobs(containerClient, prefix)
  const guard = storeGuard(describeAzureError(container))

  // A blob without a valid lock-until was not written by shedlock: refused, never taken over.
  const notALock = (lockName: string, lockUntil: string | undefined): LockProviderError =>
    new LockProviderError(
      `azure-blob: could not acquire lock "${lockName}": blob "${prefix}${lockName}" in container "${container}" has no valid ${META.lockUntil} metadata (${JSON.stringify(lockUntil ?? null)}), so it was not written by shedlock; delete the blob or use another prefix`,
      { provider: PROVIDER, lockName },
    )

  return {
    name: PROVIDER,
    inspector: () => azureBlobLockInspector({ containerClient, prefix, clock }),
    async lock(configuration: LockConfiguration) {
      checkLockRequest(PROVIDER, configuration, clock)
      checkName(prefix, configuration.name)
      return conditionalLock(configuration, { store: blobs, keys: META, clock, guard, lockedBy, notALock })
    },
  }
}
