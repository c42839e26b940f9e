import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Firestore, Timestamp } from '@google-cloud/firestore'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, lockConfiguration } from '../../../src/index.ts'
import {
  firestoreDocumentId,
  firestoreLockInspector,
  firestoreLockName,
  firestoreLockProvider,
} from '../../../src/providers/firestore/index.ts'
import { lockInspectorSuite, lockProviderSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { firestoreOrSkip, GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { registerInspectorSuite, registerSuite } from '../../helpers/register-suite.ts'

const db = await firestoreOrSkip()
const HOUR = 3_600_000

/** A Firestore client on a port nothing listens on (the emulator variable would override `host`). */
function deadFirestore(): Firestore {
  const emulator = process.env.FIRESTORE_EMULATOR_HOST
  delete process.env.FIRESTORE_EMULATOR_HOST
  try {
    return new Firestore({ projectId: GOOGLE_TEST_PROJECT, host: '127.0.0.1:1', ssl: false })
  } finally {
    process.env.FIRESTORE_EMULATOR_HOST = emulator
  }
}

describe.skipIf(!db)('firestore', () => {
  const firestore = db!
  // Java ShedLock's collection is `shedlock`; a unique one lets test files share the emulator.
  const collection = firestore.collection(uniqueTable('shedlock'))
  const provider = (options: { lockedBy?: string } = {}) => firestoreLockProvider({ collection, ...options })
  const raw = (name: string) => collection.doc(firestoreDocumentId(name))
  const isLocked = async (name: string): Promise<boolean> => {
    const until = (await raw(name).get()).get('lockUntil')
    return until instanceof Timestamp && until.toMillis() > Date.now()
  }

  afterAll(async () => {
    const { docs } = await collection.get()
    await Promise.all(docs.map((doc) => doc.ref.delete()))
    // The dead clients (unreachableProvider) are left open: after our timeout gave up, the client still retries a failed
    // read up to 5 times over ~15 s, and a retry after terminate() rejects a promise that
    // @google-cloud/firestore drops (requestStream's `void this._clientPool.run(...)`): an
    // unhandled rejection. They hold no server connection; the worker's exit ends them.
    await firestore.terminate()
  })

  describe('conformance', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => provider(),
        isLocked,
        extensible: true,
        deleteRecord: async (name) => {
          await raw(name).delete()
        },
        unreachableProvider: () => {
          return firestoreLockProvider({ collection: deadFirestore().collection('shedlock'), timeout: '2s' })
        },
        slots: { inspector: true },
        fencing: true,
        // A document id holds 1,500 bytes.
        maxNameLength: 1500,
        // A read and a write take ~10 ms on an idle emulator but hundreds on a loaded CI machine:
        // the suite's shortest locks (200 ms) could expire before the write lands.
        timeGranularityMs: 500,
      }),
    )
  })

  describe('inspector conformance', () => {
    registerInspectorSuite(
      lockInspectorSuite({ provider: () => provider(), inspector: firestoreLockInspector({ collection }) }),
    )
  })

  // Java ShedLock's FirestoreStorageAccessor: document id = name, Timestamps and the host name.
  describe("Java ShedLock's documents", () => {
    const javaDocument = (lockUntil: number, lockedBy = 'java-host') => ({
      lockUntil: Timestamp.fromMillis(lockUntil),
      lockedAt: Timestamp.fromMillis(Date.now() - 1_000),
      lockedBy,
    })

    it("a lock a Java node holds is held for the provider and the inspector; an expired one is taken over, in Java's format", async () => {
      const name = `java-held-${randomUUID()}`
      await raw(name).set(javaDocument(Date.now() + HOUR))
      expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
      const record = await firestoreLockInspector({ collection }).get(name)
      expect(record).toMatchObject({ name, held: true, lockedBy: 'java-host' })
      expect(record!.lockUntil!.getTime()).toBeGreaterThan(Date.now() + HOUR - 60_000)
      const listed = (await firestoreLockInspector({ collection }).list({ prefix: name })).locks
      expect(listed.map((lock) => [lock.name, lock.held])).toEqual([[name, true]])

      // Java's unlock: lockUntil set to now (past); the next Node acquisition takes it over.
      await raw(name).update({ lockUntil: Timestamp.fromMillis(Date.now() - 1) })
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      const data = (await raw(name).get()).data()!
      expect(data.lockUntil).toBeInstanceOf(Timestamp)
      expect(data.lockedAt).toBeInstanceOf(Timestamp)
      expect(data.lockedBy).toBe(lock.lockedBy)
      expect(Object.keys(data).sort()).toEqual(['fencingToken', 'lockUntil', 'lockedAt', 'lockedBy'])
      await lock.unlock()
    })

    it('a Java document without lockUntil (or with another type) is never taken over, and reads as held', async () => {
      const name = `java-odd-${randomUUID()}`
      await raw(name).set({ lockedAt: Timestamp.now(), lockedBy: 'java-host', lockUntil: '2000-01-01T00:00:00Z' })
      expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
      const record = await firestoreLockInspector({ collection }).get(name)
      expect(record).toMatchObject({ held: true, lockUntil: undefined, remainingMs: undefined })
    })

    // What Java's updateExisting() and updateOwn() read: getTimestamp("lockUntil") against now.
    const javaWouldTakeOver = async (name: string): Promise<boolean> => {
      const snapshot = await raw(name).get()
      if (!snapshot.exists) return true
      const until = snapshot.get('lockUntil')
      assert.ok(until instanceof Timestamp, 'Java reads lockUntil with getTimestamp(): it must be a Timestamp')
      assert.ok(snapshot.get('lockedAt') instanceof Timestamp, 'lockedAt must be a Timestamp')
      assert.equal(typeof snapshot.get('lockedBy'), 'string')
      return until.toMillis() < Date.now()
    }

    it('a lock this provider holds is held for Java, and free for Java once released', async () => {
      const name = `node-held-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      // Java's document id is the name itself.
      expect((await collection.doc(name).get()).exists).toBe(true)
      expect(await javaWouldTakeOver(name)).toBe(false)
      await lock.unlock()
      await new Promise((resolve) => setTimeout(resolve, 5))
      expect(await javaWouldTakeOver(name)).toBe(true)
    })

    it('a Java takeover (update of the three fields) keeps the counter, and the next token is above the last', async () => {
      const name = `java-counter-${randomUUID()}`
      const first = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(first?.fencingToken)
      await first.unlock()
      // Java's updateExisting(): transaction.update(docRef, { lockUntil, lockedAt, lockedBy }).
      await raw(name).update(javaDocument(Date.now() + 50))
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect((await raw(name).get()).get('fencingToken')).toBe(Number(first.fencingToken))
      const second = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(second?.fencingToken)
      expect(second.fencingToken).toBeGreaterThan(first.fencingToken)
      await second.unlock()
    })

    it("Java's unlock, which checks only the host name, never releases this provider's lock", async () => {
      const name = `java-unlock-${randomUUID()}`
      const lock = await provider({ lockedBy: 'java-host' }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      // Java's updateOwn(): hostname.equals(lockedBy); ours is <host>:<pid>:<random>.
      expect((await raw(name).get()).get('lockedBy')).not.toBe('java-host')
      expect(String((await raw(name).get()).get('lockedBy'))).toMatch(/^java-host:\d+:/)
      await lock.unlock()
    })
  })

  describe('names', () => {
    it('ids are the names themselves where Firestore allows; others are escaped, and an escaped id is no raw name', () => {
      expect(firestoreDocumentId('nightly report')).toBe('nightly report')
      expect(firestoreDocumentId('100%')).toBe('100%')
      expect(firestoreDocumentId('reports/daily')).toBe('reports%2Fdaily')
      expect(firestoreDocumentId('100%/day')).toBe('100%25%2Fday')
      expect(firestoreDocumentId('..')).toBe('%2E%2E')
      expect(firestoreDocumentId('__x__')).toBe('%5F_x__')
      for (const name of ['reports/daily', '100%/day', '..', '.', '__x__', 'a\ud800b'])
        expect(firestoreLockName(firestoreDocumentId(name))).toBe(name)
      expect(firestoreLockName('100%25')).toBe('100%25')
      expect(() => firestoreDocumentId('reports%2Fdaily')).toThrow(LockConfigurationError)
      expect(() => firestoreDocumentId('%5F_x__')).toThrow(/reports%2Fdaily|__x__/)
    })

    it('locks names Firestore cannot hold as ids: /, dots, reserved __…__', async () => {
      for (const name of [`a/${randomUUID()}/b`, '.', '..', `__${randomUUID()}__`]) {
        const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
        assert.ok(lock, name)
        expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
        expect((await firestoreLockInspector({ collection }).get(name))?.held).toBe(true)
        await lock.unlock()
        await raw(name).delete()
      }
    })
  })

  describe('options and errors', () => {
    it('refuses a client, an empty lockedBy and a bad timeout', () => {
      expect(() => firestoreLockProvider({ collection: firestore as never })).toThrow(/CollectionReference/)
      expect(() => firestoreLockProvider({ collection, lockedBy: ' ' })).toThrow(LockConfigurationError)
      expect(() => firestoreLockProvider({ collection, timeout: 0 })).toThrow(/timeout/)
    })
  })
})
