import { LockConfigurationError } from '../../core/errors.ts'
import type { ConditionalRecordStore, StoredRecord } from '../../support/conditional-objects.ts'
import { isConditionFailure, isNotFound, readMetadata } from './format.ts'

// The `@azure/storage-blob` ContainerClient as the provider and the inspector use it, and the
// four requests a lock needs (HEAD, conditional upload, conditional delete, listing).

/** Access conditions of a request, as `@azure/storage-blob` takes them. */
export interface AzureBlobConditions {
  ifMatch?: string
  ifNoneMatch?: string
}

/**
 * The part of a `BlockBlobClient` (`@azure/storage-blob` 12.x) that shedlock calls.
 */
export interface AzureBlockBlobClient {
  upload(
    body: Uint8Array,
    contentLength: number,
    options: { metadata: Record<string, string>; conditions: AzureBlobConditions },
  ): Promise<{ etag?: string }>
  getProperties(): Promise<{ etag?: string; metadata?: Record<string, string> }>
  delete(options: { conditions: AzureBlobConditions }): Promise<unknown>
}

/**
 * The part of a `ContainerClient` (`@azure/storage-blob` 12.x) that shedlock calls: pass yours
 * as it is. shedlock does not import the SDK.
 */
export interface AzureContainerClient {
  readonly containerName: string
  getBlockBlobClient(blobName: string): AzureBlockBlobClient
  listBlobsFlat(options: {
    prefix: string
    includeMetadata: true
  }): AsyncIterable<{ name: string; metadata?: Record<string, string>; properties: { etag?: string } }>
}

/** @throws LockConfigurationError unless `client` looks like a ContainerClient. */
export function checkContainerClient(client: unknown): asserts client is AzureContainerClient {
  const c = client as Partial<AzureContainerClient> | null | undefined
  if (
    !c ||
    typeof c.getBlockBlobClient !== 'function' ||
    typeof c.listBlobsFlat !== 'function' ||
    typeof c.containerName !== 'string'
  ) {
    throw new LockConfigurationError(
      "azure-blob: pass your ContainerClient (from @azure/storage-blob) as containerClient, e.g. BlobServiceClient.fromConnectionString(...).getContainerClient('locks')",
    )
  }
}

/** A lock blob as read. */
export type LockBlob = StoredRecord

/** The blob operations of one container and prefix: the conditional writes of {@link ConditionalRecordStore}, on blobs, and these. */
export interface LockBlobs extends ConditionalRecordStore {
  /** Deletes `name`'s blob if its ETag is still `etag`; false when it changed or is gone. */
  remove(name: string, etag: string): Promise<boolean>
  /** Every lock blob whose name starts with the prefix and `namePrefix`: one listing, 5,000 blobs a page, metadata included. */
  list(namePrefix: string): Promise<{ name: string; blob: LockBlob }[]>
}

// Azure gives every write a new ETag, so the body carries nothing.
const EMPTY = new Uint8Array(0)

export function lockBlobs(container: AzureContainerClient, prefix: string): LockBlobs {
  const blob = (name: string): AzureBlockBlobClient => container.getBlockBlobClient(prefix + name)
  const upload = async (
    name: string,
    metadata: Record<string, string>,
    conditions: AzureBlobConditions,
  ): Promise<string | undefined> => {
    try {
      return (await blob(name).upload(EMPTY, 0, { metadata, conditions })).etag ?? ''
    } catch (error) {
      if (isConditionFailure(error)) return undefined
      throw error
    }
  }
  return {
    head: async (name) => {
      try {
        const properties = await blob(name).getProperties()
        return { etag: properties.etag ?? '', ...readMetadata(properties.metadata) }
      } catch (error) {
        if (isNotFound(error)) return undefined
        throw error
      }
    },
    create: (name, metadata) => upload(name, metadata, { ifNoneMatch: '*' }),
    replace: (name, etag, metadata) => upload(name, metadata, { ifMatch: etag }),
    remove: async (name, etag) => {
      try {
        await blob(name).delete({ conditions: { ifMatch: etag } })
        return true
      } catch (error) {
        if (isConditionFailure(error) || isNotFound(error)) return false
        throw error
      }
    },
    list: async (namePrefix) => {
      const found: { name: string; blob: LockBlob }[] = []
      for await (const item of container.listBlobsFlat({ prefix: prefix + namePrefix, includeMetadata: true })) {
        // The listing gives ETags bare (azurite) where HEAD quotes them; If-Match takes the quoted form.
        const etag = item.properties.etag ?? ''
        const quoted = etag.startsWith('"') ? etag : `"${etag}"`
        if (item.name.startsWith(prefix))
          found.push({ name: item.name.slice(prefix.length), blob: { etag: quoted, ...readMetadata(item.metadata) } })
      }
      return found
    },
  }
}
