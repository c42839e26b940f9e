import { type EtcdClient, etcdLockProvider } from '../../providers/etcd.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { parseAddedValue } from '../added-value.ts'
import { CliError, messageOf, UsageError } from '../command.ts'
import { importDriver } from '../import-driver.ts'
import type { LockRecord, Store, StoreOptions } from '../store.ts'
import { ownParameters, type StoreUrl } from '../store-url.ts'

interface KeyValue {
  key: Buffer
  value: Buffer
  /** "0" when the key has no lease. */
  lease: string
}
interface Etcd3Like extends EtcdClient {
  getAll(): { prefix(prefix: string): { exec(): Promise<{ kvs: KeyValue[] }> } }
  get(key: string): { exec(): Promise<{ kvs: KeyValue[] }> }
  leaseClient: { leaseTimeToLive(request: { ID: string }): Promise<{ TTL: string }> }
  maintenance: { status(): Promise<{ version: string }> }
  close(): void
}
interface Etcd3Module {
  Etcd3: new (options: { hosts: string; auth?: { username: string; password: string }; dialTimeout?: number }) => Etcd3Like
}

const TIMEOUT_MS = 10_000

/**
 * Opens an `etcd://HOST:PORT[?environment=E]` URL with etcd3, plain HTTP (user and password in
 * the URL authenticate). Locks are the keys `shedlock:<environment>:<name>` (default environment
 * `default`), as the provider writes them.
 */
export async function openEtcdStore(url: StoreUrl, _options: StoreOptions): Promise<Store> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use etcd://HOST:PORT`)
  if (parsed.pathname !== '' && parsed.pathname !== '/') throw new UsageError(`etcd URLs take no path, got ${url.redacted}`)
  const environment = ownParameters(url, ['environment']).get('environment') ?? 'default'
  const { Etcd3 } = await importDriver<Etcd3Module>('etcd3', 'etcd3', 'etcd://')
  const auth = parsed.username === '' ? undefined : { username: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) }
  const client = new Etcd3({ hosts: `http://${parsed.host}`, dialTimeout: TIMEOUT_MS, ...(auth ? { auth } : {}) })
  const timed = <T>(promise: Promise<T>): Promise<T> => withTimeout(promise, TIMEOUT_MS, { store: 'etcd' })
  let version: string
  try {
    version = (await timed(client.maintenance.status())).version
  } catch (error) {
    client.close()
    throw new CliError(`cannot reach etcd at ${url.redacted}: ${messageOf(error)}; check the URL and that the server runs`, { cause: error })
  }
  let provider
  try {
    provider = etcdLockProvider({ client, environment })
  } catch (error) {
    client.close()
    throw error
  }
  const prefix = `shedlock:${environment}:`
  const clock = "this host's clock, plus each key's remaining lease time (whole seconds, counted by etcd)"

  const toRecord = async (kv: KeyValue, now: number): Promise<LockRecord> => {
    const value = kv.value.toString('utf8')
    const added = parseAddedValue(value)
    let lockUntil: number | undefined
    if (kv.lease !== '0') {
      // etcd counts the TTL down on its own clock; -1 means the lease just expired.
      const ttl = Number((await timed(client.leaseClient.leaseTimeToLive({ ID: kv.lease }))).TTL)
      lockUntil = now + Math.max(0, ttl) * 1000
    }
    return { name: kv.key.toString('utf8').slice(prefix.length), lockedAt: added.lockedAt, lockedBy: added.lockedBy, lockUntil, token: value }
  }

  return {
    kind: 'etcd',
    where: `${url.redacted} (keys ${prefix}*)`,
    extensible: true,
    provider: () => provider,
    async list() {
      const now = Date.now()
      const { kvs } = await timed(client.getAll().prefix(prefix).exec())
      const records = await Promise.all(kvs.map((kv) => toRecord(kv, now)))
      return { now, clock, value: records.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) }
    },
    async find(name) {
      const now = Date.now()
      const kv = (await timed(client.get(prefix + name).exec())).kvs[0]
      return { now, clock, value: kv && (await toRecord(kv, now)) }
    },
    async release(record) {
      // Only the value that was shown: the provider's own compare-and-delete.
      const key = prefix + record.name
      return (await timed(client.if(key, 'Value', '==', String(record.token)).then(client.delete().key(key)).commit())).succeeded
    },
    init: async () => [`etcd needs no setup: each lock is a key ${prefix}<name>, created when the lock is taken`],
    ping: async () => `etcd ${version}`,
    structure: async () => [],
    async remove(name) {
      // etcd3's DeleteBuilder, which the provider's structural type leaves out: exec() runs it alone.
      const deleter = client.delete() as unknown as { key(key: string): { exec(): Promise<unknown> } }
      await timed(deleter.key(prefix + name).exec())
    },
    readClock: async () => 'etcd has no clock to read; it expires lock leases on its own clock, so host clocks only stamp the informational ADDED time',
    clockDependence: '',
    close: async () => client.close(),
  }
}
