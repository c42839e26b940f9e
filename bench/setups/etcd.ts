import { Etcd3 } from 'etcd3'
import { type EtcdClient, etcdLockProvider } from '../../src/providers/etcd/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  inParallel,
  packageVersion,
  type RawOperations,
  rawOwner,
  redactUrl,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

// Each grant, revoke and transaction commit is one gRPC call; lease() and if() only build.
const COUNT: CountSpec = { count: ['grant', 'revoke', 'commit'], follow: ['lease', 'if', 'then'] }
const NO_KEEP_ALIVE = { autoKeepAlive: false }

/** The provider's calls, directly: grant a lease, put-if-absent in one transaction; delete-if-mine, revoke. */
function rawEtcd(client: EtcdClient, environment: string): RawOperations {
  return {
    async acquire(name) {
      const key = `shedlock:${environment}:${name}`
      const value = rawOwner()
      const lease = client.lease(60, NO_KEEP_ALIVE)
      const id = await lease.grant()
      const { succeeded } = await client
        .if(key, 'Version', '==', 0)
        .then(client.put(key).value(value).lease(id))
        .commit()
      if (!succeeded) {
        await lease.revoke()
        return undefined
      }
      return {
        async release() {
          await client.if(key, 'Value', '==', value).then(client.delete().key(key)).commit()
          await lease.revoke()
        },
      }
    },
  }
}

/** etcd at `SHEDLOCK_ETCD_URL` (default `http://127.0.0.1:2379`), through one etcd3 client. */
export async function etcdSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_ETCD_URL ?? 'http://127.0.0.1:2379'
  const client = new Etcd3({ hosts: url })
  const clients: Etcd3[] = [client]
  let server: string
  try {
    const status = await client.maintenance.status()
    server = status.version
  } catch (error) {
    client.close()
    throw error
  }
  const environment = (suffix: string): string => `bench-${context.runId}-${suffix}`
  const main = environment('main')
  const seedLeases: { revoke(): Promise<void> }[] = []

  return {
    name: 'etcd',
    versions: { server: `etcd ${server}`, client: `etcd3 ${packageVersion('etcd3')}, one client`, url: redactUrl(url) },
    notes: [],
    provider: etcdLockProvider({ client, environment: main }),
    raw: rawEtcd(client, main),
    counted() {
      const { client: counted, counter } = countingProxy(client as unknown as EtcdClient, COUNT)
      return {
        provider: etcdLockProvider({ client: counted, environment: main }),
        raw: rawEtcd(counted, main),
        counter,
      }
    },
    async separateNode() {
      const own = new Etcd3({ hosts: url })
      clients.push(own)
      // The first call opens the channel: not part of the race.
      await own.get('shedlock-bench-probe').string()
      const { client: counted, counter } = countingProxy(own as unknown as EtcdClient, COUNT)
      return {
        provider: etcdLockProvider({ client: counted, environment: main }),
        counter,
        close: async () => own.close(),
      }
    },
    // One keyspace: a second environment is only a key prefix.
    scaleMode: 'shared',
    async scaleSpace(label) {
      const env = environment(label)
      let lease: ReturnType<Etcd3['lease']> | undefined
      return {
        provider: etcdLockProvider({ client, environment: env }),
        async fill(names) {
          // Every seeded key on one lease, so one revoke removes them all.
          lease = client.lease(3600, NO_KEEP_ALIVE)
          seedLeases.push(lease)
          const id = await lease.grant()
          await inParallel(names, 64, (name) =>
            client.put(`shedlock:${env}:${name}`).value('another-node').lease(id).exec(),
          )
        },
        async drain() {
          await lease?.revoke()
          lease = undefined
        },
      }
    },
    async close() {
      try {
        for (const lease of seedLeases) await lease.revoke().catch(() => {})
        // Anything a failed run left: every key of this run's environments, with its lease.
        const { kvs } = await client.getAll().prefix(`shedlock:bench-${context.runId}-`).exec()
        for (const kv of kvs)
          if (kv.lease !== '0') await client.leaseClient.leaseRevoke({ ID: kv.lease }).catch(() => {})
        await client.delete().prefix(`shedlock:bench-${context.runId}-`)
      } finally {
        for (const c of clients) c.close()
      }
    },
  }
}
