import { randomUUID } from 'node:crypto'
import { Firestore, Timestamp } from '@google-cloud/firestore'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError } from '../../../src/index.ts'
import {
  firestoreDocumentId,
  firestoreLockProvider,
  firestoreRunLedger,
} from '../../../src/providers/firestore/index.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { documentLedgerCases } from '../../helpers/document-ledgers.ts'
import { firestoreOrSkip, GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'

const db = await firestoreOrSkip()

describe.skipIf(!db)('firestore run ledger (emulator)', () => {
  const firestore = db!
  const collection = firestore.collection(uniqueTable('shedlock_runs'))
  // The retention cases' own: the contract's ledgers (maxAge 30 days) would sweep their old runs.
  const retained = firestore.collection(uniqueTable('shedlock_runs_retention'))
  const runsOf = (name: string, of = collection) => of.doc(firestoreDocumentId(name)).collection('runs')

  afterAll(async () => {
    await firestore.recursiveDelete(collection)
    await firestore.recursiveDelete(retained)
    await firestore.terminate()
  })

  describe('run ledger contract', () => {
    registerRunLedgerSuite(
      runLedgerSuite({
        ledger: firestoreRunLedger({ collection, keep: 5 }),
        keep: 5,
        provider: () => firestoreLockProvider({ collection: firestore.collection(uniqueTable('shedlock')) }),
        withMaxAge: (maxAge) => firestoreRunLedger({ collection, keep: 5, maxAge }),
      }),
    )
  })

  describe('retention', () => {
    documentLedgerCases(
      {
        ledger: (options) => firestoreRunLedger({ collection: retained, ...options }),
        parallelWrites: 30,
        countRuns: async (name) => (await runsOf(name, retained).get()).size,
        hasTask: async (name) => (await retained.doc(firestoreDocumentId(name)).get()).exists,
      },
      () => `task/${randomUUID()}`,
    )
  })

  it('stores a task as a document with its runs beneath it, in Firestore types, under the escaped id', async () => {
    const name = `reports/${randomUUID()}`
    const ledger = firestoreRunLedger({ collection })
    const startedAt = new Date(Date.now() - 5_000)
    const handle = await ledger.start({
      name,
      slot: new Date(Date.now() - 6_000),
      node: 'node-a',
      startedAt,
      fencingToken: 2n ** 63n - 1n,
      triggeredBy: 'ops',
    })
    await handle.finish({
      finishedAt: new Date(),
      outcome: 'failed',
      durationMs: 5_000.4,
      error: { type: 'Error', message: 'boom' },
    })
    const task = await collection.doc(firestoreDocumentId(name)).get()
    expect(task.id).toBe(name.replace('/', '%2F'))
    expect(task.get('name')).toBe(name)
    expect((task.get('lastStartedAt') as Timestamp).toMillis()).toBe(startedAt.getTime())
    const { docs } = await runsOf(name).get()
    expect(docs.map((doc) => doc.id)).toEqual([handle.id])
    const run = docs[0]!.data()
    expect(run.startedAt).toBeInstanceOf(Timestamp)
    expect(run).toMatchObject({
      name,
      node: 'node-a',
      outcome: 'failed',
      durationMs: 5000,
      errorType: 'Error',
      errorMessage: 'boom',
      fencingToken: '9223372036854775807',
      nextFireAt: null,
      triggeredBy: 'ops',
    })
    const [read] = await ledger.history(name)
    expect(read).toMatchObject({ id: handle.id, fencingToken: 2n ** 63n - 1n, triggeredBy: 'ops', outcome: 'failed' })
  })

  it('refuses what is not a collection, and names Firestore and the fix when it cannot be reached', async () => {
    expect(() => firestoreRunLedger({ collection: firestore as never })).toThrow(LockConfigurationError)
    expect(() => firestoreRunLedger({ collection: collection.doc('x') as never })).toThrow(
      /pass the runs collection as \{ collection \}/,
    )
    const emulator = process.env.FIRESTORE_EMULATOR_HOST
    delete process.env.FIRESTORE_EMULATOR_HOST
    const dead = new Firestore({ projectId: GOOGLE_TEST_PROJECT, host: '127.0.0.1:1', ssl: false })
    process.env.FIRESTORE_EMULATOR_HOST = emulator
    const ledger = firestoreRunLedger({ collection: dead.collection('shedlock_runs'), timeout: '1s' })
    const error = await ledger.history('job').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(LockProviderError)
    expect(String((error as Error).message)).toMatch(/firestore.*job.*Firestore did not answer/s)
  })
})
