import { Timestamp } from '@google-cloud/firestore'
import { afterAll, describe, expect, it } from 'vitest'
import { firestoreDocumentId, firestoreLockProvider } from '../../../src/providers/firestore/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { firestoreOrSkip, GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { cli, type ListJson } from '../../cli/support/cli.ts'
import { cliBasics } from '../../cli/support/proof.ts'

// The helper set FIRESTORE_EMULATOR_HOST in this process; the CLI processes inherit it.
const db = await firestoreOrSkip()
const url = `firestore://${GOOGLE_TEST_PROJECT}`

describe.skipIf(!db)('shedlock CLI on Firestore (the built bin, against the emulator)', () => {
  const firestore = db!
  const table = uniqueTable('shedlock')
  const collection = firestore.collection(table)
  afterAll(async () => {
    for (const name of [table, `${table}_init`]) {
      const { docs } = await firestore.collection(name).get()
      await Promise.all(docs.map((doc) => doc.ref.delete()))
    }
    await firestore.terminate()
  })

  cliBasics({
    kind: 'Firestore',
    args: ['--url', url, '--table', table],
    provider: () => firestoreLockProvider({ collection }),
    isHeld: async (name) => {
      const until = (await collection.doc(firestoreDocumentId(name)).get()).get('lockUntil')
      return until instanceof Timestamp && until.toMillis() > Date.now()
    },
    init: {
      args: ['--url', url, '--table', `${table}_init`],
      first: /Firestore needs nothing created/,
      again: /Firestore needs nothing created/,
    },
  })

  it("shedlock list --url firestore://PROJECT reads the default collection, shedlock (Java's)", async () => {
    const name = `cli-default-${process.pid}-${Date.now()}`
    const lock = await firestoreLockProvider({ collection: firestore.collection('shedlock') }).lock(
      (await import('../../../src/index.ts')).lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    try {
      const run = await cli(['list', '--url', url, '--json'])
      expect(run.code, run.stderr).toBe(0)
      const listed = JSON.parse(run.stdout) as ListJson
      expect(listed.locks.find((l) => l.name === name)).toMatchObject({ state: 'held', lockedBy: lock!.lockedBy })
    } finally {
      await lock?.unlock()
      await firestore.collection('shedlock').doc(name).delete()
    }
  })

  it('with FIRESTORE_EMULATOR_HOST alone (no METADATA_SERVER_DETECTION), list prints no metadata-server warning', async () => {
    const run = await cli(['list', '--url', url], { env: { METADATA_SERVER_DETECTION: undefined } })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toBe('')
  })

  it('a URL with a path of more than a database, or with credentials, is a usage error (exit 2)', async () => {
    expect((await cli(['list', '--url', `${url}/db/extra`])).code).toBe(2)
    expect((await cli(['list', '--url', `firestore://user:secret@${GOOGLE_TEST_PROJECT}`])).code).toBe(2)
  })
})
