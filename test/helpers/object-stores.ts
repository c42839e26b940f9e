import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3'
import { BlobServiceClient } from '@azure/storage-blob'
import { connectOrSkip } from './backends.ts'

/** The S3 endpoint of the tests: `SHEDLOCK_S3_URL`, by default the Ceph RGW that `scripts/ceph-rgw.sh` starts. */
export const S3_URL = process.env.SHEDLOCK_S3_URL ?? 'http://127.0.0.1:7480'
// The throwaway test user that scripts/ceph-rgw.sh creates; never real credentials.
const S3_CREDENTIALS = {
  accessKeyId: process.env.SHEDLOCK_S3_ACCESS_KEY ?? 'shedlocktest',
  secretAccessKey: process.env.SHEDLOCK_S3_SECRET_KEY ?? 'shedlocktestsecret',
}

/** An S3Client for the test endpoint (or `endpoint`), path-style, two attempts per request. */
export function s3Client(endpoint: string = S3_URL, maxAttempts = 2): S3Client {
  return new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: S3_CREDENTIALS, maxAttempts })
}

/** A bucket name no other test file uses. */
export function uniqueBucket(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`
}

/**
 * An S3Client that has listed the buckets at `SHEDLOCK_S3_URL`; `undefined` (skipped) when
 * unreachable and not required (in CI it is: start it with scripts/ceph-rgw.sh).
 */
export function s3OrSkip(): Promise<S3Client | undefined> {
  return connectOrSkip('s3', `${S3_URL} (SHEDLOCK_S3_URL; start it with scripts/ceph-rgw.sh)`, async () => {
    const client = s3Client()
    try {
      await client.send(new ListBucketsCommand({}))
    } catch (error) {
      client.destroy()
      throw error
    }
    return client
  })
}

/** Creates `bucket`. */
export async function createBucket(client: S3Client, bucket: string): Promise<void> {
  await client.send(new CreateBucketCommand({ Bucket: bucket }))
}

/** Deletes every object of `bucket`, then the bucket; best effort (for afterAll). */
export async function dropBucket(client: S3Client, bucket: string): Promise<void> {
  try {
    let token: string | undefined
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: bucket, ...(token ? { ContinuationToken: token } : {}) }),
      )
      await Promise.all(
        (page.Contents ?? []).map((o) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }))),
      )
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
    await client.send(new DeleteBucketCommand({ Bucket: bucket }))
  } catch {
    // Left for the next start of the throwaway server.
  }
}

/** The azurite Blob endpoint of the tests: `SHEDLOCK_AZURITE_URL`, by default the one `scripts/azurite.sh` starts. */
export const AZURITE_URL = process.env.SHEDLOCK_AZURITE_URL ?? 'http://127.0.0.1:10000/devstoreaccount1'
// azurite's well-known development account (published in its README); never real credentials.
const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

/** A connection string for azurite at `endpoint` (default {@link AZURITE_URL}). */
export function azuriteConnectionString(endpoint: string = AZURITE_URL, key: string = AZURITE_KEY): string {
  return `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${key};BlobEndpoint=${endpoint};`
}

/**
 * A BlobServiceClient that has listed the containers of azurite; `undefined` (skipped) when
 * unreachable and not required (in CI it is: start it with scripts/azurite.sh).
 */
export function azuriteOrSkip(): Promise<BlobServiceClient | undefined> {
  return connectOrSkip(
    'azure-blob',
    `${AZURITE_URL} (SHEDLOCK_AZURITE_URL; start it with scripts/azurite.sh)`,
    async () => {
      const service = azuriteService()
      await service.listContainers().next()
      return service
    },
  )
}

/** A BlobServiceClient for azurite (or `endpoint`), with `maxTries` tries per request. */
export function azuriteService(endpoint: string = AZURITE_URL, maxTries = 2, key?: string): BlobServiceClient {
  return BlobServiceClient.fromConnectionString(azuriteConnectionString(endpoint, key), {
    retryOptions: { maxTries, retryDelayInMs: 50, maxRetryDelayInMs: 200, tryTimeoutInMs: 10_000 },
  })
}
