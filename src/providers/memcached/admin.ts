import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { cannotHoldPause, type StoreAdmin, type StoreOptions } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { DEFAULT_ENVIRONMENT, memcachedKeyPrefix, memcachedLockKey } from './format.ts'
import { memcachedLockInspector } from './inspector.ts'
import { type MemcachedClient, memcachedLockProvider } from './provider.ts'

interface Memjs extends MemcachedClient {
  stats(callback: (error: Error | null, server: string, stats: Record<string, string> | null) => void): void
  close(): void
}
interface MemjsModule {
  default: {
    Client: { create(servers: string, options: { timeout: number; retries: number; logger: { log(): void } }): Memjs }
  }
}

const TIMEOUT_MS = 10_000

/** `shedlock schema memcached`: the key format; memcached needs nothing created. */
export function schema(table: string | undefined): string {
  if (table !== undefined) throw new UsageError('--table does not apply to memcached: locks are keys')
  return `# memcached needs no schema: each lock is a key shedlock:<environment>:<name> holding ADDED:<ISO time>@<owner>, with an expiry.`
}

/**
 * Opens a `memcached://HOST:PORT[?environment=E]` URL with memjs (user and password in the URL
 * authenticate with SASL). Locks are the keys `shedlock:<environment>:<name>`, as the provider
 * writes them. memcached cannot enumerate keys, so `list` refuses; a named lock can be read.
 */
export async function open(url: StoreUrl, _options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use memcached://HOST:PORT`)
  if (parsed.pathname !== '' && parsed.pathname !== '/')
    throw new UsageError(`memcached URLs take no path, got ${url.redacted}`)
  const environment = ownParameters(url, ['environment']).get('environment') ?? DEFAULT_ENVIRONMENT
  // The provider's own check of the environment, before connecting.
  const prefix = memcachedKeyPrefix(environment)
  const memjs = await importDriver<MemjsModule>('memjs', 'memjs', 'memcached://')
  const credentials =
    parsed.username === '' ? '' : `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}@`
  // memjs logs every failed request to the console; failures are reported here, once.
  const client = memjs.default.Client.create(`${credentials}${parsed.hostname}:${parsed.port || '11211'}`, {
    timeout: TIMEOUT_MS / 1000,
    retries: 1,
    logger: { log() {} },
  })
  const stats = (): Promise<Record<string, string>> =>
    withTimeout(
      new Promise((resolve, reject) =>
        client.stats((error, _server, values) =>
          error ? reject(error) : values ? resolve(values) : reject(new Error('memcached sent no stats')),
        ),
      ),
      TIMEOUT_MS,
      { store: 'memcached' },
    )
  let version: string
  try {
    version = (await stats()).version ?? '?'
  } catch (error) {
    client.close()
    throw new CliError(
      `cannot reach memcached at ${url.redacted}: ${firstLine(error)}; check the URL and that the server runs`,
      { cause: error },
    )
  }
  const provider = memcachedLockProvider({ client, environment })
  const inspector = memcachedLockInspector({ client, environment, timeout: TIMEOUT_MS })

  return {
    kind: 'memcached',
    where: `${url.redacted} (keys ${prefix}*)`,
    extensible: false,
    provider: (options) => {
      if (options?.lockedBy !== undefined)
        throw cannotHoldPause(
          'memcached',
          "its provider takes no holder name, so no node could tell a paused lock from a run's (and memcached may evict a key, ending a pause unseen)",
        )
      return provider
    },
    inspector: {
      ...inspector,
      // The inspector's refusal, with the command that does what can be done.
      list: async () => {
        throw new CliError(
          `memcached cannot enumerate its keys, so its locks cannot be listed; "shedlock unlock --url ${url.redacted} --name NAME" shows who holds one lock (and asks before releasing it)`,
        )
      },
    },
    init: async () => [`memcached needs no setup: each lock is a key ${prefix}<name>, created when the lock is taken`],
    ping: async () => `memcached ${version}`,
    structure: async () => [],
    async remove(name) {
      await withTimeout(client.delete(memcachedLockKey(name, environment)), TIMEOUT_MS, { store: 'memcached' })
    },
    // memcached's "time" stat advances once a second from a start time it sets about two seconds
    // early, so it lags by up to three seconds by design: no measure of this host's clock.
    readClock: async () =>
      'not measured: memcached counts lock expiries in seconds from now on its own coarse clock, so host clocks only stamp the informational ADDED time',
    clockDependence: '',
    close: async () => client.close(),
  }
}
