import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import * as sdk from '@aws-sdk/client-dynamodb'
import { DeleteTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import {
  createDynamoDBLockTable,
  type DynamoDBInspectorLib,
  dynamoDBLockInspector,
  dynamoDBLockProvider,
} from '../../../src/providers/dynamodb/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

// dynalite ships no types: it exports one function that returns an http.Server.
const dynalite = createRequire(import.meta.url)('dynalite') as (options?: { createTableMs?: number }) => Server
// dynalite accepts any credentials; never real ones in tests.
const dummy = { region: 'us-east-1', credentials: { accessKeyId: 'dummy', secretAccessKey: 'dummy' } }

type Item = Record<string, { S?: string; N?: string }>

const started = await connectOrSkip('dynamodb', 'an in-process dynalite on a free loopback port', async () => {
  const server = dynalite({ createTableMs: 50 })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return { server, port: (server.address() as AddressInfo).port }
})

describe.skipIf(!started)('dynamoDBLockInspector (dynalite)', () => {
  const { server, port } = started!
  const client = new DynamoDBClient({ ...dummy, endpoint: `http://127.0.0.1:${port}`, maxAttempts: 2 })
  const table = uniqueTable('shedlock_inspect')
  beforeAll(async () => {
    await createDynamoDBLockTable(client, table)
  })
  afterAll(async () => {
    await client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined)
    client.destroy()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const unique = (what: string): string => `${what}-${Math.random().toString(36).slice(2)}`
  const provider = () => dynamoDBLockProvider({ client, tableName: table })
  const inspector = () => dynamoDBLockInspector({ client, tableName: table })
  const getItem = async (name: string): Promise<Item | undefined> =>
    (await client.send(new GetItemCommand({ TableName: table, Key: { _id: { S: name } }, ConsistentRead: true })))
      .Item as Item | undefined
  const putItem = async (item: Item): Promise<void> => {
    await client.send(new PutItemCommand({ TableName: table, Item: item as never }))
  }

  describe('contract', () => {
    registerInspectorSuite(lockInspectorSuite({ provider, inspector: inspector() }))
  })

  it('a force-release keeps the item with lockUntil now and lockedBy "released"; the holder’s release within lockAtLeastFor changes nothing', async () => {
    const name = unique('row')
    const holder = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))
    expect(holder).toBeDefined()
    const before = await getItem(name)
    const releasedAt = Date.now()
    expect(await inspector().release(name)).toBe(true)
    const after = await getItem(name)
    expect(after).toEqual({
      _id: { S: name },
      lockUntil: { S: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) },
      lockedAt: before!.lockedAt,
      lockedBy: { S: 'released' },
      // The fencing counter stays: the next acquisition counts on from it.
      fencingToken: before!.fencingToken,
    })
    expect(Date.parse(after!.lockUntil!.S!)).toBeGreaterThanOrEqual(releasedAt)
    expect(Date.parse(after!.lockUntil!.S!)).toBeLessThanOrEqual(Date.now())
    await holder!.unlock()
    expect(await getItem(name)).toEqual(after)
    expect(await inspector().get(name)).toMatchObject({ name, lockedBy: 'released', held: false, remainingMs: 0 })
  })

  it('reads an item Java ShedLock wrote, attribute by attribute', async () => {
    const name = unique('java')
    const lockUntil = new Date(Date.now() + 3_600_000)
    const lockedAt = new Date(Date.now() - 5_000)
    await putItem({
      _id: { S: name },
      lockUntil: { S: lockUntil.toISOString() },
      lockedAt: { S: lockedAt.toISOString() },
      lockedBy: { S: 'java-host' },
    })
    const record = await inspector().get(name)
    expect(record).toEqual({
      name,
      lockUntil,
      lockedAt,
      lockedBy: 'java-host',
      held: true,
      remainingMs: expect.any(Number),
    })
    expect(record!.remainingMs).toBeGreaterThan(3_500_000)
  })

  it('held follows the provider’s condition: no lockUntil is free, a lockUntil of another type is held for ever and cannot be released', async () => {
    const [none, number] = [unique('none'), unique('number')]
    await putItem({ _id: { S: none }, lockedBy: { S: 'someone' } })
    await putItem({ _id: { S: number }, lockUntil: { N: '1' }, lockedBy: { S: 'someone' } })
    const shared = inspector()
    expect(await shared.get(none)).toMatchObject({ lockUntil: undefined, held: false, remainingMs: undefined })
    expect(await shared.get(number)).toMatchObject({ lockUntil: undefined, held: true, remainingMs: undefined })
    expect(await provider().lock(lockConfiguration({ name: number, lockAtMostFor: '1m' }))).toBeUndefined()
    expect(await shared.release((await shared.get(number))!)).toBe(false)
    expect(await shared.release(number)).toBe(false)
    expect(await shared.release(none)).toBe(false)
    const lock = await provider().lock(lockConfiguration({ name: none, lockAtMostFor: '1m' }))
    expect(lock).toBeDefined()
    await lock!.unlock()
  })

  it('a record of an item without lockedBy releases it; one read before the holder extended releases that acquisition', async () => {
    const shared = inspector()
    const anonymous = unique('anonymous')
    await putItem({ _id: { S: anonymous }, lockUntil: { S: new Date(Date.now() + 60_000).toISOString() } })
    const record = await shared.get(anonymous)
    expect(record).toMatchObject({ held: true, lockedBy: undefined, lockedAt: undefined })
    expect(await shared.release(record!)).toBe(true)
    expect((await getItem(anonymous))?.lockedBy).toEqual({ S: 'released' })

    const name = unique('extend')
    const holder = (await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))) as ExtensibleLock
    const seen = await shared.get(name)
    const extended = await holder.extend('2m', 0)
    expect(extended).toBeDefined()
    expect(await shared.release(seen!)).toBe(true)
    expect((await getItem(name))?.lockedBy).toEqual({ S: 'released' })
    await extended!.unlock()
    expect((await shared.get(name))?.held).toBe(false)
  })

  it('a record read before a re-acquisition by the same Java host (same lockedBy, new lockedAt) releases nothing', async () => {
    const shared = inspector()
    const name = unique('java')
    const now = Date.now()
    const item = (lockedAt: number) => ({
      _id: { S: name },
      lockUntil: { S: new Date(now + 60_000).toISOString() },
      lockedAt: { S: new Date(lockedAt).toISOString() },
      lockedBy: { S: 'java-host' },
    })
    await putItem(item(now - 1_000))
    const old = await shared.get(name)
    await putItem(item(now))
    expect(await shared.release(old!)).toBe(false)
    expect((await shared.get(name))?.held).toBe(true)
    expect(await shared.release((await shared.get(name))!)).toBe(true)
  })

  it('list() pages through the whole table, names as they are, sorted by name', async () => {
    const prefix = unique('page')
    // Items of about 40 KB: a scan page holds at most 1 MB, so these take several pages.
    const padding = 'x'.repeat(40_000)
    const names = Array.from({ length: 60 }, (_, i) => `${prefix} ${String(59 - i).padStart(2, '0')} a/b:c é`)
    const until = new Date(Date.now() + 60_000).toISOString()
    for (const name of names)
      await putItem({ _id: { S: name }, lockUntil: { S: until }, lockedAt: { S: until }, lockedBy: { S: padding } })
    let pages = 0
    const counting = {
      send: (command: object) => {
        if (command instanceof sdk.ScanCommand) pages++
        return client.send(command as never)
      },
    }
    const { now, locks } = await dynamoDBLockInspector({ client: counting, tableName: table }).list()
    expect(pages).toBeGreaterThan(1)
    expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(1_000)
    const mine = locks.filter((record) => record.name.startsWith(prefix))
    expect(mine.map((record) => record.name)).toEqual([...names].sort())
    const all = locks.map((record) => record.name)
    expect(all).toEqual([...all].sort())
  })

  it('removeExpired scans the prefix for expired items and deletes each on condition: an item taken meanwhile stays', async () => {
    const prefix = `${unique('sweep')}@`
    const past = new Date(Date.now() - 1_000).toISOString()
    const [released, anonymous, taken] = [`${prefix}released`, `${prefix}anonymous`, `${prefix}taken`]
    await putItem({ _id: { S: released }, lockUntil: { S: past }, lockedAt: { S: past }, lockedBy: { S: 'released' } })
    await putItem({ _id: { S: anonymous }, lockUntil: { S: past } })
    await putItem({ _id: { S: taken }, lockUntil: { S: past }, lockedAt: { S: past }, lockedBy: { S: 'dead-node' } })
    // Not expired, or no lock that the provider could take over: kept.
    const held = await provider().lock(lockConfiguration({ name: `${prefix}held`, lockAtMostFor: '1m' }))
    await putItem({ _id: { S: `${prefix}number` }, lockUntil: { N: '1' }, lockedBy: { S: 'someone' } })
    await putItem({ _id: { S: `${prefix}none` }, lockedBy: { S: 'someone' } })
    const outside = unique('outside')
    await putItem({ _id: { S: outside }, lockUntil: { S: past } })

    // Another node takes `taken` between the scan and its delete.
    const sent: object[] = []
    let retaken: ExtensibleLock | undefined
    const racing = {
      async send(command: object) {
        sent.push(command)
        if (command instanceof sdk.DeleteItemCommand && command.input.Key?._id?.S === taken) {
          retaken = await provider().lock(lockConfiguration({ name: taken, lockAtMostFor: '1m' }))
        }
        return client.send(command as never)
      },
    }
    expect(await dynamoDBLockInspector({ client: racing, tableName: table }).removeExpired({ prefix })).toBe(2)
    expect(retaken).toBeDefined()
    expect(await getItem(released)).toBeUndefined()
    expect(await getItem(anonymous)).toBeUndefined()
    expect(await inspector().get(taken)).toMatchObject({ held: true, lockedBy: retaken!.lockedBy })
    for (const kept of [`${prefix}held`, `${prefix}number`, `${prefix}none`, outside])
      expect(await getItem(kept)).toBeDefined()
    // A filtered Scan (begins_with and the expiry, only the attributes needed; one page per MB of
    // the table, which other tests fill), one DeleteItem per expired item.
    const scans = sent.filter((command) => command instanceof sdk.ScanCommand) as sdk.ScanCommand[]
    expect(scans.length).toBeGreaterThan(0)
    for (const [i, scan] of scans.entries()) {
      expect(scan.input).toMatchObject({
        FilterExpression: 'begins_with(#pk, :prefix) AND lockUntil <= :now',
        ExpressionAttributeNames: { '#pk': '_id' },
        ExpressionAttributeValues: { ':prefix': { S: prefix }, ':now': { S: expect.any(String) } },
        ProjectionExpression: '#pk, lockUntil, lockedBy',
        ConsistentRead: true,
      })
      expect(scan.input.ExclusiveStartKey === undefined).toBe(i === 0)
    }
    expect(sent.filter((command) => command instanceof sdk.DeleteItemCommand)).toHaveLength(3)
    expect((await inspector().list({ prefix })).locks.map((record) => record.name)).toEqual([
      `${prefix}held`,
      `${prefix}none`,
      `${prefix}number`,
      taken,
    ])
    for (const lock of [held, retaken]) await lock!.unlock()
  })

  it('provider.inspector() inspects the provider’s table, on the provider’s clock; handles carry lockedBy', async () => {
    const name = unique('own')
    const behind = { now: () => Date.now() - 120_000 }
    const own = dynamoDBLockProvider({ client, tableName: table, clock: behind, lib: sdk })
    const lock = await own.lock(lockConfiguration({ name, lockAtMostFor: '1m', createdAt: new Date(behind.now()) }))
    expect(lock?.lockedBy).toMatch(new RegExp(`^${hostname()}:${process.pid}:`))
    expect((await inspector().get(name))?.held).toBe(false)
    const ownInspector = own.inspector!()
    expect(ownInspector.name).toBe('dynamodb')
    expect(await ownInspector.get(name)).toMatchObject({ held: true, lockedBy: lock!.lockedBy })
    expect((await ownInspector.list({ prefix: name })).locks.map((record) => record.name)).toEqual([name])
    expect(await ownInspector.removeExpired({ prefix: name })).toBe(0)
    await lock!.unlock()
  })

  it('records of the provider name this host', async () => {
    const name = unique('owner')
    const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect((await inspector().get(name))?.lockedBy).toMatch(new RegExp(`^${hostname()}:${process.pid}:`))
    await lock!.unlock()
  })

  it('a missing table rejects with LockProviderError saying how to create it', async () => {
    const missing = dynamoDBLockInspector({ client, tableName: uniqueTable('shedlock_missing') })
    await expect(missing.list()).rejects.toThrow(
      /^dynamodb: could not list the locks: table ".*" does not exist .*createDynamoDBLockTable/,
    )
    await expect(missing.get('x')).rejects.toThrow(LockProviderError)
    await expect(missing.release('x')).rejects.toThrow(/could not release lock "x"/)
  })

  it('refuses bad options and names over 2048 bytes', async () => {
    expect(() => dynamoDBLockInspector({ tableName: table } as never)).toThrow(LockConfigurationError)
    expect(() => dynamoDBLockInspector({ client, tableName: 'x' })).toThrow(/is not a DynamoDB table name/)
    expect(() => dynamoDBLockInspector({ client, tableName: table, partitionKey: 'lockUntil' })).toThrow(
      LockConfigurationError,
    )
    expect(() =>
      dynamoDBLockInspector({ client, tableName: table, lib: { ScanCommand: sdk.ScanCommand } as never }),
    ).toThrow(/has no GetItemCommand, UpdateItemCommand/)
    await expect(inspector().get('x'.repeat(2049))).rejects.toThrow(LockConfigurationError)
    // The SDK module is a lib as it is (a compile-time check too).
    const lib: DynamoDBInspectorLib = sdk
    expect(await dynamoDBLockInspector({ client, tableName: table, lib }).get(unique('none'))).toBeUndefined()
  })
})
