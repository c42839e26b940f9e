import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import type { Check, StoreAdmin, StoreOptions } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import {
  checkSpace,
  type DatastoreClient,
  type DatastoreKey,
  DEFAULT_KIND,
  datastoreSchema,
  kindLabel,
  lockKey,
} from './format.ts'
import { datastoreLockInspector } from './inspector.ts'
import { datastoreLockProvider } from './provider.ts'
import { DEFAULT_RUN_KIND, type DatastoreRunsClient, datastoreRunLedger } from './run-ledger.ts'

interface AdminClient extends DatastoreClient {
  delete(key: DatastoreKey | DatastoreKey[]): Promise<unknown>
  /** The client's gRPC clients, created on first use; closing them ends the connections. */
  readonly clients_?: Map<string, { close(): Promise<void> }>
}
interface DatastoreModule {
  Datastore: new (options: { projectId: string; namespace?: string; databaseId?: string }) => AdminClient
}

const DRIVER = '@google-cloud/datastore'
const TIMEOUT_MS = 10_000

/** `shedlock schema datastore`: the entity format; Datastore needs nothing created. */
export function schema(table: string | undefined): string {
  return datastoreSchema(table ?? DEFAULT_KIND)
}

/**
 * Opens a `datastore://PROJECT[/NAMESPACE][?database=D]` URL with `@google-cloud/datastore`: the
 * project's default database (or the named one), the namespace of the path (the default namespace
 * without one), the kind of `--table` (default `lock`, Java ShedLock's), the run history's kind
 * of `--runs-table` (default `shedlock_run`). The client reaches the emulator when `DATASTORE_EMULATOR_HOST` is set, else Google Cloud with Application Default
 * Credentials; the URL holds none.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.username !== '' || parsed.password !== '' || parsed.port !== '') {
    throw new UsageError(
      `datastore URLs are datastore://PROJECT[/NAMESPACE] (no credentials, no port: the client reads GOOGLE_APPLICATION_CREDENTIALS, and DATASTORE_EMULATOR_HOST for the emulator), got ${url.redacted}`,
    )
  }
  const projectId = parsed.hostname
  if (projectId === '') throw new UsageError(`${url.redacted} names no project; use datastore://PROJECT[/NAMESPACE]`)
  const path = decodeURIComponent(parsed.pathname.replace(/^\//, ''))
  if (path.includes('/'))
    throw new UsageError(`datastore URLs take one namespace after the project, got ${url.redacted}`)
  const database = ownParameters(url, ['database']).get('database')
  const namespace = path === '' ? undefined : path
  const kind = options.table ?? DEFAULT_KIND
  const runKind = options.runsTable ?? DEFAULT_RUN_KIND
  const { Datastore } = await importDriver<DatastoreModule>(DRIVER, DRIVER, 'datastore://')
  const datastore = new Datastore({
    projectId,
    ...(namespace === undefined ? {} : { namespace }),
    ...(database === undefined ? {} : { databaseId: database }),
  })
  const close = async (): Promise<void> => {
    for (const client of datastore.clients_?.values() ?? []) await client.close().catch(() => undefined)
  }
  // The provider's own checks of the kind and namespace, before connecting.
  let space: ReturnType<typeof checkSpace>
  try {
    space = checkSpace({ datastore, kind, namespace })
  } catch (error) {
    await close()
    throw new UsageError(firstLine(error).replace(/^datastore: /, ''))
  }
  // A lookup of a key no lock has: a round trip that reads nothing.
  const probe = () =>
    withTimeout(datastore.get(lockKey(space, '__shedlock_probe'), { wrapNumbers: true }), TIMEOUT_MS, {
      store: 'Datastore',
    })
  try {
    await probe()
  } catch (error) {
    await close()
    throw new CliError(
      `cannot reach Datastore project ${projectId}${process.env.DATASTORE_EMULATOR_HOST ? ` (emulator at ${process.env.DATASTORE_EMULATOR_HOST})` : ''}: ${firstLine(error)}; check the project, the credentials (or DATASTORE_EMULATOR_HOST) and the network`,
      { cause: error },
    )
  }
  const where = `${url.redacted} (${kindLabel(space)})`

  return {
    kind: 'Datastore',
    where,
    extensible: true,
    provider: (options) =>
      datastoreLockProvider({
        datastore,
        kind,
        ...(namespace === undefined ? {} : { namespace }),
        lockedBy: options?.lockedBy,
      }),
    inspector: datastoreLockInspector({ datastore, kind, ...(namespace === undefined ? {} : { namespace }) }),
    // The client is a whole @google-cloud/datastore Datastore: its queries have hasAncestor().
    runLedger: datastoreRunLedger({
      datastore: datastore as unknown as DatastoreRunsClient,
      kind: runKind,
      ...(namespace === undefined ? {} : { namespace }),
    }),
    // Entities are created by the first run; no index is needed.
    runLedgerReady: async () => true,
    init: async () => [
      `nothing to create: Datastore creates kind ${kind} with its first lock, and the run history's kinds ${runKind}_task and ${runKind} with the first run (no index needed)`,
    ],
    ping: async () => {
      await probe()
      return `Datastore${process.env.DATASTORE_EMULATOR_HOST ? ` emulator at ${process.env.DATASTORE_EMULATOR_HOST}` : ''}`
    },
    structure: async (): Promise<Check[]> => [
      {
        status: 'ok',
        label: `kind ${kind}`,
        detail: 'needs nothing created (Datastore creates a kind with its first entity)',
      },
    ],
    async remove(name) {
      await datastore.delete(lockKey(space, name))
    },
    readClock: async () =>
      'Datastore has no server clock a client can read cheaply; the provider decides expiry on each host’s clock, as Java ShedLock does',
    clockDependence:
      'the Datastore provider decides expiry on the app clock, so every host running locks needs this in sync',
    close,
  }
}
