import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb'
import { afterAll, describe, expect, it } from 'vitest'
import { dynamoDBLockProvider } from '../../../src/providers/dynamodb/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import { cli, lines } from '../../cli/support/cli.ts'
import { cliBasics } from '../../cli/support/proof.ts'

// dynalite ships no types: it exports one function that returns an http.Server.
const dynalite = createRequire(import.meta.url)('dynalite') as (options?: { createTableMs?: number }) => Server
// dynalite accepts any credentials; never real ones in tests. The CLI reads them from the environment, as the SDK does.
const credentials = { AWS_ACCESS_KEY_ID: 'dummy', AWS_SECRET_ACCESS_KEY: 'dummy' }

const started = await connectOrSkip('dynamodb', 'an in-process dynalite on a free loopback port', async () => {
  const server = dynalite({ createTableMs: 200 })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return { server, port: (server.address() as AddressInfo).port }
})

describe.skipIf(!started)('shedlock CLI on DynamoDB (dynalite; the built bin)', () => {
  const { server, port } = started!
  const client = new DynamoDBClient({
    region: 'us-east-1',
    credentials: { accessKeyId: 'dummy', secretAccessKey: 'dummy' },
    endpoint: `http://127.0.0.1:${port}`,
  })
  const table = uniqueTable('shedlock')
  const url = `dynamodb://127.0.0.1:${port}?table=${table}`
  for (const key of Object.keys(credentials)) process.env[key] ??= credentials[key as keyof typeof credentials]
  afterAll(async () => {
    client.destroy()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  cliBasics({
    kind: /^DynamoDB /,
    args: ['--url', url],
    provider: () => dynamoDBLockProvider({ client, tableName: table }),
    isHeld: async (name) => {
      const { Item } = await client.send(
        new GetItemCommand({ TableName: table, Key: { _id: { S: name } }, ConsistentRead: true }),
      )
      return (Item?.lockUntil?.S ?? '') > new Date().toISOString()
    },
    init: {
      args: ['--url', `dynamodb://127.0.0.1:${port}`, '--table', `${table}_init`],
      first: /created table .*_init .* ACTIVE/,
      again: /table .*_init already exists/,
    },
    missingLayout: {
      args: ['--url', `dynamodb://127.0.0.1:${port}`, '--table', `${table}_missing`],
      advice: /create it with: shedlock init --url dynamodb:\S+ --table \S+_missing/,
    },
  })

  it('list and unlock on a missing table say, in one line, to run shedlock init', async () => {
    for (const command of [['list'], ['unlock', '--name', 'x', '--yes']]) {
      const run = await cli([...command, '--url', `dynamodb://127.0.0.1:${port}`, '--table', `${table}_absent`])
      expect(run.code, run.stderr).toBe(1)
      expect(lines(run.stderr)).toHaveLength(1)
      expect(run.stderr).toMatch(
        /: table \S+_absent does not exist; create it with: shedlock init --url dynamodb:\S+ --table \S+_absent$/m,
      )
    }
  })

  it('without credentials says where the SDK looks for them', async () => {
    const run = await cli(['list', '--url', url], {
      env: { AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_PROFILE: 'shedlock-no-such-profile' },
    })
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/)
  })
})
