import { existsSync } from 'node:fs'
import { Datastore } from '@google-cloud/datastore'
import { Firestore } from '@google-cloud/firestore'
import { Spanner } from '@google-cloud/spanner'
import { connectOrSkip } from './backends.ts'

// Google's emulators, as `scripts/services.sh spanner firestore datastore` starts them. The clients
// find them through the *_EMULATOR_HOST variables, which this module sets (unless already set) when
// it is imported, before any client is made: the clients read them in their constructors.

/** The project every emulator test uses (the emulators accept any). */
export const GOOGLE_TEST_PROJECT = process.env.GOOGLE_CLOUD_PROJECT ?? 'test-project'
/** The Spanner instance `scripts/services.sh spanner` creates, with its database {@link SPANNER_TEST_DATABASE}. */
export const SPANNER_TEST_INSTANCE = 'test-instance'
/** The Spanner database `scripts/services.sh spanner` creates in {@link SPANNER_TEST_INSTANCE}. */
export const SPANNER_TEST_DATABASE = 'test'

const env = process.env
env.SPANNER_EMULATOR_HOST ??= '127.0.0.1:9010'
env.FIRESTORE_EMULATOR_HOST ??= '127.0.0.1:8686'
env.DATASTORE_EMULATOR_HOST ??= '127.0.0.1:8687'
env.GOOGLE_CLOUD_PROJECT ??= GOOGLE_TEST_PROJECT
// Otherwise the clients probe for a GCE metadata server (for credentials and the project), slowly.
env.METADATA_SERVER_DETECTION ??= 'none'
// The emulator does not keep multiplexed sessions, which @google-cloud/spanner uses by default:
// without these, every read-write transaction fails ("Unable to release unknown resource").
env.GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS ??= 'false'
env.GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW ??= 'false'

/** Spanner emulator's gRPC address (`SPANNER_EMULATOR_HOST`, default 127.0.0.1:9010). */
export const SPANNER_EMULATOR_HOST = env.SPANNER_EMULATOR_HOST
/** Firestore emulator's address (`FIRESTORE_EMULATOR_HOST`, default 127.0.0.1:8686). */
export const FIRESTORE_EMULATOR_HOST = env.FIRESTORE_EMULATOR_HOST
/** Datastore emulator's address (`DATASTORE_EMULATOR_HOST`, default 127.0.0.1:8687). */
export const DATASTORE_EMULATOR_HOST = env.DATASTORE_EMULATOR_HOST

const SDK = env.SHEDLOCK_GOOGLE_SDK ?? '/usr/lib/google-cloud-sdk'
const emulators = {
  spanner: { binary: `${SDK}/bin/cloud_spanner_emulator/gateway_main`, service: 'spanner' },
  firestore: { binary: `${SDK}/platform/cloud-firestore-emulator/cloud_firestore_emulator`, service: 'firestore' },
  datastore: { binary: `${SDK}/platform/cloud-datastore-emulator/cloud_datastore_emulator`, service: 'datastore' },
} as const

/** Rejects after `ms` milliseconds: the clients retry an unreachable emulator for a minute or more. */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([work, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Runs `probe` against the named emulator through connectOrSkip. A failure names the Debian package
 * when the emulator's binary is absent, else the command that starts it.
 */
function emulatorOrSkip<T>(
  name: keyof typeof emulators,
  where: string,
  probe: () => Promise<T>,
): Promise<T | undefined> {
  const { binary, service } = emulators[name]
  return connectOrSkip(name, where, async () => {
    if (!existsSync(binary)) {
      throw new Error(`the ${name} emulator is not installed (Debian package google-cloud-cli-${name}-emulator)`)
    }
    try {
      return await within(20_000, `the ${name} emulator`, probe())
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error)
      throw new Error(`${why}; start it with: bash scripts/services.sh ${service}`, { cause: error })
    }
  })
}

/**
 * A Firestore client on the emulator that has answered a read; `undefined` (skipped) when the
 * emulator is unreachable and not required. The caller terminates it.
 */
export function firestoreOrSkip(): Promise<Firestore | undefined> {
  return emulatorOrSkip('firestore', `${FIRESTORE_EMULATOR_HOST} (FIRESTORE_EMULATOR_HOST)`, async () => {
    const db = new Firestore({ projectId: GOOGLE_TEST_PROJECT })
    try {
      await db.collection('shedlock-probe').doc('probe').get()
    } catch (error) {
      await db.terminate().catch(() => {})
      throw error
    }
    return db
  })
}

/**
 * A Datastore client on the emulator that has answered a lookup; `undefined` (skipped) when the
 * emulator is unreachable and not required.
 */
export function datastoreOrSkip(): Promise<Datastore | undefined> {
  return emulatorOrSkip('datastore', `${DATASTORE_EMULATOR_HOST} (DATASTORE_EMULATOR_HOST)`, async () => {
    const datastore = new Datastore({ projectId: GOOGLE_TEST_PROJECT })
    await datastore.get(datastore.key(['shedlock-probe', 'probe']))
    return datastore
  })
}

/**
 * A Spanner client on the emulator whose test instance ({@link SPANNER_TEST_INSTANCE}) exists
 * (created if the emulator was started without `scripts/services.sh`); `undefined` (skipped) when
 * the emulator is unreachable and not required. The caller closes it.
 */
export function spannerOrSkip(): Promise<Spanner | undefined> {
  return emulatorOrSkip('spanner', `${SPANNER_EMULATOR_HOST} (SPANNER_EMULATOR_HOST)`, async () => {
    const spanner = new Spanner({ projectId: GOOGLE_TEST_PROJECT })
    try {
      const instance = spanner.instance(SPANNER_TEST_INSTANCE)
      const [exists] = await instance.exists()
      if (!exists) {
        const [, operation] = await spanner.createInstance(SPANNER_TEST_INSTANCE, {
          config: 'emulator-config',
          nodes: 1,
        })
        await operation.promise()
      }
    } catch (error) {
      spanner.close()
      throw error
    }
    return spanner
  })
}
