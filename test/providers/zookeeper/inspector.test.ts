import { randomUUID } from 'node:crypto'
import zookeeper from 'node-zookeeper-client'
import { afterAll, describe, expect, it } from 'vitest'
import {
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import {
  zookeeperLockInspector,
  zookeeperLockProvider,
  zookeeperNodeName,
} from '../../../src/providers/zookeeper/index.ts'
import { slotRecordName } from '../../../src/core/slots.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

type Client = zookeeper.Client

const where = process.env.SHEDLOCK_ZOOKEEPER_URL ?? '127.0.0.1:2181'

async function connect(): Promise<Client> {
  const client = zookeeper.createClient(where, { sessionTimeout: 30_000, spinDelay: 200 })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.close()
      reject(new Error('no connection within 10s'))
    }, 10_000)
    client.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    client.connect()
  })
  return client
}

// The providers' and inspector's client and, separately, the test's own view of the store.
const store = await connectOrSkip('zookeeper', `${where} (SHEDLOCK_ZOOKEEPER_URL)`, async () => ({
  client: await connect(),
  reader: await connect(),
}))

describe.skipIf(!store)('zookeeperLockInspector', () => {
  const { client, reader } = store!
  const root = `/shedlock-inspect-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`
  afterAll(async () => {
    // node-zookeeper-client has removeRecursive; its type declarations leave it out.
    const remover = reader as unknown as {
      removeRecursive(path: string, version: number, callback: (error: unknown) => void): void
    }
    await new Promise<void>((resolve) => remover.removeRecursive(root, -1, () => resolve()))
    client.close()
    reader.close()
  })
  const unique = (what: string): string => `${what}-${randomUUID()}`
  const provider = () => zookeeperLockProvider({ client, path: root })
  const inspector = () => zookeeperLockInspector({ client, path: root })
  const call = <T>(start: (done: (error: unknown, value?: T) => void) => void): Promise<T> =>
    new Promise((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))))
  /** The node's data and version, read with the test's own client. */
  const node = (name: string) =>
    new Promise<{ data: string; version: number } | undefined>((resolve, reject) =>
      reader.getData(`${root}/${zookeeperNodeName(name)}`, (error, data, stat) => {
        if ((error as { code?: number } | null)?.code === zookeeper.Exception.NO_NODE) resolve(undefined)
        else if (error) reject(error)
        else resolve({ data: data ? data.toString('utf8') : '', version: stat.version })
      }),
    )
  const createNode = (nodeName: string, data: Buffer | undefined) =>
    call<string>((done) =>
      data === undefined
        ? reader.create(`${root}/${nodeName}`, done)
        : reader.create(`${root}/${nodeName}`, data, done),
    )

  describe('contract', () => {
    registerInspectorSuite(
      lockInspectorSuite({ provider, inspector: inspector(), keepsLockedBy: false, keepsAcquisition: false }),
    )
  })

  it('a missing path lists no locks', async () => {
    expect(await zookeeperLockInspector({ client, path: `${root}-missing` }).list()).toMatchObject({ locks: [] })
  })

  it('a force-release keeps the node with lockUntil now at a new version; the holder’s release within lockAtLeastFor changes nothing', async () => {
    const name = unique('row')
    const holder = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))
    expect(holder).toBeDefined()
    const before = await node(name)
    const releasedAt = Date.now()
    expect(await inspector().release(name)).toBe(true)
    const after = await node(name)
    expect(after!.version).toBe(before!.version + 1)
    expect(after!.data).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(Math.abs(Date.parse(after!.data) - releasedAt)).toBeLessThan(2_000)
    await holder!.unlock()
    // The holder's write at its own version failed with BADVERSION.
    expect(await node(name)).toEqual(after)
    expect(await inspector().get(name)).toMatchObject({ held: false, remainingMs: 0 })
  })

  it('removeExpired deletes expired slot records only, at the version read: an expired ordinary lock keeps its node', async () => {
    const name = unique('sweep')
    const slot = (day: number) => slotRecordName(name, new Date(Date.UTC(2026, 0, day)))
    const p = provider()
    // Expired slot records (one released), a held one, and expired ordinary locks under the same prefix.
    const claims = await Promise.all(
      [slot(1), slot(2), slot(3)].map((record) => p.lock(lockConfiguration({ name: record, lockAtMostFor: 300 }))),
    )
    const held = await p.lock(lockConfiguration({ name: slot(4), lockAtMostFor: '1m' }))
    const ordinary = await Promise.all(
      [`${name}@x`, `${name}@20260101`].map((record) =>
        p.lock(lockConfiguration({ name: record, lockAtMostFor: 300 })),
      ),
    )
    await claims[2]!.unlock()
    await new Promise((resolve) => setTimeout(resolve, 400))
    // A node takes slot 2 over after it expired: held again, kept.
    const racing = await provider().lock(lockConfiguration({ name: slot(2), lockAtMostFor: '1m' }))
    expect(racing).toBeDefined()

    expect(await inspector().removeExpired({ prefix: `${name}@` })).toBe(2)
    expect(await node(slot(1))).toBeUndefined()
    expect(await node(slot(3))).toBeUndefined()
    expect((await inspector().get(slot(2)))?.held).toBe(true)
    expect((await inspector().get(slot(4)))?.held).toBe(true)
    for (const record of [`${name}@x`, `${name}@20260101`])
      expect(await inspector().get(record)).toMatchObject({ held: false })
    expect(await inspector().removeExpired()).toBeGreaterThanOrEqual(0)
    for (const record of [`${name}@x`, `${name}@20260101`]) expect(await node(record)).toBeDefined()

    for (const lock of ordinary) await lock!.unlock()
    // The next claim recreates a removed slot record.
    const again = await p.lock(lockConfiguration({ name: slot(1), lockAtMostFor: '1m' }))
    expect(again).toBeDefined()
    // Created in a multi with a setData (for the fencing token's zxid): version 1.
    expect((await node(slot(1)))?.version).toBe(1)
    for (const lock of [again, racing, held]) await lock!.unlock()
  })

  it('removeExpired deletes a slot record only at the version read', async () => {
    const record = slotRecordName(unique('version'), new Date(Date.UTC(2026, 0, 1)))
    const holder = await provider().lock(lockConfiguration({ name: record, lockAtMostFor: 200 }))
    expect(holder).toBeDefined()
    await new Promise((resolve) => setTimeout(resolve, 300))
    // Between the sweep's read and its delete, another node takes the record over: BADVERSION, kept.
    const remover = zookeeperLockInspector({
      client: {
        getData: (path, callback) => client.getData(path, callback),
        setData: (path, data, version, callback) => client.setData(path, data, version, callback),
        getChildren: (path, callback) => client.getChildren(path, callback),
        remove: (path, version, callback) => {
          void provider()
            .lock(lockConfiguration({ name: record, lockAtMostFor: '1m' }))
            .then((taken) => {
              expect(taken).toBeDefined()
              client.remove(path, version, callback)
            }, callback)
        },
      },
      path: root,
    })
    expect(await remover.removeExpired({ prefix: record })).toBe(0)
    expect((await inspector().get(record))?.held).toBe(true)
    // Created at version 1, taken over at 2.
    expect((await node(record))?.version).toBe(2)
  })

  it('provider.inspector() inspects the provider’s nodes, on the provider’s clock', async () => {
    const name = unique('own')
    const behind = { now: () => Date.now() - 120_000 }
    const p = zookeeperLockProvider({ client, path: root, clock: behind })
    const lock = await p.lock(lockConfiguration({ name, lockAtMostFor: '1m', createdAt: new Date(behind.now()) }))
    expect(lock).toBeDefined()
    // Expired on this host's clock, held on the provider's.
    expect((await inspector().get(name))?.held).toBe(false)
    const own = p.inspector!()
    expect(own.name).toBe('zookeeper')
    expect((await own.get(name))?.held).toBe(true)
    expect((await own.list({ prefix: name })).locks.map((record) => record.name)).toEqual([name])
    await lock!.unlock()
  })

  it('reads a node Java ShedLock wrote: the name as the node, lockUntil as ISO-8601 data, nothing else', async () => {
    const name = unique('java 100%')
    const until = Date.now() + 3_600_000
    await call((done) => reader.mkdirp(root, done))
    await createNode(name, Buffer.from(new Date(until).toISOString()))
    const record = await inspector().get(name)
    expect(record).toEqual({
      name,
      lockUntil: new Date(until),
      lockedAt: undefined,
      lockedBy: undefined,
      held: true,
      remainingMs: expect.any(Number),
    })
    expect(record!.remainingMs).toBeGreaterThan(3_500_000)
    expect((await inspector().list()).locks.find((lock) => lock.name === name)).toEqual({
      ...record,
      remainingMs: expect.any(Number),
    })
  })

  it('a node with empty or unreadable data reads as held with an unknown lockUntil, as the provider treats it, and can be released', async () => {
    await call((done) => reader.mkdirp(root, done))
    for (const data of [undefined, Buffer.from('192.168.1.7')]) {
      const name = unique('legacy')
      await createNode(name, data)
      expect(await inspector().get(name)).toEqual({
        name,
        lockUntil: undefined,
        lockedAt: undefined,
        lockedBy: undefined,
        held: true,
        remainingMs: undefined,
      })
      expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
      const [record] = (await inspector().list()).locks.filter((lock) => lock.name === name)
      const other = inspector()
      expect(await inspector().release(record!)).toBe(true)
      expect(await other.get(name)).toMatchObject({ held: false })
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      expect(lock).toBeDefined()
      await lock!.unlock()
    }
  })

  it('list() decodes names that needed escaping, and sorts them by name', async () => {
    const prefix = unique('esc')
    const names = [`${prefix}/a`, `${prefix} 100%/day`, `${prefix}\u0001`, `${prefix}😀`, `${prefix} 100%`]
    const locks = await Promise.all(
      names.map((name) => provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
    )
    expect(zookeeperNodeName(names[0]!)).toBe(`${prefix}%2Fa`)
    const children = await call<string[]>((done) => reader.getChildren(root, done))
    expect(children).toContain(`${prefix}%2Fa`)
    const listed = (await inspector().list()).locks.filter((record) => record.name.startsWith(prefix))
    expect(listed.map((record) => record.name)).toEqual([...names].sort())
    for (const record of listed) expect(record.held).toBe(true)
    const shared = inspector()
    const [first] = (await shared.list()).locks.filter((record) => record.name === names[0])
    expect(await shared.release(first!)).toBe(true)
    expect((await shared.get(names[0]!))?.held).toBe(false)
    for (const lock of locks) await lock?.unlock()
  })

  it('a release by name reads again when the holder writes in between; a stale record releases nothing', async () => {
    const name = unique('extend')
    const shared = inspector()
    const holder = (await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))) as ExtensibleLock
    const seen = await shared.get(name)
    const extended = await holder.extend('2m', 0)
    expect(extended).toBeDefined()
    expect(await shared.release(seen!)).toBe(false)
    expect((await shared.get(name))?.held).toBe(true)
    expect(await shared.release(name)).toBe(true)
    await extended!.unlock()
  })

  it('names the provider refuses reject with LockConfigurationError before anything is sent', async () => {
    await expect(inspector().get('a%2Fb')).rejects.toThrow(LockConfigurationError)
    await expect(inspector().release('x'.repeat(1_000_001))).rejects.toThrow(LockConfigurationError)
  })

  it('a client that does not answer rejects with LockProviderError after the timeout', async () => {
    const silent = { getData() {}, setData() {}, getChildren() {}, remove() {} }
    const dead = zookeeperLockInspector({ client: silent, path: root, timeout: 100 })
    await expect(dead.list()).rejects.toThrow(LockProviderError)
    await expect(dead.get('x')).rejects.toThrow(
      /zookeeper: could not inspect lock "x": no reply from ZooKeeper within 100ms/,
    )
    await expect(dead.release('x')).rejects.toThrow(/could not release lock "x"/)
    await expect(dead.removeExpired()).rejects.toThrow(LockProviderError)
  })

  it('refuses bad options', () => {
    expect(() => zookeeperLockInspector({} as never)).toThrow(
      /pass your connected node-zookeeper-client Client .*getChildren, remove/,
    )
    expect(() => zookeeperLockInspector({ client, path: 'shedlock' })).toThrow(LockConfigurationError)
    expect(() => zookeeperLockInspector({ client, timeout: 0 })).toThrow(LockConfigurationError)
  })
})
