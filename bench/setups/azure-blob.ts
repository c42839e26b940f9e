import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type AzureContainerClient, azureBlobLockProvider } from '../../src/providers/azure-blob/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

// The blob client of each lock is made by the container client; its methods are the requests.
const COUNT: CountSpec = { count: ['upload', 'getProperties', 'delete'], follow: ['getBlockBlobClient'] }
/** `SHEDLOCK_AZURITE_URL`, by default the azurite that scripts/azurite.sh starts. */
const ENDPOINT = process.env.SHEDLOCK_AZURITE_URL ?? 'http://127.0.0.1:10000/devstoreaccount1'
// azurite's well-known development account (its README); never real credentials.
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
const PREFIX = 'shedlock/'
const EMPTY = new Uint8Array(0)

const statusOf = (error: unknown): number | undefined => (error as { statusCode?: number }).statusCode

/**
 * The provider's requests, sent directly: HEAD (getProperties); an upload on `ifNoneMatch: '*'`
 * when there is no blob, or on `ifMatch` of the ETag read when its `lockUntil` has passed; the
 * release an upload on `ifMatch` of the ETag written.
 */
function rawAzure(container: AzureContainerClient): RawOperations {
  const upload = async (
    name: string,
    until: number,
    owner: string,
    conditions: { ifMatch: string } | { ifNoneMatch: '*' },
  ): Promise<string | undefined> => {
    try {
      const metadata = { lockUntil: new Date(until).toISOString(), lockedAt: new Date().toISOString(), lockedBy: owner }
      return (await container.getBlockBlobClient(PREFIX + name).upload(EMPTY, 0, { metadata, conditions })).etag ?? ''
    } catch (error) {
      if (statusOf(error) === 412 || statusOf(error) === 409) return undefined
      throw error
    }
  }
  return {
    async acquire(name) {
      const owner = rawOwner()
      let etag: string | undefined
      try {
        const properties = await container.getBlockBlobClient(PREFIX + name).getProperties()
        // azurite returns metadata names lower-case.
        const until = properties.metadata?.lockUntil ?? properties.metadata?.lockuntil
        if (Date.parse(until ?? '') > Date.now()) return undefined
        etag = await upload(name, Date.now() + 60_000, owner, { ifMatch: properties.etag ?? '' })
      } catch (error) {
        if (statusOf(error) !== 404) throw error
        etag = await upload(name, Date.now() + 60_000, owner, { ifNoneMatch: '*' })
      }
      if (etag === undefined) return undefined
      return {
        async release() {
          await upload(name, Date.now(), owner, { ifMatch: etag })
        },
      }
    },
  }
}

/** Azure Blob on azurite (scripts/azurite.sh, or `SHEDLOCK_AZURITE_URL`), a container per run, through one ContainerClient. */
export async function azureBlobSetup(context: SetupContext): Promise<StoreSetup> {
  const service = (): BlobServiceClient =>
    BlobServiceClient.fromConnectionString(
      `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};BlobEndpoint=${ENDPOINT};`,
      {
        retryOptions: { maxTries: 1 },
      },
    )
  const main = service()
  const containers: ContainerClient[] = []
  const newContainer = async (suffix: string, from: BlobServiceClient = main): Promise<ContainerClient> => {
    const container = from.getContainerClient(`shedlock-bench-${context.runId}-${suffix}`)
    await container.createIfNotExists()
    containers.push(container)
    return container
  }
  const container = await newContainer('main')
  // azurite may run from outside node_modules (scripts/azurite.sh's AZURITE_BLOB): its Server header names it.
  const server =
    (await container.getProperties())._response.headers.get('server') ?? `azurite ${packageVersion('azurite')}`
  const provider = (c: AzureContainerClient) => azureBlobLockProvider({ containerClient: c })
  let nodes = 0

  return {
    name: 'azure-blob',
    versions: {
      server: `${server} at ${ENDPOINT} (in memory)`,
      client: `@azure/storage-blob ${packageVersion('@azure/storage-blob')}, one ContainerClient, maxTries 1`,
    },
    notes: [
      'azurite is an emulator written in JavaScript, in memory: its figures say nothing about Azure itself (tens of ms per request), only about the client-side cost',
    ],
    provider: provider(container),
    raw: rawAzure(container),
    counted() {
      const { client: counted, counter } = countingProxy(container as AzureContainerClient, COUNT)
      return { provider: provider(counted), raw: rawAzure(counted), counter }
    },
    async separateNode() {
      // A service client of its own: its own HTTP agent, as another node would have.
      const own = service().getContainerClient(container.containerName)
      const { client: counted, counter } = countingProxy(own as AzureContainerClient, COUNT)
      const warm = await provider(own).lock(
        lockConfiguration({ name: `${context.runId}-warm-${++nodes}`, lockAtMostFor: 60_000 }),
      )
      await warm?.unlock()
      return { provider: provider(counted), counter, close: async () => {} }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const space = await newContainer(label)
      return {
        provider: provider(space),
        async fill(names) {
          const metadata = {
            lockUntil: new Date(Date.now() + 3_600_000).toISOString(),
            lockedAt: new Date().toISOString(),
            lockedBy: 'another-node',
          }
          await inParallel(names, 8, (name) => space.getBlockBlobClient(PREFIX + name).upload(EMPTY, 0, { metadata }))
        },
        async drain() {},
      }
    },
    async close() {
      for (const c of containers) await c.deleteIfExists().catch(() => {})
    },
  }
}
