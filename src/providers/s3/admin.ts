import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { type AwsAdminClient, adminRegion, replyDateClock } from '../../support/aws-sdk.ts'
import { importDriver } from '../../support/import-driver.ts'
import type { AdminProviderOptions, Check, StoreAdmin, StoreOptions } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { DEFAULT_PREFIX, META } from './format.ts'
import { s3LockInspector } from './inspector.ts'
import { s3LockProvider } from './provider.ts'
import type { S3Lib } from './sdk.ts'

type CommandClass = new (input: object) => object
interface SdkModule extends S3Lib {
  S3Client: new (config: {
    region?: string
    endpoint?: string
    forcePathStyle?: boolean
    maxAttempts: number
    requestHandler: { connectionTimeout: number; requestTimeout: number }
  }) => AwsAdminClient
  HeadBucketCommand: CommandClass
  CreateBucketCommand: CommandClass
}

const SDK = '@aws-sdk/client-s3'
const TIMEOUT_MS = 10_000

/** `shedlock schema s3`: S3 needs no schema, only a bucket. */
export function schema(): string {
  return [
    `# One object per lock: key <prefix><name> (prefix ${DEFAULT_PREFIX}), user metadata ${META.lockUntil}, ${META.lockedAt} (ISO-8601), ${META.lockedBy}.`,
    '# Nothing to create but the bucket:',
    'aws s3 mb s3://BUCKET',
  ].join('\n')
}

/**
 * Opens an `s3://BUCKET[/PREFIX][?endpoint=http://HOST:PORT&region=R]` URL with the AWS SDK v3.
 * The prefix is the URL's path after the bucket (`s3://b/locks/` → `locks/`; `s3://b/` → the
 * bucket's root; `s3://b` → the provider's default `shedlock/`). `?endpoint=` names another S3
 * server (Ceph RGW, MinIO), addressed path-style. Credentials come from the SDK's usual sources
 * (AWS_ACCESS_KEY_ID..., profiles, roles), never from the URL.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.username !== '' || parsed.password !== '') {
    throw new UsageError(
      's3 URLs take no credentials: the AWS SDK reads them from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role',
    )
  }
  if (options.table !== undefined)
    throw new UsageError('s3 has no table: name the bucket and prefix in the URL, s3://BUCKET/PREFIX')
  const bucket = parsed.hostname
  if (bucket === '') throw new UsageError(`name the bucket: s3://BUCKET[/PREFIX], got ${url.redacted}`)
  const prefix = parsed.pathname === '' ? DEFAULT_PREFIX : decodeURIComponent(parsed.pathname.slice(1))
  const parameters = ownParameters(url, ['endpoint', 'region'])
  const endpoint = parameters.get('endpoint')
  if (endpoint !== undefined && !/^https?:\/\/[^/]+\/?$/.test(endpoint))
    throw new UsageError(`?endpoint= must be http(s)://HOST[:PORT], got ${JSON.stringify(endpoint)}`)
  const region = adminRegion(parameters.get('region'), endpoint)
  const sdk = await importDriver<SdkModule>(SDK, SDK, 's3://')
  const client = new sdk.S3Client({
    ...(region ? { region } : {}),
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    maxAttempts: 2,
    requestHandler: { connectionTimeout: TIMEOUT_MS, requestTimeout: TIMEOUT_MS },
  })
  const bucketExists = async (): Promise<boolean> => {
    try {
      await client.send(new sdk.HeadBucketCommand({ Bucket: bucket }))
      return true
    } catch (error) {
      if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false
      throw error
    }
  }
  try {
    await bucketExists()
  } catch (error) {
    client.destroy()
    const credentials =
      (error as { name?: unknown }).name === 'CredentialsProviderError'
        ? ' (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)'
        : ''
    throw new CliError(
      `cannot reach S3 at ${url.redacted}: ${firstLine(error)}${credentials}; check the URL, the endpoint, the region and the credentials`,
      {
        cause: error,
      },
    )
  }
  const where = `s3://${bucket}/${prefix}${endpoint ? ` at ${endpoint}` : ''}`
  const provider = (options?: AdminProviderOptions) => {
    const lockedBy = options?.lockedBy
    // User metadata travels in HTTP headers, which take ASCII only (a pause's reason comes after " — ").
    if (lockedBy !== undefined && !/^[\x20-\x7e]*$/.test(lockedBy))
      throw new CliError(
        `S3 keeps a lock's holder in object metadata, which takes ASCII only: ${JSON.stringify(lockedBy)} is not; pause without --reason, with an ASCII --by`,
      )
    return s3LockProvider({ client, bucket, prefix, lib: sdk, lockedBy })
  }

  return {
    kind: 'S3',
    where,
    extensible: true,
    provider,
    inspector: s3LockInspector({ client, bucket, prefix, lib: sdk }),
    async init() {
      if (await bucketExists()) return [`bucket ${bucket} already exists: nothing to do`]
      await client.send(new sdk.CreateBucketCommand({ Bucket: bucket }))
      return [`created bucket ${bucket}`]
    },
    ping: async () => {
      await bucketExists()
      return `S3${endpoint ? ` at ${endpoint}` : ''}`
    },
    async structure(): Promise<Check[]> {
      const label = `bucket ${bucket}`
      if (!(await bucketExists()))
        return [
          { status: 'fail', label, detail: `does not exist; create it with: shedlock init --url ${url.redacted}` },
        ]
      return [{ status: 'ok', label, detail: `exists; lock objects under "${prefix}"` }]
    },
    async remove(name) {
      await client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: prefix + name }))
    },
    readClock: replyDateClock(client, () => bucketExists()),
    clockDependence: 'the S3 provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: async () => client.destroy(),
  }
}
