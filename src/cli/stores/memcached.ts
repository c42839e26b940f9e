import { type MemcachedClient, memcachedLockKey, memcachedLockProvider } from '../../providers/memcached.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { parseAddedValue } from '../added-value.ts'
import { CliError, messageOf, UsageError } from '../command.ts'
import { importDriver } from '../import-driver.ts'
import type { LockRecord, Store, StoreOptions } from '../store.ts'
import { ownParameters, type StoreUrl } from '../store-url.ts'

interface Memjs extends MemcachedClient {
  stats(callback: (error: Error | null, server: string, stats: Record<string, string> | null) => void): void
  close(): void
}
interface MemjsModule {
  default: { Client: { create(servers: string, options: { timeout: number; retries: number; logger: { log(): void } }): Memjs } }
}

const TIMEOUT_MS = 10_000

/**
 * Opens a `memcached://HOST:PORT[?environment=E]` URL with memjs (user and password in the URL
 * authenticate with SASL). Locks are the keys `shedlock:<environment>:<name>`, as the provider
 * writes them. memcached cannot enumerate keys, so `list` refuses; a named lock can be read.
 */
export async function openMemcachedStore(url: StoreUrl, _options: StoreOptions): Promise<Store> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use memcached://HOST:PORT`)
  if (parsed.pathname !== '' && parsed.pathname !== '/') throw new UsageError(`memcached URLs take no path, got ${url.redacted}`)
  const environment = ownParameters(url, ['environment']).get('environment') ?? 'default'
  // Validates the environment before connecting.
  memcachedLockKey('probe', environment)
  const memjs = await importDriver<MemjsModule>('memjs', 'memjs', 'memcached://')
  const credentials = parsed.username === '' ? '' : `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}@`
  // memjs logs every failed request to the console; failures are reported here, once.
  const client = memjs.default.Client.create(`${credentials}${parsed.hostname}:${parsed.port || '11211'}`, { timeout: TIMEOUT_MS / 1000, retries: 1, logger: { log() {} } })
  const stats = (): Promise<Record<string, string>> =>
    withTimeout(
      new Promise((resolve, reject) => client.stats((error, _server, values) => (error ? reject(error) : values ? resolve(values) : reject(new Error('memcached sent no stats'))))),
      TIMEOUT_MS,
      { store: 'memcached' },
    )
  let version: string
  try {
    version = (await stats()).version ?? '?'
  } catch (error) {
    client.close()
    throw new CliError(`cannot reach memcached at ${url.redacted}: ${messageOf(error)}; check the URL and that the server runs`, { cause: error })
  }
  const provider = memcachedLockProvider({ client, environment })
  const keyOf = (name: string): string => memcachedLockKey(name, environment)
  const valueOf = async (name: string): Promise<string | undefined> => {
    const { value } = await withTimeout(client.get(keyOf(name)), TIMEOUT_MS, { store: 'memcached' })
    if (value === null || value === undefined) return undefined
    return Buffer.isBuffer(value) ? value.toString('utf8') : String(value)
  }
  const clock = "this host's clock (memcached does not reveal expiries)"

  return {
    kind: 'memcached',
    where: `${url.redacted} (keys shedlock:${environment}:*)`,
    extensible: false,
    provider: () => provider,
    async list() {
      throw new CliError(
        `memcached cannot enumerate its keys, so its locks cannot be listed; "shedlock unlock --url ${url.redacted} --name NAME" shows who holds one lock (and asks before releasing it)`,
      )
    },
    async find(name) {
      const now = Date.now()
      const value = await valueOf(name)
      if (value === undefined) return { now, clock, value: undefined }
      const added = parseAddedValue(value)
      const record: LockRecord = { name, lockUntil: undefined, lockedAt: added.lockedAt, lockedBy: added.lockedBy, token: value }
      return { now, clock, value: record }
    },
    async release(record) {
      // memjs has no compare-and-swap: compare, then delete. A lock that expires and is taken
      // again between the two (a few milliseconds) would be deleted too.
      if ((await valueOf(record.name)) !== record.token) return false
      return withTimeout(client.delete(keyOf(record.name)), TIMEOUT_MS, { store: 'memcached' })
    },
    init: async () => [`memcached needs no setup: each lock is a key shedlock:${environment}:<name>, created when the lock is taken`],
    ping: async () => `memcached ${version}`,
    structure: async () => [],
    async remove(name) {
      await withTimeout(client.delete(keyOf(name)), TIMEOUT_MS, { store: 'memcached' })
    },
    // memcached's "time" stat advances once a second from a start time it sets about two seconds
    // early, so it lags by up to three seconds by design: no measure of this host's clock.
    readClock: async () =>
      'not measured: memcached counts lock expiries in seconds from now on its own coarse clock, so host clocks only stamp the informational ADDED time',
    clockDependence: '',
    close: async () => client.close(),
  }
}
