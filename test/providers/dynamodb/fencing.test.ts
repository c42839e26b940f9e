// Fencing tokens on DynamoDB (dynalite, served from this process on a loopback port): 1,000
// acquisitions from three processes, and the paused holder (SIGSTOP) of docs/fencing.md. Over
// dist/: npm run build first.
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { DynamoDBClient } from '@aws-sdk/client-dynamodb'
import { afterAll, describe, expect, it } from 'vitest'
import { createDynamoDBLockTable, dynamoDBLockProvider } from '../../../src/providers/dynamodb/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import { fencingRuns } from '../../helpers/fencing-runs.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'

// dynalite ships no types: it exports one function that returns an http.Server.
const dynalite = createRequire(import.meta.url)('dynalite') as (options?: { createTableMs?: number }) => Server
// dynalite accepts any credentials; never real ones in tests.
const dummy = { region: 'us-east-1', credentials: { accessKeyId: 'dummy', secretAccessKey: 'dummy' } }

const started = await connectOrSkip('dynamodb', 'an in-process dynalite on a free loopback port', async () => {
  const server = dynalite({ createTableMs: 0 })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return { server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
})

const moduleFor = (endpoint: string, table: string): string => `
import { DynamoDBClient } from '@aws-sdk/client-dynamodb'
import { dynamoDBLockProvider } from 'shedlock/dynamodb'
const client = new DynamoDBClient({ ...${JSON.stringify(dummy)}, endpoint: ${JSON.stringify(endpoint)}, maxAttempts: 2 })
export const makeProvider = () => dynamoDBLockProvider({ client, tableName: ${JSON.stringify(table)} })
export const provider = makeProvider()
`

describe.skipIf(!started)('dynamodb fencing tokens (dynalite, several processes)', () => {
  const { server, endpoint } = started!
  const client = new DynamoDBClient({ ...dummy, endpoint, maxAttempts: 2 })
  const table = uniqueTable('fence')
  afterAll(async () => {
    client.destroy()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  it('1,000 acquisitions, releases, expiries and takeovers from 3 processes: tokens strictly increase in holding order', async () => {
    await createDynamoDBLockTable(client, table)
    const outcome = await fencingRuns({ providerModule: moduleFor(endpoint, table) })
    expect(outcome.holders).toBeGreaterThanOrEqual(1000)
    expect(outcome.processes).toBe(3)
    expect(outcome.died).toBeGreaterThan(0)
    expect(outcome.late).toBeLessThan(outcome.died / 2 + 1)
    expect(outcome.firstDecrease).toBeUndefined()
  }, 300_000)

  it('a holder paused past lockAtMostFor cannot write with its stale token after another node took the lock', async () => {
    await createDynamoDBLockTable(client, table)
    const outcome = await pausedHolder({
      holderProvider: moduleFor(endpoint, table),
      taker: dynamoDBLockProvider({ client, tableName: table }),
      lockAtMostForMs: 2_000,
    })
    expect(outcome.takerToken > outcome.holderToken).toBe(true)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
