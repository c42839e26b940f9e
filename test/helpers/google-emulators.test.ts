import { afterAll, describe, expect, it } from 'vitest'
import { datastoreOrSkip, firestoreOrSkip, SPANNER_TEST_INSTANCE, spannerOrSkip } from './google-emulators.ts'

// The helpers every Google store's tests start from: each emulator answers a real request.
const [firestore, datastore, spanner] = await Promise.all([firestoreOrSkip(), datastoreOrSkip(), spannerOrSkip()])
afterAll(async () => {
  await firestore?.terminate()
  spanner?.close()
})

describe('Google emulators', () => {
  it.skipIf(!firestore)('Firestore keeps a document', async () => {
    const doc = firestore!.collection('emulator-check').doc(`d${process.pid}`)
    await doc.set({ n: 1 })
    expect((await doc.get()).data()).toEqual({ n: 1 })
    await doc.delete()
  })
  it.skipIf(!datastore)('Datastore keeps an entity', async () => {
    const key = datastore!.key(['EmulatorCheck', `e${process.pid}`])
    await datastore!.save({ key, data: { n: 1 } })
    const [entity] = await datastore!.get(key)
    expect(entity.n).toBe(1)
    await datastore!.delete(key)
  })
  it.skipIf(!spanner)('Spanner has the test instance', async () => {
    const [exists] = await spanner!.instance(SPANNER_TEST_INSTANCE).exists()
    expect(exists).toBe(true)
  })
})
