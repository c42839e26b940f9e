import { type KV, Kvm } from '@nats-io/kv'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { type NatsKv, natsLockKey, natsLockProvider } from '../../src/providers/nats/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  inParallel,
  packageVersion,
  type RawOperations,
  redactUrl,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['get', 'create', 'update', 'delete', 'put'] }
const WRONG_LAST_SEQUENCE = new Set([10071, 10164])

/** Java's 8-byte big-endian `lockUntil`, as the provider writes it. */
function lockUntilBytes(ms: number): Uint8Array {
  const bytes = new Uint8Array(8)
  new DataView(bytes.buffer).setBigInt64(0, BigInt(ms))
  return bytes
}

/** `write()`'s new revision, or `undefined` when another write came first. */
async function conditional(write: () => Promise<number>): Promise<number | undefined> {
  try {
    return await write()
  } catch (error) {
    if (WRONG_LAST_SEQUENCE.has((error as { code?: number }).code ?? 0)) return undefined
    throw error
  }
}

/** The provider's calls on the bucket, directly: read the entry, then create it or update it at the revision read; delete at our revision. */
function rawNats(kv: NatsKv): RawOperations {
  return {
    async acquire(name) {
      const key = natsLockKey(name)
      const value = lockUntilBytes(Date.now() + 60_000)
      const entry = await kv.get(key)
      let revision: number | undefined
      if (entry?.operation !== 'PUT') revision = await conditional(() => kv.create(key, value))
      else if (Number(new DataView(entry.value.buffer, entry.value.byteOffset, 8).getBigInt64(0)) > Date.now())
        return undefined
      else revision = await conditional(() => kv.update(key, value, entry.revision))
      if (revision === undefined) return undefined
      const held = revision
      return {
        async release() {
          await conditional(async () => {
            await kv.delete(key, { previousSeq: held })
            return held
          })
        },
      }
    },
  }
}

async function open(url: string): Promise<NatsConnection> {
  return connect({ servers: url, timeout: 3000 })
}

/** NATS JetStream at `SHEDLOCK_NATS_URL` (default `nats://127.0.0.1:4222`), one KV bucket per space. */
export async function natsSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_NATS_URL ?? 'nats://127.0.0.1:4222'
  const nc = await open(url)
  const connections: NatsConnection[] = [nc]
  const buckets: KV[] = []
  const bucketName = (suffix: string): string => `shedlock-bench-${context.runId}-${suffix}`
  const newBucket = async (connection: NatsConnection, suffix: string): Promise<KV> => {
    const kv = await new Kvm(connection).create(bucketName(suffix))
    buckets.push(kv)
    return kv
  }
  let kv: KV
  try {
    kv = await newBucket(nc, 'main')
  } catch (error) {
    await nc.close()
    throw error
  }

  return {
    name: 'nats',
    versions: {
      server: `nats-server ${nc.info?.version ?? 'unknown'} (JetStream, file storage)`,
      client: `@nats-io/kv ${packageVersion('@nats-io/kv')}, @nats-io/transport-node ${packageVersion('@nats-io/transport-node')}`,
      url: redactUrl(url),
    },
    notes: [],
    provider: natsLockProvider({ kv }),
    raw: rawNats(kv),
    counted() {
      const { client, counter } = countingProxy(kv, COUNT)
      return { provider: natsLockProvider({ kv: client }), raw: rawNats(client), counter }
    },
    async separateNode() {
      const own = await open(url)
      connections.push(own)
      const { client, counter } = countingProxy(await new Kvm(own).open(bucketName('main')), COUNT)
      return { provider: natsLockProvider({ kv: client }), counter, close: () => own.close() }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const space = await newBucket(nc, label)
      return {
        provider: natsLockProvider({ kv: space }),
        async fill(names) {
          const value = lockUntilBytes(Date.now() + 3_600_000)
          await inParallel(names, 64, (name) => space.put(natsLockKey(name), value))
        },
        async drain() {
          await space.destroy()
        },
      }
    },
    async close() {
      try {
        for (const b of buckets) await b.destroy().catch(() => false)
      } finally {
        await Promise.all(connections.map((c) => c.close().catch(() => {})))
      }
    },
  }
}
