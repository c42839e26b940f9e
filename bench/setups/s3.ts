import { randomBytes } from 'node:crypto'
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type S3SendClient, s3LockProvider } from '../../src/providers/s3/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['send'] }
/** `SHEDLOCK_S3_URL`, by default the Ceph RGW that scripts/ceph-rgw.sh starts. */
const ENDPOINT = process.env.SHEDLOCK_S3_URL ?? 'http://127.0.0.1:7480'
// The throwaway test user of scripts/ceph-rgw.sh; never real credentials.
const CREDENTIALS = {
  accessKeyId: process.env.SHEDLOCK_S3_ACCESS_KEY ?? 'shedlocktest',
  secretAccessKey: process.env.SHEDLOCK_S3_SECRET_KEY ?? 'shedlocktestsecret',
}
const PREFIX = 'shedlock/'

const statusOf = (error: unknown): number | undefined =>
  (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode

/**
 * The provider's requests, sent directly: HEAD; a PUT on `If-None-Match: *` when there is no
 * object, or on `If-Match` of the ETag read when its `lock-until` has passed; the release a PUT
 * on `If-Match` of the ETag written. The ETag goes unquoted, the form Ceph RGW takes (the
 * provider finds that out once per client). A random body, as the provider's: the ETag of a
 * rewrite must differ.
 */
function rawS3(client: S3SendClient, bucket: string): RawOperations {
  const put = async (
    key: string,
    until: number,
    owner: string,
    condition: { IfMatch: string } | { IfNoneMatch: '*' },
  ): Promise<string | undefined> => {
    const now = new Date().toISOString()
    try {
      const reply = (await client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: randomBytes(16),
          Metadata: { 'lock-until': new Date(until).toISOString(), 'locked-at': now, 'locked-by': owner },
          ...condition,
        }),
      )) as { ETag?: string }
      return (reply.ETag ?? '').replaceAll('"', '')
    } catch (error) {
      if (statusOf(error) === 412 || statusOf(error) === 409) return undefined
      throw error
    }
  }
  return {
    async acquire(name) {
      const key = PREFIX + name
      const owner = rawOwner()
      let etag: string | undefined
      try {
        const head = (await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))) as {
          ETag?: string
          Metadata?: Record<string, string>
        }
        if (Date.parse(head.Metadata?.['lock-until'] ?? '') > Date.now()) return undefined
        etag = await put(key, Date.now() + 60_000, owner, { IfMatch: (head.ETag ?? '').replaceAll('"', '') })
      } catch (error) {
        if (statusOf(error) !== 404) throw error
        etag = await put(key, Date.now() + 60_000, owner, { IfNoneMatch: '*' })
      }
      if (etag === undefined) return undefined
      return {
        async release() {
          await put(key, Date.now(), owner, { IfMatch: etag })
        },
      }
    },
  }
}

/** S3 on Ceph RGW (scripts/ceph-rgw.sh, or `SHEDLOCK_S3_URL`), a bucket per run, through one S3Client. */
export async function s3Setup(context: SetupContext): Promise<StoreSetup> {
  const clients: S3Client[] = []
  const open = (): S3Client => {
    const client = new S3Client({
      endpoint: ENDPOINT,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: CREDENTIALS,
      maxAttempts: 1,
    })
    clients.push(client)
    return client
  }
  const client = open()
  const buckets: string[] = []
  const newBucket = async (suffix: string): Promise<string> => {
    const bucket = `shedlock-bench-${context.runId}-${suffix}`
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
    buckets.push(bucket)
    return bucket
  }
  const emptyBucket = async (bucket: string): Promise<void> => {
    for (;;) {
      const page = await client.send(new ListObjectsV2Command({ Bucket: bucket }))
      const keys = (page.Contents ?? []).map((o) => o.Key!)
      if (keys.length === 0) return
      await inParallel(keys, 8, (Key) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key })))
    }
  }
  let bucket: string
  try {
    bucket = await newBucket('main')
  } catch (error) {
    for (const c of clients) c.destroy()
    throw error
  }
  const provider = (c: S3SendClient, b = bucket) => s3LockProvider({ client: c, bucket: b })

  return {
    name: 's3',
    versions: {
      server: `Ceph RGW at ${ENDPOINT}`,
      client: `@aws-sdk/client-s3 ${packageVersion('@aws-sdk/client-s3')}, one client, maxAttempts 1`,
    },
    notes: [
      "Ceph RGW on a memstore OSD on this machine: a loopback HTTP server with no disk, so the figures are the client-side cost plus a fast local server, not S3's own latency (tens of ms per request)",
    ],
    provider: provider(client),
    raw: rawS3(client, bucket),
    counted() {
      const { client: counted, counter } = countingProxy(client as S3SendClient, COUNT)
      return { provider: provider(counted), raw: rawS3(counted, bucket), counter }
    },
    async separateNode() {
      const own = open()
      const { client: counted, counter } = countingProxy(own as S3SendClient, COUNT)
      // The first call loads the SDK's command module, opens the socket and learns the ETag form: not part of the race.
      const warm = await provider(own).lock(
        lockConfiguration({ name: `${context.runId}-warm-${clients.length}`, lockAtMostFor: 60_000 }),
      )
      await warm?.unlock()
      return { provider: provider(counted), counter, close: async () => own.destroy() }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const spaceBucket = await newBucket(label)
      return {
        provider: provider(client, spaceBucket),
        async fill(names) {
          const until = new Date(Date.now() + 3_600_000).toISOString()
          const now = new Date().toISOString()
          await inParallel(names, 8, (name) =>
            client.send(
              new PutObjectCommand({
                Bucket: spaceBucket,
                Key: PREFIX + name,
                Body: randomBytes(16),
                Metadata: { 'lock-until': until, 'locked-at': now, 'locked-by': 'another-node' },
              }),
            ),
          )
        },
        drain: () => emptyBucket(spaceBucket),
      }
    },
    async close() {
      for (const b of buckets) {
        await emptyBucket(b).catch(() => {})
        await client.send(new DeleteBucketCommand({ Bucket: b })).catch(() => {})
      }
      for (const c of clients) c.destroy()
    },
  }
}
