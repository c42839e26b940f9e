import { randomBytes } from 'node:crypto'
import { type ZooKeeperClient, zookeeperLockProvider, zookeeperNodeName } from '../../providers/zookeeper.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { CliError, messageOf, UsageError } from '../command.ts'
import { importDriver } from '../import-driver.ts'
import type { Check, LockRecord, Store, StoreOptions } from '../store.ts'
import { timed as timedClock } from '../store.ts'
import { ownParameters, type StoreUrl } from '../store-url.ts'

interface Stat {
  readonly version: number
  /** 8 bytes, big-endian epoch milliseconds on the ZooKeeper leader's clock. */
  readonly ctime: Buffer
}
type Callback<T> = (error: unknown, value: T) => void
interface Client extends ZooKeeperClient {
  connect(): void
  close(): void
  once(event: 'connected', listener: () => void): unknown
  addAuthInfo(scheme: string, auth: Buffer): void
  getChildren(path: string, callback: Callback<string[]>): void
  exists(path: string, callback: Callback<Stat | null>): void
  remove(path: string, version: number, callback: (error: unknown) => void): void
}
interface ZooKeeperModule {
  default: { createClient(connectionString: string, options: { sessionTimeout: number; spinDelay: number; retries: number }): Client }
}

const TIMEOUT_MS = 10_000
const NO_NODE = -101
const BAD_VERSION = -103
const EPHEMERAL = 1

/**
 * Opens a `zookeeper://HOST:PORT[/CHROOT][?path=/shedlock]` URL with node-zookeeper-client (user
 * and password in the URL authenticate with the digest scheme). Locks are the children of `path`
 * (default `/shedlock`), as the provider writes them.
 */
export async function openZooKeeperStore(url: StoreUrl, _options: StoreOptions): Promise<Store> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use zookeeper://HOST:PORT`)
  const root = ownParameters(url, ['path']).get('path') ?? '/shedlock'
  const chroot = parsed.pathname === '/' ? '' : parsed.pathname
  const { default: zookeeper } = await importDriver<ZooKeeperModule>('node-zookeeper-client', 'node-zookeeper-client', 'zookeeper://')
  const client = zookeeper.createClient(`${parsed.hostname}:${parsed.port || '2181'}${chroot}`, { sessionTimeout: 30_000, spinDelay: 200, retries: 0 })
  if (parsed.username !== '') client.addAuthInfo('digest', Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`))
  // Validates path before connecting.
  const provider = zookeeperLockProvider({ client, path: root })
  try {
    await withTimeout(
      new Promise<void>((resolve) => {
        client.once('connected', resolve)
        client.connect()
      }),
      TIMEOUT_MS,
      { store: 'ZooKeeper' },
    )
  } catch (error) {
    client.close()
    throw new CliError(`cannot reach ZooKeeper at ${url.redacted}: ${messageOf(error)}; check the URL and that the server runs`, { cause: error })
  }

  const call = <T>(start: (done: Callback<T>) => void): Promise<T> =>
    withTimeout(new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value)))), TIMEOUT_MS, { store: 'ZooKeeper' })
  const read = async (node: string): Promise<LockRecord | undefined> => {
    try {
      const { data, version } = await call<{ data: Buffer | undefined; version: number }>((done) =>
        client.getData(`${root}/${node}`, (error, data, stat) => done(error, { data, version: stat?.version ?? -1 })),
      )
      const text = data?.toString('utf8') ?? ''
      const lockUntil = Date.parse(text)
      // Empty or unreadable data counts as held, as the provider treats it.
      return { name: zookeeperLockName(node), lockUntil: text === '' || Number.isNaN(lockUntil) ? undefined : lockUntil, lockedAt: undefined, lockedBy: undefined, token: version }
    } catch (error) {
      if (codeOf(error) === NO_NODE) return undefined
      throw error
    }
  }
  const rootExists = async (): Promise<boolean> => (await call<Stat | null>((done) => client.exists(root, done))) !== null
  const clock = "this host's clock (ZooKeeper locks expire on the app clock)"

  return {
    kind: 'ZooKeeper',
    where: `${url.redacted} (nodes ${root}/*)`,
    extensible: true,
    provider: () => provider,
    async list() {
      const now = Date.now()
      let children: string[]
      try {
        children = await call<string[]>((done) => client.getChildren(root, done))
      } catch (error) {
        if (codeOf(error) === NO_NODE) return { now, clock, value: [] }
        throw error
      }
      const records = (await Promise.all(children.map(read))).filter((r): r is LockRecord => r !== undefined)
      return { now, clock, value: records.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) }
    },
    find: async (name) => ({ now: Date.now(), clock, value: await read(zookeeperNodeName(name)) }),
    async release(record) {
      // lockUntil becomes now, at the version that was shown. A delete would restart the node at
      // version 0 when it is taken again, which an earlier holder's version could then match.
      try {
        await call<unknown>((done) => client.setData(`${root}/${zookeeperNodeName(record.name)}`, Buffer.from(new Date().toISOString()), Number(record.token), done))
        return true
      } catch (error) {
        if (codeOf(error) === BAD_VERSION || codeOf(error) === NO_NODE) return false
        throw error
      }
    },
    async init() {
      if (await rootExists()) return [`node ${root} already exists: nothing to do`]
      await call<unknown>((done) => client.mkdirp(root, (error) => done(error, undefined)))
      return [`created node ${root}`]
    },
    ping: async () => {
      await rootExists()
      return 'ZooKeeper'
    },
    async structure(): Promise<Check[]> {
      return (await rootExists())
        ? [{ status: 'ok', label: `node ${root}`, detail: 'exists' }]
        : [{ status: 'ok', label: `node ${root}`, detail: 'does not exist yet; the provider creates it with the first lock (or run shedlock init)' }]
    },
    async remove(name) {
      try {
        await call<unknown>((done) => client.remove(`${root}/${zookeeperNodeName(name)}`, -1, (error) => done(error, undefined)))
      } catch (error) {
        if (codeOf(error) !== NO_NODE) throw error
      }
    },
    async readClock() {
      // ZooKeeper stamps a node's creation with the leader's clock: create a node that vanishes
      // with the session, read its ctime, remove it.
      const node = `${root}/shedlock-doctor-clock-${randomBytes(4).toString('hex')}`
      if (!(await rootExists())) return `not measured: ${root} does not exist yet`
      const reading = await timedClock('the creation time ZooKeeper gives a node', 1, async () => {
        await call<unknown>((done) => client.create(node, Buffer.alloc(0), EPHEMERAL, (error) => done(error, undefined)))
        return 0
      })
      try {
        const stat = await call<Stat | null>((done) => client.exists(node, done))
        if (!stat) return 'could not read back the node created to read the clock'
        return { ...reading, storeMs: Number(stat.ctime.readBigInt64BE(0)) }
      } finally {
        await call<unknown>((done) => client.remove(node, -1, (error) => done(error, undefined))).catch(() => {})
      }
    },
    clockDependence: 'the ZooKeeper provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: async () => client.close(),
  }
}

/** The lock name of a node: the inverse of the provider's zookeeperNodeName(). */
export function zookeeperLockName(node: string): string {
  let name = ''
  let bytes: number[] = []
  const flush = (): void => {
    if (bytes.length > 0) name += Buffer.from(bytes).toString('utf8')
    bytes = []
  }
  for (let i = 0; i < node.length; i++) {
    const char = node[i]!
    const hex = node.slice(i + 1, i + 3)
    if (char === '%' && node[i + 1] === 'u' && /^[0-9A-F]{4}$/.test(node.slice(i + 2, i + 6))) {
      flush()
      name += String.fromCharCode(Number.parseInt(node.slice(i + 2, i + 6), 16))
      i += 5
    } else if (char === '%' && /^[0-9A-F]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16))
      i += 2
    } else {
      flush()
      name += char
    }
  }
  flush()
  return name
}

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code
}
