import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { type AddressInfo, createServer } from 'node:net'
import { BatchWriteItemCommand, DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import {
  createDynamoDBLockTable,
  type DynamoDBSendClient,
  dynamoDBLockProvider,
} from '../../src/providers/dynamodb/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  chunks,
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['send'] }
// dynalite accepts any credentials; never real ones here.
const DUMMY = { region: 'us-east-1', credentials: { accessKeyId: 'dummy', secretAccessKey: 'dummy' } }

/** The provider's conditional `UpdateItem` calls, sent directly. */
function rawDynamo(client: DynamoDBSendClient, tableName: string): RawOperations {
  const iso = (ms: number): string => new Date(ms).toISOString()
  return {
    async acquire(name) {
      const owner = rawOwner()
      const now = Date.now()
      try {
        await client.send(
          new UpdateItemCommand({
            TableName: tableName,
            Key: { _id: { S: name } },
            UpdateExpression: 'SET lockUntil = :lockUntil, lockedAt = :now, lockedBy = :owner',
            ConditionExpression: 'attribute_not_exists(lockUntil) OR lockUntil <= :now',
            ExpressionAttributeValues: {
              ':lockUntil': { S: iso(now + 60_000) },
              ':now': { S: iso(now) },
              ':owner': { S: owner },
            },
          }),
        )
      } catch (error) {
        if ((error as { name?: unknown }).name === 'ConditionalCheckFailedException') return undefined
        throw error
      }
      return {
        async release() {
          try {
            await client.send(
              new UpdateItemCommand({
                TableName: tableName,
                Key: { _id: { S: name } },
                UpdateExpression: 'SET lockUntil = :lockUntil',
                ConditionExpression: 'lockedBy = :owner',
                ExpressionAttributeValues: { ':lockUntil': { S: iso(Date.now()) }, ':owner': { S: owner } },
              }),
            )
          } catch (error) {
            if ((error as { name?: unknown }).name !== 'ConditionalCheckFailedException') throw error
          }
        },
      }
    },
  }
}

/** A loopback port that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** Starts dynalite (in memory) in a child process of its own, so that it does not share the benchmark's event loop. */
async function startDynalite(): Promise<{ child: ChildProcess; port: number }> {
  const cli = createRequire(import.meta.url).resolve('dynalite/cli.js')
  // dynalite reads `--port 0` as no port and listens on 4567: a second one (the overhead's
  // processes run while the suite's own is up) would fail with EADDRINUSE.
  const child = spawn(
    process.execPath,
    [cli, '--port', String(await freePort()), '--host', '127.0.0.1', '--createTableMs', '0', '--deleteTableMs', '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  const port = await new Promise<number>((resolve, reject) => {
    let output = ''
    const timer = setTimeout(() => reject(new Error(`dynalite did not start within 10 s: ${output}`)), 10_000)
    child.stdout!.on('data', (chunk: Buffer) => {
      output += String(chunk)
      const match = /listening at: \S+:(\d+)/.exec(output)
      if (match) {
        clearTimeout(timer)
        resolve(Number(match[1]))
      }
    })
    child.stderr!.on('data', (chunk: Buffer) => {
      output += String(chunk)
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`dynalite exited with code ${code}: ${output}`))
    })
  })
  return { child, port }
}

/** DynamoDB as emulated by dynalite (in memory, a child process on a free loopback port), through one DynamoDBClient. */
export async function dynamodbSetup(context: SetupContext): Promise<StoreSetup> {
  const { child, port } = await startDynalite()
  const stop = (): void => {
    if (child.exitCode === null) child.kill()
  }
  const clients: DynamoDBClient[] = []
  const open = (): DynamoDBClient => {
    const client = new DynamoDBClient({ ...DUMMY, endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 })
    clients.push(client)
    return client
  }
  const client = open()
  const newTable = async (suffix: string): Promise<string> => {
    const table = `shedlock-bench-${context.runId}-${suffix}`
    await createDynamoDBLockTable(client, table)
    return table
  }
  let table: string
  try {
    table = await newTable('main')
  } catch (error) {
    stop()
    throw error
  }

  return {
    name: 'dynamodb',
    versions: {
      server: `dynalite ${packageVersion('dynalite')} (in memory, its own process)`,
      client: `@aws-sdk/client-dynamodb ${packageVersion('@aws-sdk/client-dynamodb')}, one client`,
    },
    notes: [
      'an emulator written in JavaScript: its figures say nothing about DynamoDB itself, only about the client-side cost',
    ],
    provider: dynamoDBLockProvider({ client, tableName: table }),
    raw: rawDynamo(client, table),
    counted() {
      const { client: counted, counter } = countingProxy(client as DynamoDBSendClient, COUNT)
      return {
        provider: dynamoDBLockProvider({ client: counted, tableName: table }),
        raw: rawDynamo(counted, table),
        counter,
      }
    },
    async separateNode() {
      const own = open()
      const { client: counted, counter } = countingProxy(own as DynamoDBSendClient, COUNT)
      // The SDK's first call loads its command module and opens the socket: not part of the race.
      const warm = await dynamoDBLockProvider({ client: own, tableName: table }).lock(
        lockConfiguration({ name: `${context.runId}-warm-${clients.length}`, lockAtMostFor: 60_000 }),
      )
      await warm?.unlock()
      return {
        provider: dynamoDBLockProvider({ client: counted, tableName: table }),
        counter,
        close: async () => own.destroy(),
      }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const spaceTable = await newTable(label)
      return {
        provider: dynamoDBLockProvider({ client, tableName: spaceTable }),
        async fill(names) {
          const until = new Date(Date.now() + 3_600_000).toISOString()
          const now = new Date().toISOString()
          await inParallel(chunks(names, 25), 4, (slice) =>
            client.send(
              new BatchWriteItemCommand({
                RequestItems: {
                  [spaceTable]: slice.map((name) => ({
                    PutRequest: {
                      Item: {
                        _id: { S: name },
                        lockUntil: { S: until },
                        lockedAt: { S: now },
                        lockedBy: { S: 'another-node' },
                      },
                    },
                  })),
                },
              }),
            ),
          )
        },
        async drain() {},
      }
    },
    async close() {
      // dynalite keeps its tables in memory: stopping it removes them.
      for (const c of clients) c.destroy()
      stop()
    },
  }
}
