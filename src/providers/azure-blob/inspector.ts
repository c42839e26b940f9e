import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord } from '../../core/lock-inspector.ts'
import { byName, inBatches, releaseAsRead } from '../../support/inspection.ts'
import { RELEASED_BY } from '../../support/sql/sql-inspector.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { type AzureContainerClient, checkContainerClient, type LockBlob, lockBlobs } from './blobs.ts'
import { checkName, checkPrefix, describeAzureError, parseInstant, PROVIDER, writeMetadata } from './format.ts'

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

/** What a record's blob held when it was read: release(record) matches exactly that version. */
interface ReadState {
  readonly etag: string
  readonly lockedAt: string | undefined
}

/**
 * Reads and force-releases the locks of an Azure Storage container, in the provider's format:
 * one blob per lock under the prefix, the lock in metadata. For dashboards, health endpoints and
 * operators. `list()` is one blob listing with metadata (5,000 blobs a page); `get()` one HEAD;
 * `release()` one upload on `If-Match` (plus a HEAD given a name).
 *
 * Expiry is decided on each node's clock, so `now`, `held` and `remainingMs` are read on
 * `clock`, this host's by default. A blob without a valid `lockUntil` (not written by shedlock)
 * is held, with an unknown `lockUntil`, as the provider never takes it over.
 *
 * A force-release overwrites the blob, on `If-Match` of the version read, with `lockUntil` now
 * and `lockedBy` `"released"`: the lock is free at once, and the holder's release or extension,
 * conditional on the ETag of its own write, change nothing. `removeExpired()` deletes the blobs
 * that are not held, each on `If-Match` of the version read: a blob another node took meanwhile
 * stays (and does not count).
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
  if (typeof clock?.now !== 'function') throw new LockConfigurationError('azure-blob: clock must have a now() method returning epoch milliseconds')
  const blobs = lockBlobs(containerClient, prefix)
  const guard = storeGuard(describeAzureError(containerClient.containerName))
  const readAs = new WeakMap<LockRecord, ReadState>()

  const toRecord = (name: string, blob: LockBlob, now: number): LockRecord => {
    const untilMs = parseInstant(blob.lockUntil)
    const atMs = parseInstant(blob.lockedAt)
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: Number.isNaN(untilMs) ? undefined : new Date(untilMs),
      lockedAt: Number.isNaN(atMs) ? undefined : new Date(atMs),
      lockedBy: blob.lockedBy,
      held: Number.isNaN(untilMs) ? true : untilMs > now,
      remainingMs: Number.isNaN(untilMs) ? undefined : Math.max(0, untilMs - now),
    })
    readAs.set(record, { etag: blob.etag, lockedAt: blob.lockedAt })
    return record
  }

  const read = async (namePrefix: string): Promise<{ now: number; locks: LockRecord[] }> => {
    const listed = await blobs.list(namePrefix)
    const now = clock.now()
    return { now, locks: listed.map(({ name, blob }) => toRecord(name, blob, now)).sort(byName) }
  }

  const inspector: LockInspector = {
    name: PROVIDER,
    clock: "this host's clock (Azure Blob locks expire on each node's clock)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const { now, locks } = await read(selection?.prefix ?? '')
        return { now: new Date(now), locks }
      }),
    get: async (name) => {
      checkName(prefix, name)
      return guard('inspect', name, async () => {
        const blob = await blobs.head(name)
        return blob && toRecord(name, blob, clock.now())
      })
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      checkName(prefix, name)
      return guard('release', name, () =>
        releaseAsRead(
          lock,
          readAs,
          () => inspector.get(name),
          async (state) => (await blobs.replace(name, state.etag, writeMetadata(clock.now(), state.lockedAt ?? clock.now(), RELEASED_BY))) !== undefined,
        ),
      )
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        const { locks } = await read(selection?.prefix ?? '')
        const removed = await inBatches(
          locks.filter((lock) => !lock.held),
          (lock) => blobs.remove(lock.name, readAs.get(lock)!.etag),
        )
        return removed.filter(Boolean).length
      }),
  }
  return inspector
}
