import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import type { FirestoreLockCollection } from './client.ts'
import {
  DEFAULT_COLLECTION,
  DEFAULT_RUNS_COLLECTION,
  firestoreDocumentId,
  firestoreSchema,
  millisOf,
} from './format.ts'
import { firestoreLockInspector } from './inspector.ts'
import { firestoreLockProvider } from './provider.ts'
import { type FirestoreRunsCollection, firestoreRunLedger } from './run-ledger.ts'

interface FirestoreClient {
  // A whole @google-cloud/firestore client: its collections are both.
  collection(name: string): FirestoreLockCollection & FirestoreRunsCollection
  terminate(): Promise<void>
}
interface FirestoreModule {
  Firestore: new (settings: { projectId: string; databaseId?: string }) => FirestoreClient
}

const TIMEOUT_MS = 10_000

/** `shedlock schema firestore`: the document format; Firestore needs nothing created. */
export function schema(table: string | undefined): string {
  return firestoreSchema(table ?? DEFAULT_COLLECTION)
}

/**
 * Opens a `firestore://PROJECT[/DATABASE]` URL with `@google-cloud/firestore` (database
 * `(default)` without one). Credentials come from the client's usual sources (Application Default
 * Credentials), never from the URL; with `FIRESTORE_EMULATOR_HOST` set, the client talks to that
 * emulator instead. The collection is `--table`, default `shedlock` (Java ShedLock's); the run
 * history's is `--runs-table`, default `shedlock_runs`.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.username !== '' || parsed.password !== '')
    throw new UsageError('firestore URLs take no credentials: the client reads Application Default Credentials')
  ownParameters(url, [])
  const projectId = decodeURIComponent(parsed.hostname)
  if (projectId === '' || parsed.port !== '')
    throw new UsageError(`${url.redacted} names no Google Cloud project; use firestore://PROJECT[/DATABASE]`)
  const path = parsed.pathname.replace(/^\/|\/$/g, '')
  if (path.includes('/'))
    throw new UsageError(`firestore URLs name at most a database after the project, got ${url.redacted}`)
  const databaseId = path === '' ? undefined : decodeURIComponent(path)
  const collectionName = options.table ?? DEFAULT_COLLECTION
  const runsName = options.runsTable ?? DEFAULT_RUNS_COLLECTION

  const { Firestore } = await importDriver<FirestoreModule>(
    '@google-cloud/firestore',
    '@google-cloud/firestore',
    'firestore://',
  )
  const emulator = process.env.FIRESTORE_EMULATOR_HOST
  // The emulator needs no credentials; without this, the client still probes for a GCE metadata
  // server: seconds of delay, and a MetadataLookupWarning on stderr.
  if (emulator) process.env.METADATA_SERVER_DETECTION ??= 'none'
  const client = new Firestore({ projectId, ...(databaseId === undefined ? {} : { databaseId }) })
  const collection = client.collection(collectionName)
  const database = `project ${projectId}, database ${databaseId ?? '(default)'}${emulator ? `, emulator at ${emulator}` : ''}`
  // A read of a document that need not exist: its readTime is Firestore's clock.
  const serverNow = async (): Promise<number> => {
    const snapshot = await withTimeout(collection.doc('shedlock-clock').get(), TIMEOUT_MS, { store: 'Firestore' })
    const ms = millisOf(snapshot.readTime)
    if (ms === undefined) throw new Error('the read carried no readTime')
    return ms
  }
  try {
    await serverNow()
  } catch (error) {
    await client.terminate().catch(() => {})
    throw new CliError(
      `cannot reach Firestore (${database}): ${firstLine(error)}; check the project, the credentials${emulator ? ' and that the emulator runs' : ''}`,
      { cause: error },
    )
  }

  return {
    kind: 'Firestore',
    where: `${url.redacted} (${database}, collection ${collectionName})`,
    extensible: true,
    provider: (options) => firestoreLockProvider({ collection, lockedBy: options?.lockedBy }),
    inspector: firestoreLockInspector({ collection }),
    runLedger: firestoreRunLedger({ collection: client.collection(runsName) }),
    // Documents are created by the first run; no index is needed.
    runLedgerReady: async () => true,
    init: async () => [
      `Firestore needs nothing created: collection ${collectionName} appears with the first lock, ${runsName} (the run history) with the first run, and no index is needed`,
    ],
    ping: async () => {
      await serverNow()
      return `Firestore (${database})`
    },
    structure: async () => [],
    async remove(name) {
      await withTimeout(collection.doc(firestoreDocumentId(name)).delete(), TIMEOUT_MS, { store: 'Firestore' })
    },
    readClock: () => timed('readTime of a document read', 1, serverNow),
    clockDependence:
      'the Firestore provider decides expiry on the app clock (as Java ShedLock does), so every host running locks needs this in sync',
    close: () => client.terminate(),
  }
}
