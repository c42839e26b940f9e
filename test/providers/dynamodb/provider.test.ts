import assert from 'node:assert/strict'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import * as sdk from '@aws-sdk/client-dynamodb'
import {
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  createLockingTaskExecutor,
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import {
  createDynamoDBLockTable,
  type DynamoDBSendClient,
  dynamoDBLockProvider,
} from '../../../src/providers/dynamodb/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

// dynalite ships no types: it exports one function that returns an http.Server.
const dynalite = createRequire(import.meta.url)('dynalite') as (options?: {
  createTableMs?: number
  deleteTableMs?: number
}) => Server

const HOUR = 3_600_000
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
// dynalite accepts any credentials; never real ones in tests.
const dummy = { region: 'us-east-1', credentials: { accessKeyId: 'dummy', secretAccessKey: 'dummy' } }

type Item = Record<string, { S?: string; N?: string }>

async function startDynalite(port = 0): Promise<{ server: Server; port: number }> {
  const server = dynalite({ createTableMs: 200, deleteTableMs: 50 })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve())
  })
  return { server, port: (server.address() as AddressInfo).port }
}

async function stopDynalite(server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())))
}

const started = await connectOrSkip('dynamodb', 'an in-process dynalite on a free loopback port', () => startDynalite())

describe.skipIf(!started)('dynamodb (dynalite)', () => {
  const { server, port } = started!
  const client = new DynamoDBClient({ ...dummy, endpoint: `http://127.0.0.1:${port}`, maxAttempts: 2 })
  const clients: DynamoDBClient[] = [client]
  const servers: Server[] = [server]
  const tables: string[] = []
  const newTable = async (partitionKey?: string): Promise<string> => {
    const table = uniqueTable('shedlock')
    tables.push(table)
    await createDynamoDBLockTable(client, table, partitionKey === undefined ? {} : { partitionKey })
    return table
  }
  const deadClient = (): DynamoDBClient => {
    // Port 1 on loopback: nothing listens there, so connections are refused at once.
    const dead = new DynamoDBClient({ ...dummy, endpoint: 'http://127.0.0.1:1', maxAttempts: 1 })
    clients.push(dead)
    return dead
  }
  const getItem = async (table: string, name: string, partitionKey = '_id'): Promise<Item | undefined> =>
    (
      await client.send(
        new GetItemCommand({ TableName: table, Key: { [partitionKey]: { S: name } }, ConsistentRead: true }),
      )
    ).Item as Item | undefined
  const putItem = async (table: string, item: Item): Promise<void> => {
    await client.send(new PutItemCommand({ TableName: table, Item: item as never }))
  }
  const deleteItem = async (table: string, name: string): Promise<void> => {
    await client.send(new DeleteItemCommand({ TableName: table, Key: { _id: { S: name } } }))
  }
  const isHeld = (item: Item | undefined): boolean => (item?.lockUntil?.S ?? '') > new Date().toISOString()
  const javaItem = (name: string, lockUntil: number, lockedAt = Date.now()): Item => ({
    _id: { S: name },
    lockUntil: { S: new Date(lockUntil).toISOString() },
    lockedAt: { S: new Date(lockedAt).toISOString() },
    lockedBy: { S: 'java-host' },
  })

  let table = ''
  beforeAll(async () => {
    table = await newTable()
  })
  afterAll(async () => {
    for (const name of tables) await client.send(new DeleteTableCommand({ TableName: name })).catch(() => undefined)
    for (const c of clients) c.destroy()
    for (const s of servers) if (s.listening) await stopDynalite(s)
  })

  describe('conformance suite', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => dynamoDBLockProvider({ client, tableName: table }),
        isLocked: async (name) => isHeld(await getItem(table, name)),
        deleteRecord: (name) => deleteItem(table, name),
        unreachableProvider: () => dynamoDBLockProvider({ client: deadClient(), tableName: table }),
        extensible: true,
        fencing: true,
        slots: { inspector: true },
        // 2048 bytes of UTF-8 in DynamoDB; dynalite counts characters, the same for the suite's ASCII names.
        maxNameLength: 2048,
      }),
    )
  })

  describe('storage format (Java ShedLock)', () => {
    it('writes _id, lockUntil, lockedAt and lockedBy, all strings, the times ISO-8601 UTC with three fraction digits', async () => {
      const configuration = lockConfiguration({ name: 'format', lockAtMostFor: '1h' })
      const before = new Date().toISOString()
      const lock = await dynamoDBLockProvider({ client, tableName: table }).lock(configuration)
      assert.ok(lock)
      const item = await getItem(table, 'format')
      assert.ok(item)
      // And shedlock's own fencingToken, a number, which Java ignores.
      expect(Object.keys(item).sort()).toEqual(['_id', 'fencingToken', 'lockUntil', 'lockedAt', 'lockedBy'])
      for (const [key, value] of Object.entries(item))
        expect(Object.keys(value)).toEqual([key === 'fencingToken' ? 'N' : 'S'])
      expect(BigInt(item.fencingToken!.N!)).toBe(lock.fencingToken)
      expect(item._id?.S).toBe('format')
      expect(item.lockUntil?.S).toBe(configuration.lockAtMostUntil.toISOString())
      expect(item.lockUntil?.S).toMatch(ISO)
      expect(item.lockedAt?.S).toMatch(ISO)
      expect(item.lockedAt!.S! >= before).toBe(true)
      expect(item.lockedBy?.S?.startsWith(`${hostname()}:${process.pid}:`)).toBe(true)
      await lock.unlock()
    })

    it('keeps three fraction digits on whole seconds, so that string order is time order', async () => {
      const whole = Date.UTC(2031, 0, 1, 0, 0, 0)
      const lock = await dynamoDBLockProvider({ client, tableName: table, clock: { now: () => whole } }).lock(
        lockConfiguration({ name: 'whole-seconds', lockAtMostFor: '1m', createdAt: new Date(whole) }),
      )
      assert.ok(lock)
      const item = await getItem(table, 'whole-seconds')
      expect(item?.lockedAt?.S).toBe('2031-01-01T00:00:00.000Z')
      expect(item?.lockUntil?.S).toBe('2031-01-01T00:01:00.000Z')
    })

    it('respects an item that Java ShedLock holds and takes over one that expired', async () => {
      const held = javaItem('java-held', Date.now() + HOUR)
      const expired = javaItem('java-expired', Date.now() - 1000, Date.now() - HOUR)
      await putItem(table, held)
      await putItem(table, expired)
      const provider = dynamoDBLockProvider({ client, tableName: table, lockedBy: 'node-app' })
      expect(await provider.lock(lockConfiguration({ name: 'java-held', lockAtMostFor: '1m' }))).toBeUndefined()
      expect(await getItem(table, 'java-held')).toEqual(held)

      const lock = await provider.lock(
        lockConfiguration({ name: 'java-expired', lockAtMostFor: '1m', lockAtLeastFor: '10s' }),
      )
      assert.ok(lock)
      expect((await getItem(table, 'java-expired'))?.lockedBy?.S).toMatch(/^node-app:\d+:[0-9a-f]{12}$/)
      await lock.unlock()
      // Java compares lockUntil as a string with its own now: held for lockAtLeastFor.
      expect(isHeld(await getItem(table, 'java-expired'))).toBe(true)
    })

    it('counts in fencingToken: from the clock in microseconds on an item without one, then one more per acquisition, kept through Java writes', async () => {
      const start = Date.UTC(2030, 0, 1)
      await putItem(table, javaItem('fence-java', start - 1000, start - HOUR))
      const at = (ms: number) => dynamoDBLockProvider({ client, tableName: table, clock: { now: () => ms } })
      const config = (ms: number) =>
        lockConfiguration({ name: 'fence-java', lockAtMostFor: '1s', createdAt: new Date(ms) })
      const first = await at(start).lock(config(start))
      expect(first?.fencingToken).toBe(BigInt(start) * 1000n + 1n)
      // A Java node takes the expired lock over the way Java ShedLock does: SET of its three attributes.
      await client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: { _id: { S: 'fence-java' } },
          UpdateExpression: 'set lockUntil = :lockUntil, lockedAt = :lockedAt, lockedBy = :lockedBy',
          ConditionExpression: 'lockUntil <= :lockedAt or attribute_not_exists(lockUntil)',
          ExpressionAttributeValues: {
            ':lockUntil': { S: new Date(start + 3000).toISOString() },
            ':lockedAt': { S: new Date(start + 2000).toISOString() },
            ':lockedBy': { S: 'java-host' },
          },
        }),
      )
      expect((await getItem(table, 'fence-java'))?.fencingToken?.N).toBe(String(first!.fencingToken))
      const second = await at(start + 4000).lock(config(start + 4000))
      expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
      // Deleted (an operator, removeExpired): the count restarts from the later clock, above the old one.
      await deleteItem(table, 'fence-java')
      const third = await at(start + 5000).lock(config(start + 5000))
      expect(third?.fencingToken).toBe(BigInt(start + 5000) * 1000n + 1n)
    })

    it('the acquire condition is `lockUntil <= now` on the app clock: free exactly at lockUntil', async () => {
      const until = Date.UTC(2030, 5, 1, 12, 0, 0, 250)
      await putItem(table, javaItem('boundary', until, until - HOUR))
      const at = (ms: number) => dynamoDBLockProvider({ client, tableName: table, clock: { now: () => ms } })
      const config = lockConfiguration({ name: 'boundary', lockAtMostFor: '1m', createdAt: new Date(until) })
      expect(await at(until - 1).lock(config)).toBeUndefined()
      assert.ok(await at(until).lock(config))
      expect((await getItem(table, 'boundary'))?.lockedAt?.S).toBe(new Date(until).toISOString())
    })
  })

  describe('requests', () => {
    it('sends exactly the documented update and condition expressions', async () => {
      const sent: unknown[] = []
      const recording: DynamoDBSendClient = {
        send: (command) => {
          sent.push((command as { input: unknown }).input)
          return client.send(command as never)
        },
      }
      const provider = dynamoDBLockProvider({ client: recording, tableName: table })
      const lock = (await provider.lock(
        lockConfiguration({ name: 'expressions', lockAtMostFor: '1m' }),
      )) as ExtensibleLock
      const extended = await lock.extend('2m', '30s')
      assert.ok(extended)
      await extended.unlock()
      const owner = (await getItem(table, 'expressions'))?.lockedBy?.S
      const times = { S: expect.stringMatching(ISO) }
      const key = { _id: { S: 'expressions' } }
      expect(sent).toEqual([
        {
          TableName: table,
          Key: key,
          UpdateExpression:
            'SET lockUntil = :lockUntil, lockedAt = :now, lockedBy = :owner, fencingToken = if_not_exists(fencingToken, :floor) + :one',
          ConditionExpression: 'attribute_not_exists(lockUntil) OR lockUntil <= :now',
          ExpressionAttributeValues: {
            ':lockUntil': times,
            ':now': times,
            ':owner': { S: owner },
            ':floor': { N: expect.stringMatching(/^\d+000$/) },
            ':one': { N: '1' },
          },
          ReturnValues: 'UPDATED_NEW',
        },
        {
          TableName: table,
          Key: key,
          UpdateExpression: 'SET lockUntil = :lockUntil',
          ConditionExpression: 'lockedBy = :owner AND lockUntil > :now',
          ExpressionAttributeValues: { ':lockUntil': times, ':now': times, ':owner': { S: owner } },
        },
        {
          TableName: table,
          Key: key,
          UpdateExpression: 'SET lockUntil = :lockUntil',
          ConditionExpression: 'lockedBy = :owner',
          ExpressionAttributeValues: { ':lockUntil': times, ':owner': { S: owner } },
        },
      ])
      // The extension's lockAtLeastFor (30s) holds the lock after the unlock.
      expect(isHeld(await getItem(table, 'expressions'))).toBe(true)
    })
  })

  describe('name length', () => {
    it('counts the 2048-byte partition key limit in UTF-8 bytes, and refuses a longer name before sending', async () => {
      const send = vi.spyOn(client, 'send')
      try {
        // 683 three-byte characters: 2049 bytes (dynalite counts characters, DynamoDB bytes).
        const tooLong = '日'.repeat(683)
        const error = await dynamoDBLockProvider({ client, tableName: table })
          .lock(lockConfiguration({ name: tooLong, lockAtMostFor: '1m' }))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockConfigurationError)
        expect((error as Error).message).toContain('2049 bytes')
        expect(send).not.toHaveBeenCalled()
      } finally {
        send.mockRestore()
      }
      const fits = `${'日'.repeat(682)}xx`
      const lock = await dynamoDBLockProvider({ client, tableName: table }).lock(
        lockConfiguration({ name: fits, lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      expect(isHeld(await getItem(table, fits))).toBe(true)
      await lock.unlock()
    })
  })

  describe('owner checks (Java ShedLock has none)', () => {
    it("a handle whose lock a Java node took over neither extends nor releases the Java node's lock", async () => {
      for (const action of ['extend', 'unlock'] as const) {
        const name = `taken-over-${action}`
        const lock = (await dynamoDBLockProvider({ client, tableName: table }).lock(
          lockConfiguration({ name, lockAtMostFor: '10m' }),
        )) as ExtensibleLock | undefined
        assert.ok(lock)
        const java = javaItem(name, Date.now() + HOUR)
        await putItem(table, java)
        if (action === 'extend') expect(await lock.extend('2h', 0)).toBeUndefined()
        else await lock.unlock()
        expect(await getItem(table, name)).toEqual(java)
      }
    })

    it('unlock keeps the lock until lockAtLeastUntil, touches only lockUntil, and never recreates a deleted item', async () => {
      const configuration = lockConfiguration({ name: 'at-least', lockAtMostFor: '2h', lockAtLeastFor: '1h' })
      const lock = await dynamoDBLockProvider({ client, tableName: table }).lock(configuration)
      assert.ok(lock)
      const held = await getItem(table, 'at-least')
      await lock.unlock()
      expect(await getItem(table, 'at-least')).toEqual({
        ...held,
        lockUntil: { S: configuration.lockAtLeastUntil.toISOString() },
      })

      const gone = await dynamoDBLockProvider({ client, tableName: table }).lock(
        lockConfiguration({ name: 'gone', lockAtMostFor: '1m' }),
      )
      assert.ok(gone)
      await deleteItem(table, 'gone')
      await gone.unlock()
      expect(await getItem(table, 'gone')).toBeUndefined()
    })
  })

  describe('createDynamoDBLockTable', () => {
    it('creates a PAY_PER_REQUEST table with a string partition key, waits until ACTIVE, and is idempotent', async () => {
      const name = uniqueTable('created')
      tables.push(name)
      await Promise.all([createDynamoDBLockTable(client, name), createDynamoDBLockTable(client, name)])
      await createDynamoDBLockTable(client, name)
      const { Table } = await client.send(new DescribeTableCommand({ TableName: name }))
      expect(Table?.TableStatus).toBe('ACTIVE')
      expect(Table?.KeySchema).toEqual([{ AttributeName: '_id', KeyType: 'HASH' }])
      expect(Table?.AttributeDefinitions).toEqual([{ AttributeName: '_id', AttributeType: 'S' }])
      expect(Table?.BillingModeSummary?.BillingMode).toBe('PAY_PER_REQUEST')
    })

    it('works with a custom partition key, for the table and the provider', async () => {
      const custom = await newTable('lockName')
      const lock = await dynamoDBLockProvider({ client, tableName: custom, partitionKey: 'lockName' }).lock(
        lockConfiguration({ name: 'custom-key', lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      expect((await getItem(custom, 'custom-key', 'lockName'))?.lockedBy?.S).toBeDefined()
      expect(
        await dynamoDBLockProvider({ client, tableName: custom, partitionKey: 'lockName' }).lock(
          lockConfiguration({ name: 'custom-key', lockAtMostFor: '1m' }),
        ),
      ).toBeUndefined()
      await lock.unlock()
    })

    it('rejects with LockProviderError when the table exists with another key', async () => {
      const custom = await newTable('lockName')
      const error = await createDynamoDBLockTable(client, custom).catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toContain(
        `dynamodb: could not create lock table "${custom}": the table exists with key schema HASH "lockName"`,
      )
      expect(error.message).toContain('{ partitionKey }')
    })
  })

  describe('errors', () => {
    it('a missing table rejects with LockProviderError naming the lock and saying to call createDynamoDBLockTable', async () => {
      const error = await dynamoDBLockProvider({ client, tableName: 'shedlock_missing' })
        .lock(lockConfiguration({ name: 'needs-table', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toMatch(
        /^dynamodb: could not acquire lock "needs-table": table "shedlock_missing" does not exist/,
      )
      expect(error.message).toContain('createDynamoDBLockTable(client, "shedlock_missing")')
      expect(error.lockName).toBe('needs-table')
      expect(error.provider).toBe('dynamodb')
      expect((error.cause as Error).name).toBe('ResourceNotFoundException')
    })

    it('a dead endpoint rejects with LockProviderError, and the task does not run', async () => {
      const provider = dynamoDBLockProvider({ client: deadClient(), tableName: table })
      const error = await provider
        .lock(lockConfiguration({ name: 'dead', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toMatch(
        /^dynamodb: could not acquire lock "dead": DynamoDB is unreachable \(connect ECONNREFUSED 127\.0\.0\.1:1\)/,
      )
      expect((error.cause as { code?: string }).code).toBe('ECONNREFUSED')
      let ran = false
      await expect(
        createLockingTaskExecutor(provider).executeWithLock(
          () => {
            ran = true
          },
          { name: 'dead', lockAtMostFor: '1m' },
        ),
      ).rejects.toBeInstanceOf(LockProviderError)
      expect(ran).toBe(false)
    })

    it('a provider whose partitionKey does not match the table says so', async () => {
      const error = await dynamoDBLockProvider({ client, tableName: table, partitionKey: 'name' })
        .lock(lockConfiguration({ name: 'wrong-key', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toMatch(
        /^dynamodb: could not acquire lock "wrong-key": table "[^"]+" does not have the partition key "name" of type S alone/,
      )
    })

    it('a failed extend rejects with LockProviderError and leaves the handle usable', async () => {
      let down = false
      const flaky: DynamoDBSendClient = {
        send: (command) => (down ? deadClient().send(command as never) : client.send(command as never)),
      }
      const lock = (await dynamoDBLockProvider({ client: flaky, tableName: table }).lock(
        lockConfiguration({ name: 'flaky', lockAtMostFor: '1m' }),
      )) as ExtensibleLock
      down = true
      await expect(lock.extend('5m', 0)).rejects.toThrow(
        /^dynamodb: could not extend lock "flaky": DynamoDB is unreachable/,
      )
      down = false
      const extended = await lock.extend('5m', 0)
      assert.ok(extended)
      await extended.unlock()
      expect(isHeld(await getItem(table, 'flaky'))).toBe(false)
    })
  })

  describe('the SDK import', () => {
    it('uses the command classes passed as lib', async () => {
      const lock = await dynamoDBLockProvider({ client, tableName: table, lib: sdk }).lock(
        lockConfiguration({ name: 'with-lib', lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      await lock.unlock()
    })

    it('without lib and without the package, rejects saying to install it or pass lib', async () => {
      // vitest wraps the factory's error in its own message; the provider quotes whatever the import threw.
      vi.doMock('@aws-sdk/client-dynamodb', () => {
        throw new Error("Cannot find package '@aws-sdk/client-dynamodb'")
      })
      try {
        const error = await dynamoDBLockProvider({ client, tableName: table })
          .lock(lockConfiguration({ name: 'no-sdk', lockAtMostFor: '1m' }))
          .catch((e: unknown) => e)
        assert.ok(error instanceof LockProviderError)
        expect(error.message).toMatch(
          /^dynamodb: could not acquire lock "no-sdk": cannot load @aws-sdk\/client-dynamodb \(/,
        )
        expect(error.message).toContain(
          'install the package (npm install @aws-sdk/client-dynamodb) or pass its exports as { lib }',
        )
        expect(error.lockName).toBe('no-sdk')
        expect(error.cause).toBeInstanceOf(Error)
        await expect(createDynamoDBLockTable(client, 'any_table')).rejects.toThrow(
          /^dynamodb: could not create lock table "any_table": cannot load .* install the package/,
        )
      } finally {
        vi.doUnmock('@aws-sdk/client-dynamodb')
      }
    })
  })
})

describe('dynamodb options', () => {
  const client: DynamoDBSendClient = {
    send: () => {
      throw new Error('no request may be sent')
    },
  }

  it('bad options throw LockConfigurationError at construction', () => {
    expect(() => dynamoDBLockProvider(undefined as never)).toThrow(LockConfigurationError)
    expect(() => dynamoDBLockProvider({ tableName: 'Shedlock' } as never)).toThrow(/pass your DynamoDBClient/)
    for (const tableName of ['', 'ab', 'has space', 'x'.repeat(256), 'a/b', undefined]) {
      expect(() => dynamoDBLockProvider({ client, tableName: tableName as never })).toThrow(LockConfigurationError)
    }
    for (const partitionKey of ['', 'lockUntil', 'lockedAt', 'lockedBy', 'x'.repeat(256)]) {
      expect(() => dynamoDBLockProvider({ client, tableName: 'Shedlock', partitionKey })).toThrow(
        LockConfigurationError,
      )
    }
    expect(() => dynamoDBLockProvider({ client, tableName: 'Shedlock', lockedBy: ' ' })).toThrow(
      /lockedBy must be a non-empty string/,
    )
    expect(() => dynamoDBLockProvider({ client, tableName: 'Shedlock', lib: {} as never })).toThrow(
      /lib must be the @aws-sdk\/client-dynamodb module/,
    )
  })

  it('accepts a table ARN and a real DynamoDBClient', () => {
    const real = new DynamoDBClient({ ...dummy, endpoint: 'http://127.0.0.1:1' })
    try {
      expect(() =>
        dynamoDBLockProvider({ client: real, tableName: 'arn:aws:dynamodb:eu-west-1:123456789012:table/Shedlock' }),
      ).not.toThrow()
    } finally {
      real.destroy()
    }
  })

  it('createDynamoDBLockTable rejects bad arguments with LockConfigurationError before sending', async () => {
    await expect(createDynamoDBLockTable(client, 'no spaces allowed')).rejects.toBeInstanceOf(LockConfigurationError)
    await expect(createDynamoDBLockTable(client, 'Shedlock', { partitionKey: 'lockedBy' })).rejects.toBeInstanceOf(
      LockConfigurationError,
    )
    await expect(createDynamoDBLockTable({} as never, 'Shedlock')).rejects.toBeInstanceOf(LockConfigurationError)
  })
})
