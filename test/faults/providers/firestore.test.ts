import { randomBytes } from 'node:crypto'
import { Timestamp } from '@google-cloud/firestore'
import { firestoreDocumentId, firestoreLockProvider } from 'shedlock/firestore'
import { afterAll, describe } from 'vitest'
import { firestoreOrSkip, GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { badLockNames } from '../support/bad-input.ts'
import { clockSkew, taskOutlivesLock } from '../support/fault-groups.ts'
import type { StoreUnderTest } from '../support/stores.ts'

// Firestore is Google's emulator, shared with the provider tests (scripts/services.sh starts it):
// it runs in memory and cannot be restarted or cut off without losing every store's state, so
// only the groups that run inside one process apply (clock skew, a task outliving its lock, bad
// input). Kills, restarts and network cuts would test the emulator, not Firestore.
const db = await firestoreOrSkip()

describe.skipIf(!db)('firestore (emulator)', () => {
  const firestore = db!
  const name = `shedlock_faults_${randomBytes(4).toString('hex')}`
  const collection = firestore.collection(name)
  const read = async (lock: string) => (await collection.doc(firestoreDocumentId(lock)).get()).data()
  afterAll(async () => {
    const { docs } = await collection.get()
    await Promise.all(docs.map((doc) => doc.ref.delete()))
    await firestore.terminate()
  })
  const sut: StoreUnderTest = {
    label: 'firestore (emulator)',
    // The fault groups used here read only the store's facts, not its name.
    store: 'mongodb',
    facts: { extensible: true, expiry: 'app', earlyMs: 0, lateMs: 0, minLockMs: 0, keepsLocksAcrossRestart: undefined },
    server: undefined,
    spec: () => {
      throw new Error('firestore has no worker spec')
    },
    node: async (options = {}) =>
      firestoreLockProvider(options.clock ? { collection, clock: options.clock } : { collection }),
    isHeld: async (lock) => {
      const until = (await read(lock))?.lockUntil
      return until instanceof Timestamp && until.toMillis() > Date.now()
    },
    record: async (lock) => {
      const found = await read(lock)
      return found ? JSON.stringify(found) : undefined
    },
    remainingMs: async (lock) => {
      const until = (await read(lock))?.lockUntil
      return until instanceof Timestamp ? Math.max(0, until.toMillis() - Date.now()) : undefined
    },
    keys: async () => (await collection.get()).docs.map((doc) => doc.id),
    keyOf: firestoreDocumentId,
    cliArgs: () => ['--url', `firestore://${GOOGLE_TEST_PROJECT}`, '--table', name],
    close: async () => {},
  }
  clockSkew(() => sut)
  taskOutlivesLock(() => sut)
  badLockNames(() => sut)
})
