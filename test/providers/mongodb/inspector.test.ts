import { hostname } from 'node:os'
import { type Collection, MongoClient } from 'mongodb'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  type MongoInspectorCollection,
  type MongoLockDocument,
  mongoLockInspector,
  mongoLockProvider,
} from '../../../src/providers/mongodb/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import { type Document, FakeMongoCollection, MongoServerError } from '../../helpers/fake-mongo-collection.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

/** A place lock documents live: the fake, or a real server's collection. */
interface Backend {
  /** The collection as the provider and the inspector get it. */
  collection: MongoInspectorCollection & Parameters<typeof mongoLockProvider>[0]['collection']
  /** Reads the stored document directly, never through the inspector. */
  read(id: string): Promise<Document | undefined>
  insert(doc: Document): Promise<void>
}

// ---- the in-memory fake: always runs ----

const fake = new FakeMongoCollection()
const fakeBackend: Backend = {
  collection: fake,
  read: async (id) => fake.document(id),
  insert: async (doc) => fake.insertDocument(doc),
}

// ---- a real server: only with SHEDLOCK_MONGODB_URL (none can be installed here) ----

const url = process.env.SHEDLOCK_MONGODB_URL
const real = url
  ? await connectOrSkip(
      'mongodb',
      `${url.replace(/(\/\/[^:/@]*):[^@]*@/, '$1:***@')} (SHEDLOCK_MONGODB_URL)`,
      async () => {
        const client = new MongoClient(url, { serverSelectionTimeoutMS: 5_000 })
        try {
          await client.db().command({ ping: 1 })
        } catch (error) {
          await client.close()
          throw error
        }
        return client
      },
    )
  : undefined
const realCollections: Collection<MongoLockDocument>[] = []
const realBackend = (): Backend => {
  const collection = real!
    .db()
    .collection<MongoLockDocument>(uniqueTable('shedLock_inspect'), { writeConcern: { w: 'majority' } })
  realCollections.push(collection)
  return {
    collection,
    read: async (id) => (await collection.findOne({ _id: id })) ?? undefined,
    insert: async (doc) => {
      await collection.insertOne(doc as unknown as MongoLockDocument)
    },
  }
}
afterAll(async () => {
  for (const collection of realCollections) await collection.drop().catch(() => undefined)
  await real?.close()
})

const unique = (what: string): string => `${what}-${Math.random().toString(36).slice(2)}`

function inspectorTests(backend: () => Backend): void {
  describe('contract', () => {
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => mongoLockProvider({ collection: backend().collection }),
        // The suite's inspector is read when its cases run; one instance, for the records' tokens.
        inspector: lazyInspector(() => backend().collection),
      }),
    )
  })

  it('a force-release keeps the document with lockUntil now and lockedBy "released"; the holder’s release within lockAtLeastFor changes nothing', async () => {
    const b = backend()
    const inspector = mongoLockInspector({ collection: b.collection })
    const name = unique('row')
    const holder = await mongoLockProvider({ collection: b.collection }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }),
    )
    expect(holder).toBeDefined()
    const before = await b.read(name)
    const releasedAt = Date.now()
    expect(await inspector.release(name)).toBe(true)
    const after = await b.read(name)
    // The fencing counter stays: the next acquisition counts on from it.
    expect(after).toEqual({
      _id: name,
      lockUntil: expect.any(Date),
      lockedAt: before!.lockedAt,
      lockedBy: 'released',
      fencingToken: before!.fencingToken,
    })
    expect((after!.lockUntil as Date).getTime()).toBeGreaterThanOrEqual(releasedAt)
    expect((after!.lockUntil as Date).getTime()).toBeLessThanOrEqual(Date.now())
    await holder!.unlock()
    expect(await b.read(name)).toEqual(after)
    expect(await inspector.get(name)).toMatchObject({ name, lockedBy: 'released', held: false, remainingMs: 0 })
  })

  it('reads a document Java ShedLock wrote, field by field', async () => {
    const b = backend()
    const name = unique('java')
    const lockUntil = new Date(Date.now() + 3_600_000)
    const lockedAt = new Date(Date.now() - 5_000)
    await b.insert({ _id: name, lockUntil, lockedAt, lockedBy: 'java-host' })
    const record = await mongoLockInspector({ collection: b.collection }).get(name)
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

  it('list() holds names as they are, sorted in JavaScript string order (not MongoDB’s UTF-8 byte order)', async () => {
    const b = backend()
    const prefix = unique('names')
    // U+FF5E sorts after 😀's surrogates in UTF-16, before its bytes in UTF-8.
    const names = [`${prefix} ～`, `${prefix} 😀`, `${prefix} a/b:c é`, `${prefix}.$x`]
    const provider = mongoLockProvider({ collection: b.collection })
    const locks = await Promise.all(
      names.map((name) => provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
    )
    const { now, locks: records } = await mongoLockInspector({ collection: b.collection }).list()
    expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(1_000)
    const mine = records.filter((record) => record.name.startsWith(prefix))
    expect(mine.map((record) => record.name)).toEqual([...names].sort())
    expect(mine.map((record) => record.name).indexOf(`${prefix} 😀`)).toBeLessThan(
      mine.map((record) => record.name).indexOf(`${prefix} ～`),
    )
    for (const record of mine)
      expect(record).toMatchObject({
        held: true,
        lockedBy: expect.stringMatching(new RegExp(`^${hostname()}:${process.pid}:`)),
      })
    for (const lock of locks) await lock?.unlock()
  })

  it('a document without a Date lockUntil reads as held with it unknown, as the provider cannot take it over; its record releases it', async () => {
    const b = backend()
    const inspector = mongoLockInspector({ collection: b.collection })
    for (const odd of [{ lockUntil: '2030-01-01T00:00:00Z' }, {}]) {
      const name = unique('odd')
      await b.insert({ _id: name, ...odd, lockedBy: 'someone' })
      const record = await inspector.get(name)
      expect(record).toMatchObject({
        name,
        lockUntil: undefined,
        lockedBy: 'someone',
        held: true,
        remainingMs: undefined,
      })
      expect(
        await mongoLockProvider({ collection: b.collection }).lock(lockConfiguration({ name, lockAtMostFor: '1m' })),
      ).toBeUndefined()
      expect(await inspector.release(record!)).toBe(true)
      expect((await b.read(name))?.lockedBy).toBe('released')
      const lock = await mongoLockProvider({ collection: b.collection }).lock(
        lockConfiguration({ name, lockAtMostFor: '1m' }),
      )
      expect(lock).toBeDefined()
      await lock!.unlock()
    }
  })

  it('a prefix is matched literally, regular expression characters and all; removeExpired deletes only Date lockUntils not after now', async () => {
    const b = backend()
    const base = unique('re')
    const prefix = `${base}.*(a|b)[x]^$\\`
    const now = Date.now()
    await b.insert({
      _id: `${prefix}expired`,
      lockUntil: new Date(now - 1_000),
      lockedAt: new Date(now - 2_000),
      lockedBy: 'a',
    })
    await b.insert({ _id: `${prefix}held`, lockUntil: new Date(now + 60_000), lockedAt: new Date(now), lockedBy: 'a' })
    await b.insert({ _id: `${prefix}text`, lockUntil: '2000-01-01T00:00:00Z', lockedBy: 'a' })
    await b.insert({ _id: `${prefix}none`, lockedBy: 'a' })
    // What the pattern would match unescaped.
    await b.insert({ _id: `${base}-anything`, lockUntil: new Date(now - 1_000), lockedBy: 'a' })
    await b.insert({ _id: `x${prefix}expired`, lockUntil: new Date(now - 1_000), lockedBy: 'a' })
    const inspector = mongoLockInspector({ collection: b.collection })
    expect((await inspector.list({ prefix })).locks.map((record) => record.name)).toEqual([
      `${prefix}expired`,
      `${prefix}held`,
      `${prefix}none`,
      `${prefix}text`,
    ])
    expect(await inspector.removeExpired({ prefix })).toBe(1)
    expect(await b.read(`${prefix}expired`)).toBeUndefined()
    for (const kept of [`${prefix}held`, `${prefix}text`, `${prefix}none`, `${base}-anything`, `x${prefix}expired`])
      expect(await b.read(kept)).toBeDefined()
    expect(await inspector.removeExpired({ prefix: base })).toBe(1)
    expect(await b.read(`${base}-anything`)).toBeUndefined()
  })

  it('removeExpired decides expiry on the inspector’s clock; the holder’s unlock does not recreate a removed record, the next lock does', async () => {
    const b = backend()
    const name = unique('clock')
    const provider = mongoLockProvider({ collection: b.collection })
    const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(await mongoLockInspector({ collection: b.collection }).removeExpired({ prefix: name })).toBe(0)
    const ahead = mongoLockInspector({ collection: b.collection, clock: { now: () => Date.now() + 120_000 } })
    expect(await ahead.removeExpired({ prefix: name })).toBe(1)
    expect(await b.read(name)).toBeUndefined()
    // The holder's unlock does not recreate it; the next lock does.
    await lock!.unlock()
    expect(await b.read(name)).toBeUndefined()
    const again = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(again?.lockedBy).toEqual((await b.read(name))?.lockedBy)
    await again!.unlock()
  })

  it('provider.inspector() inspects the provider’s collection, on the provider’s clock; handles carry lockedBy', async () => {
    const b = backend()
    const name = unique('own')
    const behind = { now: () => Date.now() - 120_000 }
    const provider = mongoLockProvider({ collection: b.collection, clock: behind })
    const lock = await provider.lock(
      lockConfiguration({ name, lockAtMostFor: '1m', createdAt: new Date(behind.now()) }),
    )
    expect(lock?.lockedBy).toMatch(new RegExp(`^${hostname()}:${process.pid}:`))
    expect((await mongoLockInspector({ collection: b.collection }).get(name))?.held).toBe(false)
    const own = provider.inspector!()
    expect(own.name).toBe('mongodb')
    expect(await own.get(name)).toMatchObject({ held: true, lockedBy: lock!.lockedBy })
    expect((await own.list({ prefix: name })).locks.map((record) => record.name)).toEqual([name])
    await lock!.unlock()
  })

  it('a record read before the holder extended releases that acquisition; one read before a re-acquisition by the same host releases nothing', async () => {
    const b = backend()
    const inspector = mongoLockInspector({ collection: b.collection })
    const name = unique('extend')
    const holder = await mongoLockProvider({ collection: b.collection }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    const seen = await inspector.get(name)
    const extended = await (holder as import('../../../src/index.ts').ExtensibleLock).extend('2m', 0)
    expect(extended).toBeDefined()
    expect(await inspector.release(seen!)).toBe(true)
    expect(await b.read(name)).toMatchObject({ lockedBy: 'released' })
    await extended!.unlock()
    expect((await inspector.get(name))?.held).toBe(false)

    // Java ShedLock writes the bare host name: the same host's next acquisition differs in lockedAt only.
    const java = unique('java')
    const now = Date.now()
    await b.insert({
      _id: java,
      lockUntil: new Date(now + 60_000),
      lockedAt: new Date(now - 1_000),
      lockedBy: 'java-host',
    })
    const old = await inspector.get(java)
    const retake = { $set: { lockUntil: new Date(now + 60_000), lockedAt: new Date(now) } }
    await b.collection.updateOne({ _id: java }, retake)
    expect(await inspector.release(old!)).toBe(false)
    expect((await inspector.get(java))?.held).toBe(true)
    expect(await inspector.release(java)).toBe(true)
  })
}

/** An inspector made on first use, over the collection `collection()` gives then. */
function lazyInspector(collection: () => MongoInspectorCollection): ReturnType<typeof mongoLockInspector> {
  let inspector: ReturnType<typeof mongoLockInspector> | undefined
  const current = () => (inspector ??= mongoLockInspector({ collection: collection() }))
  return {
    name: 'mongodb',
    clock: "this host's clock",
    list: (selection) => current().list(selection),
    get: (name) => current().get(name),
    release: (lock) => current().release(lock),
    removeExpired: (selection) => current().removeExpired(selection),
  }
}

// ---- the driver calls the inspector makes, checked on the fake and on a real server ----

function semanticsTests(backend: () => Backend): void {
  const raw = () =>
    backend().collection as unknown as {
      find(filter: Document): { toArray(): Promise<Document[]> }
      findOne(filter: Document): Promise<Document | null>
      updateOne(filter: Document, update: Document): Promise<{ matchedCount: number; modifiedCount: number }>
      deleteMany(filter: Document): Promise<{ deletedCount: number }>
    }

  it('find({}).toArray() returns every document; findOne returns the match or null', async () => {
    const b = backend()
    const id = unique('sem')
    await b.insert({ _id: id, lockUntil: new Date(5000), lockedBy: 'a' })
    expect((await raw().find({}).toArray()).find((doc) => doc._id === id)).toEqual({
      _id: id,
      lockUntil: new Date(5000),
      lockedBy: 'a',
    })
    expect(await raw().findOne({ _id: id })).toEqual({ _id: id, lockUntil: new Date(5000), lockedBy: 'a' })
    expect(await raw().findOne({ _id: `${id}-none` })).toBeNull()
  })

  it('updateOne matches equality with a Date by its instant, as a release by lockedAt does', async () => {
    const b = backend()
    const id = unique('sem')
    await b.insert({ _id: id, lockUntil: new Date(5000), lockedAt: new Date(4000), lockedBy: 'a' })
    const set = { $set: { lockedBy: 'released' } }
    const filter = (lockedAt: Date) => ({ _id: id, lockedBy: 'a', lockedAt, lockUntil: { $gt: new Date(4999) } })
    expect(await raw().updateOne(filter(new Date(4001)), set)).toMatchObject({ matchedCount: 0 })
    expect(await raw().updateOne(filter(new Date(4000)), set)).toMatchObject({ matchedCount: 1, modifiedCount: 1 })
  })

  it('updateOne matches { $gt, $eq } on a Date and equality with null on a missing field; without a match it changes and inserts nothing', async () => {
    const b = backend()
    const [dated, missing] = [unique('sem'), unique('sem')]
    await b.insert({ _id: dated, lockUntil: new Date(5000), lockedBy: 'a' })
    await b.insert({ _id: missing, lockedBy: 'a' })
    const set = { $set: { lockedBy: 'released' } }
    expect(
      await raw().updateOne({ _id: dated, lockUntil: { $gt: new Date(5000), $eq: new Date(5000) } }, set),
    ).toMatchObject({
      matchedCount: 0,
      modifiedCount: 0,
    })
    expect(
      await raw().updateOne(
        { _id: dated, lockedBy: 'b', lockUntil: { $gt: new Date(4999), $eq: new Date(5000) } },
        set,
      ),
    ).toMatchObject({
      matchedCount: 0,
    })
    expect(
      await raw().updateOne(
        { _id: dated, lockedBy: 'a', lockUntil: { $gt: new Date(4999), $eq: new Date(5000) } },
        set,
      ),
    ).toMatchObject({
      matchedCount: 1,
      modifiedCount: 1,
    })
    expect(await b.read(dated)).toEqual({ _id: dated, lockUntil: new Date(5000), lockedBy: 'released' })
    expect(await raw().updateOne({ _id: missing, lockUntil: null }, set)).toMatchObject({
      matchedCount: 1,
      modifiedCount: 1,
    })
    // The same values again: matched, not modified.
    expect(await raw().updateOne({ _id: missing }, set)).toMatchObject({ matchedCount: 1, modifiedCount: 0 })
    expect(await raw().updateOne({ _id: unique('none') }, set)).toMatchObject({ matchedCount: 0 })
    expect(await raw().findOne({ lockedBy: 'never' })).toBeNull()
  })

  it('find and deleteMany with an anchored $regex on _id: string ids only, escaped metacharacters literal, NUL refused; deleteMany with $lte on a Date', async () => {
    const b = backend()
    const base = unique('sem')
    await b.insert({ _id: `${base}.a`, lockUntil: new Date(5000) })
    await b.insert({ _id: `${base}xa`, lockUntil: new Date(5000) })
    await b.insert({ _id: `${base}.b`, lockUntil: new Date(6000) })
    await b.insert({ _id: `${base}.c`, lockUntil: '1970-01-01T00:00:01Z' })
    await b.insert({ _id: `${base}.😀`, lockUntil: new Date(4000) })
    const escaped = `^${base}\\.`
    expect(
      (
        await raw()
          .find({ _id: { $regex: escaped } })
          .toArray()
      )
        .map((doc) => doc._id)
        .sort(),
    ).toEqual([`${base}.a`, `${base}.b`, `${base}.c`, `${base}.😀`])
    expect(
      (
        await raw()
          .find({ _id: { $regex: `^${base}.` } })
          .toArray()
      ).length,
    ).toBe(5)
    expect(
      (
        await raw()
          .find({ _id: { $regex: `^x${base}` } })
          .toArray()
      ).length,
    ).toBe(0)
    expect(
      (
        await raw()
          .find({ _id: { $regex: `^${base}\\x00` } })
          .toArray()
      ).length,
    ).toBe(0)
    await expect(
      raw()
        .find({ _id: { $regex: `^${base}\0` } })
        .toArray(),
    ).rejects.toMatchObject({ code: 2 })
    expect(await raw().deleteMany({ _id: { $regex: escaped }, lockUntil: { $lte: new Date(5000) } })).toMatchObject({
      deletedCount: 2,
    })
    expect(await b.read(`${base}.a`)).toBeUndefined()
    expect(await b.read(`${base}.😀`)).toBeUndefined()
    for (const kept of [`${base}xa`, `${base}.b`, `${base}.c`]) expect(await b.read(kept)).toBeDefined()
    expect(await raw().deleteMany({ _id: `${base}-none` })).toMatchObject({ deletedCount: 0 })
  })

  it('updateOne refuses a replacement document', async () => {
    await expect(raw().updateOne({ _id: 'x' }, { lockedBy: 'released' })).rejects.toMatchObject({
      name: 'MongoInvalidArgumentError',
    })
  })
}

describe('mongoLockInspector on the in-memory fake collection', () => {
  inspectorTests(() => fakeBackend)

  it('a broken connection rejects with LockProviderError saying MongoDB is unreachable', async () => {
    const dead = new FakeMongoCollection('locks')
    dead.breakConnection()
    const inspector = mongoLockInspector({ collection: dead })
    await expect(inspector.list()).rejects.toThrow(
      /^mongodb: could not list the locks: MongoDB is unreachable \(MongoNetworkError/,
    )
    await expect(inspector.get('x')).rejects.toThrow(LockProviderError)
    await expect(inspector.release('x')).rejects.toThrow(/could not release lock "x": MongoDB is unreachable/)
  })

  it('a user without read permission is told which role to grant', async () => {
    const collection = new FakeMongoCollection('locks')
    collection.failNext(
      new MongoServerError('not authorized on app to execute command { find: "locks" }', 13, 'Unauthorized'),
    )
    await expect(mongoLockInspector({ collection }).list()).rejects.toThrow(
      /the user may not read collection "locks" .*grant it the readWrite role/,
    )
  })

  it('refuses options without a collection, and names over 16 MiB − 64 KiB', async () => {
    expect(() => mongoLockInspector({} as never)).toThrow(LockConfigurationError)
    expect(() => mongoLockInspector({ collection: { findOneAndUpdate: async () => null } } as never)).toThrow(
      /find, findOne, updateOne and deleteMany/,
    )
    await expect(mongoLockInspector({ collection: fake }).get('x'.repeat(16 * 1024 * 1024))).rejects.toThrow(
      LockConfigurationError,
    )
  })

  it("takes the driver's Collection as it is (a compile-time check)", () => {
    const client = new MongoClient('mongodb://127.0.0.1:1')
    const typed: MongoInspectorCollection = client.db('x').collection<MongoLockDocument>('shedLock')
    const untyped: MongoInspectorCollection = client.db('x').collection('shedLock')
    expect(typed.collectionName).toBe('shedLock')
    expect(untyped.collectionName).toBe('shedLock')
  })

  describe('fake semantics the inspector relies on', () => semanticsTests(() => fakeBackend))
})

describe.skipIf(!real)('mongoLockInspector on a real server (SHEDLOCK_MONGODB_URL)', () => {
  let backend: Backend | undefined
  const get = (): Backend => (backend ??= realBackend())
  inspectorTests(get)
  describe('driver semantics that the fake mirrors', () => semanticsTests(get))
})
