// Fencing tokens on S3 (Ceph RGW): 1,000 acquisitions from three processes, and the paused holder
// (SIGSTOP) of docs/fencing.md, for the object-store family (S3 and Azure Blob share the lock
// code, src/support/conditional-objects.ts). Over dist/: npm run build first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { s3LockProvider } from '../../../src/providers/s3/index.ts'
import { fencingRuns } from '../../helpers/fencing-runs.ts'
import { createBucket, dropBucket, S3_URL, s3OrSkip, uniqueBucket } from '../../helpers/object-stores.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'

const client = await s3OrSkip()

// The child processes build their clients from the same test defaults as test/helpers/object-stores.ts.
const moduleFor = (bucket: string): string => `
import { S3Client } from '@aws-sdk/client-s3'
import { s3LockProvider } from 'shedlock/s3'
const client = new S3Client({
  endpoint: ${JSON.stringify(S3_URL)}, region: 'us-east-1', forcePathStyle: true, maxAttempts: 2,
  credentials: {
    accessKeyId: process.env.SHEDLOCK_S3_ACCESS_KEY ?? 'shedlocktest',
    secretAccessKey: process.env.SHEDLOCK_S3_SECRET_KEY ?? 'shedlocktestsecret',
  },
})
export const makeProvider = () => s3LockProvider({ client, bucket: ${JSON.stringify(bucket)} })
export const provider = makeProvider()
`

describe.skipIf(!client)('s3 fencing tokens (Ceph RGW, several processes)', () => {
  const s3 = client!
  const bucket = uniqueBucket('shedlock-fence')
  beforeAll(() => createBucket(s3, bucket))
  afterAll(async () => {
    await dropBucket(s3, bucket)
    s3.destroy()
  })

  it('1,000 acquisitions, releases, expiries and takeovers from 3 processes: tokens strictly increase in holding order', async () => {
    const outcome = await fencingRuns({ providerModule: moduleFor(bucket) })
    expect(outcome.holders).toBeGreaterThanOrEqual(1000)
    // At least two processes: on Ceph RGW one of three is now and then starved of the lock for a
    // whole run (holders per process 719 / 281 and 789 / 212 in CI, 2026-12-07; 763 / 238 / 1 in
    // stop 39's): a fairness of the store's conditional writes, not of the tokens, which two
    // processes taking turns already compare across processes.
    expect(outcome.processes).toBeGreaterThanOrEqual(2)
    expect(outcome.died).toBeGreaterThan(0)
    expect(outcome.late).toBeLessThan(outcome.died / 2 + 1)
    expect(outcome.firstDecrease).toBeUndefined()
  }, 300_000)

  it('a holder paused past lockAtMostFor cannot write with its stale token after another node took the lock', async () => {
    const outcome = await pausedHolder({
      holderProvider: moduleFor(bucket),
      taker: s3LockProvider({ client: s3, bucket }),
      lockAtMostForMs: 2_000,
    })
    expect(outcome.takerToken > outcome.holderToken).toBe(true)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
