// The Datastore emulator for the tests, through test/helpers/google-emulators.ts (which sets
// DATASTORE_EMULATOR_HOST and METADATA_SERVER_DETECTION, and skips naming the Debian package when
// none runs). Each test file works in a namespace of its own, so that files and runs never share
// entities.
import { Datastore } from '@google-cloud/datastore'
import { uniqueTable } from '../../helpers/backends.ts'
import { datastoreOrSkip, GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'

/** A client of the emulator in a namespace of its own, or `undefined` (skipped) when none runs. */
export async function emulatorOrSkip(): Promise<{ datastore: Datastore; namespace: string } | undefined> {
  const probe = await datastoreOrSkip()
  if (!probe) return undefined
  const namespace = uniqueTable('ns').replaceAll('_', '-')
  return { datastore: new Datastore({ projectId: GOOGLE_TEST_PROJECT, namespace }), namespace }
}

/** A client whose endpoint nothing listens on: every call fails as a dead store's would. */
export function unreachableDatastore(): Datastore {
  return new Datastore({ projectId: GOOGLE_TEST_PROJECT, apiEndpoint: '127.0.0.1:1' })
}
