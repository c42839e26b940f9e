import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import type { StoreAdmin, StoreOptions } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { DEFAULT_ENVIRONMENT, etcdKeySpace, etcdLockKey } from './format.ts'
import { type EtcdInspectorClient, etcdLockInspector } from './inspector.ts'
import { type EtcdClient, etcdLockProvider } from './provider.ts'

type Etcd3Like = EtcdClient &
  EtcdInspectorClient & {
    maintenance: { status(): Promise<{ version: string }> }
    close(): void
  }
interface Etcd3Module {
  Etcd3: new (options: {
    hosts: string
    auth?: { username: string; password: string }
    dialTimeout?: number
  }) => Etcd3Like
}

const TIMEOUT_MS = 10_000

/** `shedlock schema etcd`: the key format; etcd needs nothing created. */
export function schema(table: string | undefined): string {
  if (table !== undefined) throw new UsageError('--table does not apply to etcd: locks are keys')
  return `# etcd needs no schema: each lock is a key shedlock:<environment>:<name> holding ADDED:<ISO time>@<owner>, attached to a lease.`
}

/**
 * Opens an `etcd://HOST:PORT[?environment=E]` URL with etcd3, plain HTTP (user and password in
 * the URL authenticate). Locks are the keys `shedlock:<environment>:<name>` (default environment
 * `default`), as the provider writes them.
 */
export async function open(url: StoreUrl, _options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use etcd://HOST:PORT`)
  if (parsed.pathname !== '' && parsed.pathname !== '/')
    throw new UsageError(`etcd URLs take no path, got ${url.redacted}`)
  // The provider's own check of the environment, before connecting.
  const space = etcdKeySpace(ownParameters(url, ['environment']).get('environment') ?? DEFAULT_ENVIRONMENT)
  const { Etcd3 } = await importDriver<Etcd3Module>('etcd3', 'etcd3', 'etcd://')
  const auth =
    parsed.username === ''
      ? undefined
      : { username: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) }
  const client = new Etcd3({ hosts: `http://${parsed.host}`, dialTimeout: TIMEOUT_MS, ...(auth ? { auth } : {}) })
  const timed = <T>(promise: Promise<T>): Promise<T> => withTimeout(promise, TIMEOUT_MS, { store: 'etcd' })
  let version: string
  try {
    version = (await timed(client.maintenance.status())).version
  } catch (error) {
    client.close()
    throw new CliError(
      `cannot reach etcd at ${url.redacted}: ${firstLine(error)}; check the URL and that the server runs`,
      { cause: error },
    )
  }
  const provider = etcdLockProvider({ client, environment: space.environment })
  const inspector = etcdLockInspector({ client, environment: space.environment, timeout: TIMEOUT_MS })

  return {
    kind: 'etcd',
    where: `${url.redacted} (keys ${space.prefix}*)`,
    extensible: true,
    provider: (options) =>
      options?.lockedBy === undefined
        ? provider
        : etcdLockProvider({ client, environment: space.environment, lockedBy: options.lockedBy }),
    inspector,
    init: async () => [`etcd needs no setup: each lock is a key ${space.prefix}<name>, created when the lock is taken`],
    ping: async () => `etcd ${version}`,
    structure: async () => [],
    async remove(name) {
      // etcd3's DeleteBuilder, which the provider's structural type leaves out: exec() runs it alone.
      const deleter = client.delete() as unknown as { key(key: string): { exec(): Promise<unknown> } }
      await timed(deleter.key(etcdLockKey(space, name)).exec())
    },
    readClock: async () =>
      'etcd has no clock to read; it expires lock leases on its own clock, so host clocks only stamp the informational ADDED time',
    clockDependence: '',
    close: async () => client.close(),
  }
}
