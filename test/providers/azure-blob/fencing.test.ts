// Fencing tokens on Azure Blob (azurite): 1,000 acquisitions from three processes. (The paused
// holder of the object-store family runs on S3: test/providers/s3/fencing.test.ts.) Over dist/:
// npm run build first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fencingRuns } from '../../helpers/fencing-runs.ts'
import { azuriteConnectionString, azuriteOrSkip, uniqueBucket } from '../../helpers/object-stores.ts'

const service = await azuriteOrSkip()

const moduleFor = (container: string): string => `
import { BlobServiceClient } from '@azure/storage-blob'
import { azureBlobLockProvider } from 'shedlock/azure-blob'
const service = BlobServiceClient.fromConnectionString(${JSON.stringify(azuriteConnectionString())}, {
  retryOptions: { maxTries: 2, retryDelayInMs: 50, maxRetryDelayInMs: 200, tryTimeoutInMs: 10000 },
})
export const makeProvider = () => azureBlobLockProvider({ containerClient: service.getContainerClient(${JSON.stringify(container)}) })
export const provider = makeProvider()
`

describe.skipIf(!service)('azure-blob fencing tokens (azurite, several processes)', () => {
  const container = service!.getContainerClient(uniqueBucket('shedlock-fence'))
  beforeAll(async () => {
    await container.create()
  })
  afterAll(async () => {
    await container.deleteIfExists()
  })

  it('1,000 acquisitions, releases, expiries and takeovers from 3 processes: tokens strictly increase in holding order', async () => {
    const outcome = await fencingRuns({ providerModule: moduleFor(container.containerName) })
    expect(outcome.holders).toBeGreaterThanOrEqual(1000)
    expect(outcome.processes).toBe(3)
    expect(outcome.died).toBeGreaterThan(0)
    expect(outcome.late).toBeLessThan(outcome.died / 2 + 1)
    expect(outcome.firstDecrease).toBeUndefined()
  }, 300_000)
})
