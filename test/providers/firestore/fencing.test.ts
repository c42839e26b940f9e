// Firestore's fencing tokens (the document's counter, written under the read's precondition) from
// several processes over dist/, and the paused-holder scenario. Build dist/ first (`npm run
// build`; `npm test` does). The processes inherit FIRESTORE_EMULATOR_HOST from this one.
import { afterAll, describe, expect, it } from 'vitest'
import { firestoreLockProvider } from '../../../src/providers/firestore/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { fencingRace } from '../../helpers/fencing-race.ts'
import { firestoreOrSkip, GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { killStartedProcesses } from '../../helpers/processes.ts'

const db = await firestoreOrSkip()

describe.skipIf(!db)('firestore fencing tokens', () => {
  const firestore = db!
  const collectionName = uniqueTable('shedlock_fencing')
  const collection = firestore.collection(collectionName)
  const nodeProvider = `
import { Firestore } from '@google-cloud/firestore'
import { firestoreLockProvider } from 'shedlock/firestore'
const firestore = new Firestore({ projectId: ${JSON.stringify(GOOGLE_TEST_PROJECT)} })
export const provider = firestoreLockProvider({ collection: firestore.collection(${JSON.stringify(collectionName)}) })
export const close = () => firestore.terminate()
`
  afterAll(async () => {
    killStartedProcesses()
    const { docs } = await collection.get()
    await Promise.all(docs.map((doc) => doc.ref.delete()))
    await firestore.terminate()
  })

  it('1,000 acquisitions from 4 processes, with expiries and takeovers: tokens strictly increase', async () => {
    const outcome = await fencingRace({ nodeProvider, lockAtMostForMs: 500, abandonRate: 0.02, names: 6 })
    expect(outcome.acquisitions).toHaveLength(1000)
    expect(outcome.violations).toEqual([])
    expect(outcome.takeovers).toBeGreaterThan(0)
  }, 240_000)

  it('a paused holder cannot write with its token after the lock was taken over', async () => {
    const outcome = await pausedHolder({
      holderProvider: nodeProvider,
      taker: firestoreLockProvider({ collection }),
      lockAtMostForMs: 1_000,
    })
    expect(outcome.takerToken).toBeGreaterThan(outcome.holderToken)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
