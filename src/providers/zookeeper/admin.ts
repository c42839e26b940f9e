import { randomBytes } from 'node:crypto'
import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import { type Check, cannotHoldPause, type StoreAdmin, type StoreOptions, timed } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { CODE, DEFAULT_ROOT, hasCode, lockNodePath, validRoot, zookeeperSchema } from './format.ts'
import { zookeeperLockInspector, type ZooKeeperInspectorClient } from './inspector.ts'
import { type ZooKeeperClient, zookeeperLockProvider } from './provider.ts'

interface Stat {
  readonly version: number
  /** 8 bytes, big-endian epoch milliseconds on the ZooKeeper leader's clock. */
  readonly ctime: Buffer
}
type Callback<T> = (error: unknown, value: T) => void
interface Client extends ZooKeeperClient, ZooKeeperInspectorClient {
  connect(): void
  close(): void
  once(event: 'connected', listener: () => void): unknown
  addAuthInfo(scheme: string, auth: Buffer): void
  exists(path: string, callback: Callback<Stat | null>): void
  remove(path: string, version: number, callback: (error: unknown) => void): void
}
interface ZooKeeperModule {
  default: {
    createClient(
      connectionString: string,
      options: { sessionTimeout: number; spinDelay: number; retries: number },
    ): Client
  }
}

const TIMEOUT_MS = 10_000
// node-zookeeper-client's CreateMode.EPHEMERAL: the clock probe vanishes with the session.
const EPHEMERAL = 1

/** `shedlock schema zookeeper`: what the provider needs (the parent node, which init creates). */
export function schema(_table: string | undefined): string {
  return zookeeperSchema()
}

/**
 * Opens a `zookeeper://HOST:PORT[/CHROOT][?path=/shedlock]` URL with node-zookeeper-client (user
 * and password in the URL authenticate with the digest scheme). Locks are the children of `path`
 * (default `/shedlock`), as the provider writes them.
 */
export async function open(url: StoreUrl, _options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use zookeeper://HOST:PORT`)
  const root = validRoot(ownParameters(url, ['path']).get('path') ?? DEFAULT_ROOT)
  const chroot = parsed.pathname === '/' ? '' : parsed.pathname
  const { default: zookeeper } = await importDriver<ZooKeeperModule>(
    'node-zookeeper-client',
    'node-zookeeper-client',
    'zookeeper://',
  )
  const client = zookeeper.createClient(`${parsed.hostname}:${parsed.port || '2181'}${chroot}`, {
    sessionTimeout: 30_000,
    spinDelay: 200,
    retries: 0,
  })
  if (parsed.username !== '')
    client.addAuthInfo(
      'digest',
      Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`),
    )
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
    throw new CliError(
      `cannot reach ZooKeeper at ${url.redacted}: ${firstLine(error)}; check the URL and that the server runs`,
      { cause: error },
    )
  }

  const call = <T>(start: (done: Callback<T>) => void): Promise<T> =>
    withTimeout(
      new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value)))),
      TIMEOUT_MS,
      { store: 'ZooKeeper' },
    )
  const rootExists = async (): Promise<boolean> =>
    (await call<Stat | null>((done) => client.exists(root, done))) !== null

  return {
    kind: 'ZooKeeper',
    where: `${url.redacted} (nodes ${root}/*)`,
    extensible: true,
    provider: (options) => {
      if (options?.lockedBy !== undefined)
        throw cannotHoldPause(
          'ZooKeeper',
          "a lock node holds its lockUntil alone (Java ShedLock's format), so no node could tell a paused lock from a run's",
        )
      return zookeeperLockProvider({ client, path: root })
    },
    inspector: zookeeperLockInspector({ client, path: root, timeout: TIMEOUT_MS }),
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
        : [
            {
              status: 'ok',
              label: `node ${root}`,
              detail: 'does not exist yet; the provider creates it with the first lock (or run shedlock init)',
            },
          ]
    },
    async remove(name) {
      try {
        await call<unknown>((done) => client.remove(lockNodePath(root, name), -1, (error) => done(error, undefined)))
      } catch (error) {
        if (!hasCode(error, CODE.NO_NODE)) throw error
      }
    },
    async readClock() {
      // ZooKeeper stamps a node's creation with the leader's clock: create a node that vanishes
      // with the session, read its ctime, remove it.
      const node = `${root}/shedlock-doctor-clock-${randomBytes(4).toString('hex')}`
      if (!(await rootExists())) return `not measured: ${root} does not exist yet`
      const reading = await timed('the creation time ZooKeeper gives a node', 1, async () => {
        await call<unknown>((done) =>
          client.create(node, Buffer.alloc(0), EPHEMERAL, (error) => done(error, undefined)),
        )
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
    clockDependence:
      'the ZooKeeper provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: async () => client.close(),
  }
}
