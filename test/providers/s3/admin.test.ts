import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { s3LockProvider } from '../../../src/providers/s3/index.ts'
import { cli } from '../../cli/support/cli.ts'
import { cliBasics } from '../../cli/support/proof.ts'
import { createBucket, dropBucket, S3_URL, s3OrSkip, uniqueBucket } from '../../helpers/object-stores.ts'

const client = await s3OrSkip()
// The throwaway test user of scripts/ceph-rgw.sh; the CLI reads credentials from the environment, as the SDK does.
const credentials = {
  AWS_ACCESS_KEY_ID: process.env.SHEDLOCK_S3_ACCESS_KEY ?? 'shedlocktest',
  AWS_SECRET_ACCESS_KEY: process.env.SHEDLOCK_S3_SECRET_KEY ?? 'shedlocktestsecret',
}

describe.skipIf(!client)('shedlock CLI on S3 (Ceph RGW; the built bin)', () => {
  const s3 = client as S3Client
  const bucket = uniqueBucket('shedlock-cli')
  const initBucket = uniqueBucket('shedlock-cli-init')
  const url = (b: string, path = '/locks/') => `s3://${b}${path}?endpoint=${encodeURIComponent(S3_URL)}`
  for (const key of Object.keys(credentials)) process.env[key] ??= credentials[key as keyof typeof credentials]
  beforeAll(async () => {
    await createBucket(s3, bucket)
  })
  afterAll(async () => {
    await dropBucket(s3, bucket)
    await dropBucket(s3, initBucket)
    s3.destroy()
  })

  cliBasics({
    kind: /^S3 /,
    args: ['--url', url(bucket)],
    provider: () => s3LockProvider({ client: s3, bucket, prefix: 'locks/' }),
    isHeld: async (name) => {
      const object = await s3
        .send(new HeadObjectCommand({ Bucket: bucket, Key: `locks/${name}` }))
        .catch(() => undefined)
      const until = object?.Metadata?.['lock-until']
      return until !== undefined && Date.parse(until) > Date.now()
    },
    init: {
      args: ['--url', url(initBucket)],
      first: new RegExp(`created bucket ${initBucket}`),
      again: new RegExp(`bucket ${initBucket} already exists`),
    },
  })

  it('refuses credentials in the URL and --table', async () => {
    const withUser = await cli(['list', '--url', `s3://someone:secret@${bucket}/`])
    expect(withUser.code).toBe(2)
    expect(withUser.stderr).toMatch(/s3 URLs take no credentials/)
    expect(withUser.stderr).not.toContain('secret@')
    const withTable = await cli(['list', '--url', url(bucket), '--table', 'x'])
    expect(withTable.code).toBe(2)
    expect(withTable.stderr).toMatch(/--table does not apply.*bucket and the key prefix in the URL/)
  })
})
