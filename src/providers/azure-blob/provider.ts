import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { conditionalLock } from '../../support/conditional-objects.ts'
import { FencingFloor } from '../../support/fencing.ts'
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
 * Locks as block blobs of an Azure Storage container (prefix + lock name, the lock in blob
 * metadata; the shape of Java ShedLock's S3 objects), through your `ContainerClient`, taken and
 * released by conditional uploads on ETags. Extensible; expiry is decided on each node's `clock`;
 * every lock carries a `fencingToken` at no extra request.
 *
 * ```ts
 * import { BlobServiceClient } from '@azure/storage-blob'
 * import { azureBlobLockProvider } from 'shedlock/azure-blob'
 * const containerClient = BlobServiceClient.fromConnectionString(process.env.AZURE_STORAGE_CONNECTION_STRING!).getContainerClient('locks')
 * await containerClient.createIfNotExists()
 * const provider = azureBlobLockProvider({ containerClient })
 * ```
 *
 * The container must exist. See docs/providers/azure-blob.md.
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
  const floor = new FencingFloor(clock)
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
      return conditionalLock(configuration, { store: blobs, keys: META, clock, floor, guard, lockedBy, notALock })
    },
  }
}
