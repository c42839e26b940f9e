import zookeeper from 'node-zookeeper-client'
import { type ZooKeeperClient, zookeeperLockProvider, zookeeperNodeName } from '../../src/providers/zookeeper/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import { inParallel, packageVersion, type RawOperations, type SetupContext, type StoreSetup } from './setup.ts'

// A transaction (a multi, which the provider creates lock nodes in) is one round trip, at its
// commit(): counted at transaction(), since its create() and setData() share the client's names.
const COUNT: CountSpec = { count: ['getData', 'create', 'setData', 'mkdirp', 'remove', 'transaction'] }
const NO_NODE = -101
const NODE_EXISTS = -110
const BAD_VERSION = -103

type Client = zookeeper.Client

function call<T>(start: (done: (error: unknown, value?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))))
}

const codeOf = (error: unknown): unknown => (error as { code?: unknown } | null)?.code

/** The provider's calls, directly: read the node, then create it or set it at the version read; release by a set at our version. */
function rawZooKeeper(client: ZooKeeperClient, root: string): RawOperations {
  const iso = (ms: number): Buffer => Buffer.from(new Date(ms).toISOString())
  const setData = (path: string, data: Buffer, version: number): Promise<number | undefined> =>
    new Promise((resolve, reject) =>
      client.setData(path, data, version, (error, stat) => {
        if (codeOf(error) === BAD_VERSION || codeOf(error) === NO_NODE) resolve(undefined)
        else if (error) reject(error)
        else resolve(stat!.version)
      }),
    )
  return {
    async acquire(name) {
      const path = `${root}/${zookeeperNodeName(name)}`
      const until = iso(Date.now() + 60_000)
      const read = await new Promise<{ data: Buffer | undefined; version: number } | undefined>((resolve, reject) =>
        client.getData(path, (error, data, stat) => {
          if (codeOf(error) === NO_NODE) resolve(undefined)
          else if (error) reject(error)
          else resolve({ data, version: stat!.version })
        }),
      )
      let version: number | undefined
      if (!read) {
        version = await new Promise<number | undefined>((resolve, reject) =>
          client.create(path, until, zookeeper.CreateMode.PERSISTENT, (error) => {
            if (codeOf(error) === NODE_EXISTS) resolve(undefined)
            else if (error) reject(error)
            else resolve(0)
          }),
        )
      } else {
        const lockUntil = Date.parse(read.data?.toString('utf8') ?? '')
        if (!(lockUntil <= Date.now())) return undefined
        version = await setData(path, until, read.version)
      }
      if (version === undefined) return undefined
      const held = version
      return {
        async release() {
          await setData(path, iso(Date.now()), held)
        },
      }
    },
  }
}

/** Deletes `path` and everything below it, children first (node-zookeeper-client's removeRecursive is not in its types, and failed here with NOT_EMPTY). */
async function removeTree(client: Client, path: string): Promise<void> {
  let children: string[]
  try {
    children = await call<string[]>((done) => client.getChildren(path, done))
  } catch (error) {
    if (codeOf(error) === NO_NODE) return
    throw error
  }
  await inParallel(children, 32, (child) => removeTree(client, `${path}/${child}`))
  await call<void>((done) => client.remove(path, -1, done)).catch((error: unknown) => {
    if (codeOf(error) !== NO_NODE) throw error
  })
}

async function open(url: string, ms = 10_000): Promise<Client> {
  const client = zookeeper.createClient(url, { sessionTimeout: 30_000, spinDelay: 200 })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.close()
      reject(new Error(`no connection to ZooKeeper at ${url} within ${ms}ms`))
    }, ms)
    client.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    client.connect()
  })
  return client
}

/** ZooKeeper at `SHEDLOCK_ZOOKEEPER_URL` (default `127.0.0.1:2181`), through one node-zookeeper-client session. */
export async function zookeeperSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_ZOOKEEPER_URL ?? '127.0.0.1:2181'
  const client = await open(url)
  const clients: Client[] = [client]
  const base = `/shedlock-bench-${context.runId}`
  const root = `${base}/main`
  await call<string>((done) => client.mkdirp(root, done))
  const zk = client as unknown as ZooKeeperClient

  return {
    name: 'zookeeper',
    versions: {
      server: 'ZooKeeper (version not queried: the four-letter words are off by default)',
      client: `node-zookeeper-client ${packageVersion('node-zookeeper-client')}, one session`,
      url,
    },
    notes: [],
    provider: zookeeperLockProvider({ client: zk, path: root }),
    raw: rawZooKeeper(zk, root),
    counted() {
      const { client: counted, counter } = countingProxy(zk, COUNT)
      return {
        provider: zookeeperLockProvider({ client: counted, path: root }),
        raw: rawZooKeeper(counted, root),
        counter,
      }
    },
    async separateNode() {
      const own = await open(url)
      clients.push(own)
      const { client: counted, counter } = countingProxy(own as unknown as ZooKeeperClient, COUNT)
      return {
        provider: zookeeperLockProvider({ client: counted, path: root }),
        counter,
        close: async () => own.close(),
      }
    },
    // One tree: a second root is only a path prefix.
    scaleMode: 'shared',
    async scaleSpace(label) {
      const spaceRoot = `${base}/${label}`
      await call<string>((done) => client.mkdirp(spaceRoot, done))
      let filled: string[] = []
      return {
        provider: zookeeperLockProvider({ client: zk, path: spaceRoot }),
        async fill(names) {
          const data = Buffer.from(new Date(Date.now() + 3_600_000).toISOString())
          filled = names.map((name) => `${spaceRoot}/${zookeeperNodeName(name)}`)
          await inParallel(filled, 64, (path) =>
            call<string>((done) => client.create(path, data, zookeeper.CreateMode.PERSISTENT, done)),
          )
        },
        async drain() {
          await inParallel(filled, 64, (path) => call<void>((done) => client.remove(path, -1, done)))
          filled = []
        },
      }
    },
    async close() {
      try {
        await removeTree(client, base)
      } finally {
        for (const c of clients) c.close()
      }
    },
  }
}
