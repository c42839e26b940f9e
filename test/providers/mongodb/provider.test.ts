import assert from 'node:assert/strict'
import { hostname } from 'node:os'
import { type Collection, MongoClient } from 'mongodb'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createLockingTaskExecutor,
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import {
  type MongoLockCollection,
  type MongoLockDocument,
  mongoLockProvider,
} from '../../../src/providers/mongodb/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip, uniqueTable } from '../../helpers/backends.ts'
import {
  type Document,
  FakeMongoCollection,
  MongoNetworkError,
  MongoServerError,
} from '../../helpers/fake-mongo-collection.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

/** Exactly the driver call the semantics tests make, typed loosely enough for the fake and a real Collection. */
interface RawCollection {
  findOneAndUpdate(filter: Document, update: Document | Document[], options: Record<string, unknown>): Promise<unknown>
}

/** A place lock documents live: the fake, or a real server's collection. */
interface Backend {
  collection: MongoLockCollection
  raw: RawCollection
  /** Reads the stored document directly, never through the provider. */
  read(id: string): Promise<Document | undefined>
  insert(doc: Document): Promise<void>
  remove(id: string): Promise<void>
  unreachable(): MongoLockCollection
}

const HOUR = 3_600_000

const isHeld = (doc: Document | undefined): boolean =>
  doc?.lockUntil instanceof Date && doc.lockUntil.getTime() > Date.now()

// ---- the in-memory fake: always runs ----

const fake = new FakeMongoCollection()
const fakeBackend: Backend = {
  collection: fake,
  raw: fake,
  read: async (id) => fake.document(id),
  insert: async (doc) => fake.insertDocument(doc),
  remove: async (id) => fake.deleteDocument(id),
  unreachable: () => {
    const dead = new FakeMongoCollection()
    dead.breakConnection()
    return dead
  },
}

// ---- a real server: only with SHEDLOCK_MONGODB_URL (none can be installed here, so not even CI requires one) ----

const url = process.env.SHEDLOCK_MONGODB_URL
const redactedUrl = url?.replace(/(\/\/[^:/@]*):[^@]*@/, '$1:***@')
const real = url
  ? await connectOrSkip('mongodb', `${redactedUrl} (SHEDLOCK_MONGODB_URL)`, async () => {
      const client = new MongoClient(url, { serverSelectionTimeoutMS: 5_000 })
      try {
        await client.db().command({ ping: 1 })
      } catch (error) {
        await client.close()
        throw error
      }
      return client
    })
  : undefined
if (!url) {
  console.warn(
    'SKIPPED mongodb real-server tests: SHEDLOCK_MONGODB_URL is not set (no MongoDB server can run on this machine); the provider runs the whole suite against test/helpers/fake-mongo-collection.ts instead.',
  )
}

const deadClients: MongoClient[] = []
const realCollections: Collection<MongoLockDocument>[] = []
const realBackend = (): Backend => {
  const db = real!.db()
  // Java ShedLock's collection is `shedLock`; a unique name lets test runs share one server.
  const collection = db.collection<MongoLockDocument>(uniqueTable('shedLock'), { writeConcern: { w: 'majority' } })
  realCollections.push(collection)
  return {
    collection,
    raw: collection as unknown as RawCollection,
    read: async (id) => (await collection.findOne({ _id: id })) ?? undefined,
    insert: async (doc) => {
      await collection.insertOne(doc as unknown as MongoLockDocument)
    },
    remove: async (id) => {
      await collection.deleteOne({ _id: id })
    },
    unreachable: () => {
      const dead = new MongoClient('mongodb://127.0.0.1:1/?directConnection=true', { serverSelectionTimeoutMS: 1_000 })
      deadClients.push(dead)
      return dead.db('shedlock').collection('shedLock')
    },
  }
}

afterAll(async () => {
  for (const collection of realCollections) await collection.drop().catch(() => undefined)
  for (const client of deadClients) await client.close()
  await real?.close()
})

// ---- what both backends must do ----

function providerTests(backend: () => Backend): void {
  describe('conformance suite', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => mongoLockProvider({ collection: backend().collection }),
        isLocked: async (name) => isHeld(await backend().read(name)),
        deleteRecord: (name) => backend().remove(name),
        unreachableProvider: () => mongoLockProvider({ collection: backend().unreachable() }),
        extensible: true,
        fencing: true,
        slots: { inspector: true },
        // _id lives in a document of at most 16 MiB; 64 KiB stay for the other fields and the command.
        maxNameLength: 16 * 1024 * 1024 - 64 * 1024,
      }),
    )
  })

  describe('storage format (Java ShedLock)', () => {
    it("writes { _id: name, lockUntil: Date, lockedAt: Date, lockedBy } and shedlock's fencingToken, nothing else", async () => {
      const b = backend()
      const configuration = lockConfiguration({ name: `format-${Math.random()}`, lockAtMostFor: '1h' })
      const before = Date.now()
      const lock = await mongoLockProvider({ collection: b.collection }).lock(configuration)
      assert.ok(lock)
      const doc = await b.read(configuration.name)
      assert.ok(doc)
      expect(Object.keys(doc).sort()).toEqual(['_id', 'fencingToken', 'lockUntil', 'lockedAt', 'lockedBy'])
      expect(typeof doc.fencingToken).toBe('number')
      expect(BigInt(doc.fencingToken as number)).toBe(lock.fencingToken)
      expect(doc._id).toBe(configuration.name)
      expect(doc.lockUntil).toEqual(configuration.lockAtMostUntil)
      assert.ok(doc.lockedAt instanceof Date)
      expect(doc.lockedAt.getTime()).toBeGreaterThanOrEqual(before)
      expect(doc.lockedAt.getTime()).toBeLessThanOrEqual(Date.now())
      expect(String(doc.lockedBy)).toMatch(
        new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${process.pid}:[0-9a-f]{12}$`),
      )
      await lock.unlock()
    })

    it('counts in fencingToken: from the clock in microseconds on a document without one, then one more per acquisition, kept through Java updates', async () => {
      const b = backend()
      const name = `fence-${Math.random()}`
      const start = Date.UTC(2030, 0, 1)
      await b.insert({
        _id: name,
        lockUntil: new Date(start - 1000),
        lockedAt: new Date(start - HOUR),
        lockedBy: 'java-host',
      })
      const at = (ms: number) => mongoLockProvider({ collection: b.collection, clock: { now: () => ms } })
      const config = (ms: number) => lockConfiguration({ name, lockAtMostFor: '1s', createdAt: new Date(ms) })
      const first = await at(start).lock(config(start))
      expect(first?.fencingToken).toBe(BigInt(start) * 1000n + 1n)
      // A Java node takes the expired lock over the way Java ShedLock does: $set of its three fields.
      await b.raw.findOneAndUpdate(
        { _id: name, lockUntil: { $lte: new Date(start + 2000) } },
        { $set: { lockUntil: new Date(start + 3000), lockedAt: new Date(start + 2000), lockedBy: 'java-host' } },
        { upsert: true },
      )
      expect((await b.read(name))?.fencingToken).toBe(Number(first!.fencingToken))
      const second = await at(start + 4000).lock(config(start + 4000))
      expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
      // Deleted (an operator, removeExpired): the count restarts from the later clock, above the old one.
      await b.remove(name)
      const third = await at(start + 5000).lock(config(start + 5000))
      expect(third?.fencingToken).toBe(BigInt(start + 5000) * 1000n + 1n)
    })

    it('a lockedBy that starts with "$" is stored as it is, not read as a field path', async () => {
      const b = backend()
      const name = `dollar-${Math.random()}`
      const lock = await mongoLockProvider({ collection: b.collection, lockedBy: '$lockUntil' }).lock(
        lockConfiguration({ name, lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      expect((await b.read(name))?.lockedBy).toBe(lock.lockedBy)
      expect(lock.lockedBy?.startsWith('$lockUntil:')).toBe(true)
      await lock.unlock()
    })

    it('respects a lock that Java ShedLock holds and takes over one that expired', async () => {
      const b = backend()
      const now = Date.now()
      const held: Document = {
        _id: `java-held-${Math.random()}`,
        lockUntil: new Date(now + HOUR),
        lockedAt: new Date(now),
        lockedBy: 'java-host',
      }
      const expired: Document = {
        _id: `java-expired-${Math.random()}`,
        lockUntil: new Date(now - 1000),
        lockedAt: new Date(now - HOUR),
        lockedBy: 'java-host',
      }
      await b.insert(held)
      await b.insert(expired)
      const provider = mongoLockProvider({ collection: b.collection, lockedBy: 'node-app' })
      expect(await provider.lock(lockConfiguration({ name: String(held._id), lockAtMostFor: '1m' }))).toBeUndefined()
      expect(await b.read(String(held._id))).toEqual(held)

      const lock = await provider.lock(
        lockConfiguration({ name: String(expired._id), lockAtMostFor: '1m', lockAtLeastFor: '10s' }),
      )
      assert.ok(lock)
      const taken = await b.read(String(expired._id))
      expect(String(taken?.lockedBy)).toMatch(/^node-app:\d+:[0-9a-f]{12}$/)
      expect((taken!.lockedAt as Date).getTime()).toBeGreaterThanOrEqual(now)
      await lock.unlock()
      // A Java node reads lockUntil as a Date: held for lockAtLeastFor, then free.
      expect(isHeld(await b.read(String(expired._id)))).toBe(true)
    })

    it('the acquire filter is `lockUntil <= now` on the app clock: free exactly at lockUntil', async () => {
      const b = backend()
      const until = Date.UTC(2030, 0, 1)
      const name = `boundary-${Math.random()}`
      await b.insert({ _id: name, lockUntil: new Date(until), lockedAt: new Date(until - HOUR), lockedBy: 'java-host' })
      const at = (ms: number) => mongoLockProvider({ collection: b.collection, clock: { now: () => ms } })
      const config = lockConfiguration({ name, lockAtMostFor: '1m', createdAt: new Date(until) })
      expect(await at(until - 1).lock(config)).toBeUndefined()
      const lock = await at(until).lock(config)
      assert.ok(lock)
      const doc = await b.read(name)
      expect(doc?.lockedAt).toEqual(new Date(until))
      expect(doc?.lockUntil).toEqual(new Date(until + 60_000))
    })

    it('an app clock an hour ahead takes a held lock: expiry is only as good as the clocks (documented)', async () => {
      const b = backend()
      const name = `skew-${Math.random()}`
      const honest = await mongoLockProvider({ collection: b.collection }).lock(
        lockConfiguration({ name, lockAtMostFor: '10m' }),
      )
      assert.ok(honest)
      const ahead = { now: () => Date.now() + HOUR }
      const skewed = await mongoLockProvider({ collection: b.collection, clock: ahead }).lock(
        lockConfiguration({ name, lockAtMostFor: '10m', createdAt: new Date(ahead.now()) }),
      )
      expect(skewed).toBeDefined()
    })
  })

  describe('owner checks (Java ShedLock has none: its issue #74)', () => {
    it("a handle whose lock a Java node took over neither extends nor releases the Java node's lock", async () => {
      const b = backend()
      for (const action of ['extend', 'unlock'] as const) {
        const name = `taken-over-${action}-${Math.random()}`
        const lock = (await mongoLockProvider({ collection: b.collection }).lock(
          lockConfiguration({ name, lockAtMostFor: '10m' }),
        )) as ExtensibleLock | undefined
        assert.ok(lock)
        // A Java node found the lock expired (its clock is ahead, say) and took it over.
        const javaDoc: Document = {
          _id: name,
          lockUntil: new Date(Date.now() + HOUR),
          lockedAt: new Date(),
          lockedBy: 'java-host',
        }
        await b.remove(name)
        await b.insert(javaDoc)
        if (action === 'extend') expect(await lock.extend('2h', 0)).toBeUndefined()
        else await lock.unlock()
        expect(await b.read(name)).toEqual(javaDoc)
      }
    })

    it('unlock keeps the lock until lockAtLeastUntil, touches only lockUntil, and recreates nothing', async () => {
      const b = backend()
      const name = `at-least-${Math.random()}`
      const configuration = lockConfiguration({ name, lockAtMostFor: '2h', lockAtLeastFor: '1h' })
      const lock = await mongoLockProvider({ collection: b.collection }).lock(configuration)
      assert.ok(lock)
      const held = await b.read(name)
      await lock.unlock()
      expect(await b.read(name)).toEqual({ ...held, lockUntil: configuration.lockAtLeastUntil })

      const gone = await mongoLockProvider({ collection: b.collection }).lock(
        lockConfiguration({ name: `${name}-gone`, lockAtMostFor: '1m' }),
      )
      assert.ok(gone)
      await b.remove(`${name}-gone`)
      await gone.unlock()
      expect(await b.read(`${name}-gone`)).toBeUndefined()
    })

    it('extend moves only lockUntil, measured from now', async () => {
      const b = backend()
      const name = `extend-${Math.random()}`
      const lock = (await mongoLockProvider({ collection: b.collection }).lock(
        lockConfiguration({ name, lockAtMostFor: '1m' }),
      )) as ExtensibleLock
      const held = await b.read(name)
      const before = Date.now()
      const extended = await lock.extend('2h', 0)
      assert.ok(extended)
      const doc = await b.read(name)
      expect({ ...doc, lockUntil: undefined }).toEqual({ ...held, lockUntil: undefined })
      expect((doc!.lockUntil as Date).getTime()).toBeGreaterThanOrEqual(before + 2 * HOUR)
      expect((doc!.lockUntil as Date).getTime()).toBeLessThanOrEqual(Date.now() + 2 * HOUR)
      await extended.unlock()
      expect(isHeld(await b.read(name))).toBe(false)
    })
  })
}

describe('mongodb provider on the in-memory fake collection', () => {
  providerTests(() => fakeBackend)

  describe('store failures', () => {
    it('a dropped connection rejects with LockProviderError, the task does not run, and the same provider works once the connection is back', async () => {
      const collection = new FakeMongoCollection()
      const provider = mongoLockProvider({ collection })
      collection.breakConnection()
      const error = await provider
        .lock(lockConfiguration({ name: 'dropped', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toMatch(
        /^mongodb: could not acquire lock "dropped": MongoDB is unreachable \(MongoNetworkError: /,
      )
      expect(error.cause).toBeInstanceOf(MongoNetworkError)
      expect(error.provider).toBe('mongodb')
      expect(error.lockName).toBe('dropped')
      let ran = false
      await expect(
        createLockingTaskExecutor(provider).executeWithLock(
          () => {
            ran = true
          },
          { name: 'dropped', lockAtMostFor: '1m' },
        ),
      ).rejects.toBeInstanceOf(LockProviderError)
      expect(ran).toBe(false)

      collection.restoreConnection()
      const result = await createLockingTaskExecutor(provider).executeWithLock(() => 'ran', {
        name: 'dropped',
        lockAtMostFor: '1m',
      })
      expect(result).toEqual({ executed: true, result: 'ran' })
      expect(isHeld(collection.document('dropped'))).toBe(false)
    })

    it('a failed unlock or extend rejects with LockProviderError and leaves the handle usable', async () => {
      const collection = new FakeMongoCollection()
      const lock = (await mongoLockProvider({ collection }).lock(
        lockConfiguration({ name: 'flaky', lockAtMostFor: '1m' }),
      )) as ExtensibleLock
      collection.breakConnection()
      await expect(lock.extend('5m', 0)).rejects.toThrow(
        /^mongodb: could not extend lock "flaky": MongoDB is unreachable/,
      )
      await expect(lock.unlock()).rejects.toThrow(/^mongodb: could not release lock "flaky": MongoDB is unreachable/)
      collection.restoreConnection()
      await lock.unlock()
      expect(isHeld(collection.document('flaky'))).toBe(false)
    })

    it('a server error other than 11000 on acquire is an error, not "held", and says what to do', async () => {
      const collection = new FakeMongoCollection('locks')
      collection.failNext(
        new MongoServerError('not authorized on app to execute command { findAndModify: "locks" }', 13, 'Unauthorized'),
      )
      await expect(
        mongoLockProvider({ collection }).lock(lockConfiguration({ name: 'auth', lockAtMostFor: '1m' })),
      ).rejects.toThrow(
        'mongodb: could not acquire lock "auth": the user may not update collection "locks" (not authorized on app to execute command { findAndModify: "locks" }); grant it the readWrite role on that collection',
      )
      collection.failNext(new MongoServerError('not primary', 10107, 'NotWritablePrimary'))
      await expect(
        mongoLockProvider({ collection }).lock(lockConfiguration({ name: 'failover', lockAtMostFor: '1m' })),
      ).rejects.toThrow(/no writable primary/)
    })

    it('never puts a password from a connection string into its message', async () => {
      const collection = new FakeMongoCollection()
      const selection = Object.assign(
        new Error('Server selection timed out after 1000 ms for mongodb://admin:s3cret@db.example:27017/app'),
        {
          name: 'MongoServerSelectionError',
        },
      )
      collection.failNext(selection)
      const error = await mongoLockProvider({ collection })
        .lock(lockConfiguration({ name: 'secret', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).not.toContain('s3cret')
      expect(error.message).toContain('mongodb://admin:***@db.example')
    })

    it('a real driver that cannot reach any server rejects with LockProviderError (MongoServerSelectionError)', async () => {
      const client = new MongoClient('mongodb://127.0.0.1:1/?directConnection=true', { serverSelectionTimeoutMS: 500 })
      try {
        const error = await mongoLockProvider({ collection: client.db('x').collection('shedLock') })
          .lock(lockConfiguration({ name: 'no-server', lockAtMostFor: '1m' }))
          .catch((e: unknown) => e)
        assert.ok(error instanceof LockProviderError)
        expect(error.message).toMatch(
          /^mongodb: could not acquire lock "no-server": MongoDB is unreachable \(MongoServerSelectionError: /,
        )
        expect((error.cause as Error).name).toBe('MongoServerSelectionError')
      } finally {
        await client.close()
      }
    })

    it('a closed MongoClient rejects with LockProviderError that says the client was closed', async () => {
      const client = new MongoClient('mongodb://127.0.0.1:1/?directConnection=true', { serverSelectionTimeoutMS: 500 })
      await client.close()
      const error = await mongoLockProvider({ collection: client.db('x').collection('shedLock') })
        .lock(lockConfiguration({ name: 'closed', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toMatch(/^mongodb: could not acquire lock "closed": the MongoClient was closed/)
    })
  })

  describe('bad options', () => {
    it('throw LockConfigurationError at construction, before any call', () => {
      const collection = new FakeMongoCollection()
      expect(() => mongoLockProvider(undefined as never)).toThrow(LockConfigurationError)
      expect(() => mongoLockProvider({} as never)).toThrow(/pass your lock collection as \{ collection \}/)
      expect(() =>
        mongoLockProvider({ collection: new MongoClient('mongodb://127.0.0.1:1').db('x') as never }),
      ).toThrow(LockConfigurationError)
      expect(() => mongoLockProvider({ collection, lockedBy: '' })).toThrow(LockConfigurationError)
      expect(() => mongoLockProvider({ collection, lockedBy: '  ' })).toThrow(/lockedBy must be a non-empty string/)
      expect(collection.operations).toBe(0)
    })

    it('a driver Collection fits the structural type', () => {
      const client = new MongoClient('mongodb://127.0.0.1:1')
      const typed: MongoLockCollection = client.db('x').collection<MongoLockDocument>('shedLock')
      const untyped: MongoLockCollection = client.db('x').collection('shedLock')
      expect(typed.collectionName).toBe('shedLock')
      expect(untyped.collectionName).toBe('shedLock')
    })
  })
})

// ---- the fake's own behaviour, checked against documented MongoDB semantics (and a real server when there is one) ----

function semanticsTests(backend: () => Backend): void {
  const id = () => `sem-${Math.random()}`
  const at = (ms: number) => new Date(ms)

  it('an upsert that matches nothing inserts the filter equalities plus $set, and returns null (returnDocument "before")', async () => {
    const b = backend()
    const key = id()
    const result = await b.raw.findOneAndUpdate(
      { _id: key, lockUntil: { $lte: at(1000) } },
      { $set: { lockUntil: at(5000), lockedBy: 'a' } },
      { upsert: true },
    )
    expect(result).toBeNull()
    expect(await b.read(key)).toEqual({ _id: key, lockUntil: at(5000), lockedBy: 'a' })
  })

  it('returnDocument "after" returns the new document; the default returns the one before the update', async () => {
    const b = backend()
    const key = id()
    expect(
      await b.raw.findOneAndUpdate({ _id: key }, { $set: { n: 1 } }, { upsert: true, returnDocument: 'after' }),
    ).toEqual({ _id: key, n: 1 })
    expect(await b.raw.findOneAndUpdate({ _id: key }, { $set: { n: 2 } }, {})).toEqual({ _id: key, n: 1 })
    expect(await b.read(key)).toEqual({ _id: key, n: 2 })
  })

  it('without upsert, no match resolves to null and inserts nothing; includeResultMetadata wraps the result', async () => {
    const b = backend()
    const key = id()
    expect(await b.raw.findOneAndUpdate({ _id: key }, { $set: { n: 1 } }, {})).toBeNull()
    expect(await b.read(key)).toBeUndefined()
    const wrapped = (await b.raw.findOneAndUpdate(
      { _id: key },
      { $set: { n: 1 } },
      { includeResultMetadata: true },
    )) as Document
    expect(wrapped).toMatchObject({ value: null, ok: 1 })
  })

  it('an upsert whose filter does not match the existing _id fails with E11000 (code 11000) and changes nothing', async () => {
    const b = backend()
    const key = id()
    await b.insert({ _id: key, lockUntil: at(9000), lockedBy: 'holder' })
    const error = await b.raw
      .findOneAndUpdate(
        { _id: key, lockUntil: { $lte: at(1000) } },
        { $set: { lockUntil: at(5000), lockedBy: 'b' } },
        { upsert: true },
      )
      .catch((e: unknown) => e)
    expect(error).toMatchObject({ name: 'MongoServerError', code: 11000 })
    expect((error as Error).message).toMatch(/^E11000 duplicate key error/)
    expect(await b.read(key)).toEqual({ _id: key, lockUntil: at(9000), lockedBy: 'holder' })
  })

  it('of two concurrent upserts of a new _id, one inserts and the other fails with 11000', async () => {
    const b = backend()
    const key = id()
    const upsert = (who: string) =>
      b.raw.findOneAndUpdate(
        { _id: key, lockUntil: { $lte: at(1000) } },
        { $set: { lockUntil: at(5000), lockedBy: who } },
        { upsert: true },
      )
    const results = await Promise.allSettled([upsert('a'), upsert('b')])
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
    const rejected = results.filter((r) => r.status === 'rejected')
    expect(rejected).toHaveLength(1)
    expect((rejected[0] as PromiseRejectedResult).reason).toMatchObject({ code: 11000 })
    const winner = results[0]!.status === 'fulfilled' ? 'a' : 'b'
    expect((await b.read(key))?.lockedBy).toBe(winner)
  })

  it('$lte and $gt compare Dates by time, inclusively for $lte; a missing field or another BSON type never matches', async () => {
    const b = backend()
    const [dated, missing, text] = [id(), id(), id()]
    await b.insert({ _id: dated, lockUntil: at(2000) })
    await b.insert({ _id: missing })
    await b.insert({ _id: text, lockUntil: '1970-01-01T00:00:00.000Z' })
    const hit = async (key: string, condition: Document) =>
      (await b.raw.findOneAndUpdate({ _id: key, lockUntil: condition }, { $set: { seen: true } }, {})) !== null
    expect(await hit(dated, { $lte: at(2000) })).toBe(true)
    expect(await hit(dated, { $lte: at(1999) })).toBe(false)
    expect(await hit(dated, { $gt: at(1999) })).toBe(true)
    expect(await hit(dated, { $gt: at(2000) })).toBe(false)
    expect(await hit(missing, { $lte: at(Date.now() + HOUR) })).toBe(false)
    expect(await hit(text, { $lte: at(Date.now() + HOUR) })).toBe(false)
    expect(await hit(text, { $gt: at(0) })).toBe(false)
  })

  it('equality on lockedBy matches only that exact value', async () => {
    const b = backend()
    const key = id()
    await b.insert({ _id: key, lockedBy: 'host:1:abc' })
    expect(await b.raw.findOneAndUpdate({ _id: key, lockedBy: 'host:1:ab' }, { $set: { n: 1 } }, {})).toBeNull()
    expect(await b.raw.findOneAndUpdate({ _id: key, lockedBy: 'host:1:abc' }, { $set: { n: 1 } }, {})).not.toBeNull()
  })

  it('a replacement document is refused, and $set cannot change _id (code 66)', async () => {
    const b = backend()
    const key = id()
    await b.insert({ _id: key, n: 0 })
    await expect(b.raw.findOneAndUpdate({ _id: key }, { n: 1 }, {})).rejects.toMatchObject({
      name: 'MongoInvalidArgumentError',
    })
    await expect(b.raw.findOneAndUpdate({ _id: key }, { $set: { _id: `${key}-other` } }, {})).rejects.toMatchObject({
      code: 66,
    })
    expect(await b.read(key)).toEqual({ _id: key, n: 0 })
  })

  it('an update pipeline: $set stages of $ifNull, $add, field paths and $literal, on an upsert and on a match', async () => {
    const b = backend()
    const key = id()
    const pipeline = (by: string) => [
      { $set: { lockUntil: at(5000), lockedBy: { $literal: by }, n: { $add: [{ $ifNull: ['$n', 1000] }, 1] } } },
    ]
    const inserted = await b.raw.findOneAndUpdate({ _id: key, lockUntil: { $lte: at(1000) } }, pipeline('$x'), {
      upsert: true,
      returnDocument: 'after',
    })
    expect(inserted).toEqual({ _id: key, lockUntil: at(5000), lockedBy: '$x', n: 1001 })
    const updated = await b.raw.findOneAndUpdate({ _id: key, lockUntil: { $lte: at(6000) } }, pipeline('b'), {
      upsert: true,
      returnDocument: 'after',
    })
    expect(updated).toEqual({ _id: key, lockUntil: at(5000), lockedBy: 'b', n: 1002 })
    // Without $literal, a string that starts with '$' is a field path: here, a missing field.
    await b.raw.findOneAndUpdate({ _id: key }, [{ $set: { copy: '$lockedBy', gone: '$nothing' } }], {})
    const doc = await b.read(key)
    expect(doc).toEqual({ _id: key, lockUntil: at(5000), lockedBy: 'b', n: 1002, copy: 'b' })
    expect(Object.keys(doc!)).not.toContain('gone')
    // And an upsert that matches nothing while the _id exists fails with E11000, as with $set.
    const error = await b.raw
      .findOneAndUpdate({ _id: key, lockUntil: { $lte: at(1000) } }, pipeline('c'), { upsert: true })
      .catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 11000 })
  })
}

describe('fake MongoDB collection semantics', () => {
  semanticsTests(() => fakeBackend)

  it('returns copies: changing a returned document changes nothing stored', async () => {
    const collection = new FakeMongoCollection()
    const doc = (await collection.findOneAndUpdate(
      { _id: 'copy' },
      { $set: { lockUntil: new Date(1) } },
      { upsert: true, returnDocument: 'after' },
    )) as Document
    ;(doc.lockUntil as Date).setTime(99)
    expect(collection.document('copy')?.lockUntil).toEqual(new Date(1))
  })
})

describe.skipIf(!real)('mongodb provider on a real server (SHEDLOCK_MONGODB_URL)', () => {
  let backend: Backend | undefined
  const get = (): Backend => (backend ??= realBackend())
  providerTests(get)
  describe('driver semantics that the fake mirrors', () => semanticsTests(get))
})

describe.runIf(!url)('without SHEDLOCK_MONGODB_URL', () => {
  it('the real-server tests are skipped, and the provider ran against the fake instead', () => {
    // The fake's suite and tests above ran first (vitest runs a file's tests in order).
    expect(fake.operations).toBeGreaterThan(500)
  })
})
