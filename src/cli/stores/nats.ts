import { randomBytes } from 'node:crypto'
import { NATS_LOCK_BUCKET, natsLockKey, natsLockProvider } from '../../providers/nats.ts'
import { CliError, messageOf, UsageError } from '../command.ts'
import { importDriver } from '../import-driver.ts'
import type { Check, LockRecord, Store, StoreOptions } from '../store.ts'
import { timed as timedClock } from '../store.ts'
import { ownParameters, type StoreUrl } from '../store-url.ts'

interface Entry {
  readonly value: Uint8Array
  readonly revision: number
  readonly operation: 'PUT' | 'DEL' | 'PURGE'
  readonly created: Date
}
interface Bucket {
  get(key: string): Promise<Entry | null>
  create(key: string, data: Uint8Array): Promise<number>
  update(key: string, data: Uint8Array, version: number): Promise<number>
  put(key: string, data: Uint8Array): Promise<number>
  delete(key: string, options: { previousSeq: number }): Promise<void>
  purge(key: string): Promise<void>
  keys(): Promise<AsyncIterable<string>>
  status(): Promise<{ ttl: number; history: number; values: number }>
}
interface Connection {
  close(): Promise<void>
  getServer(): string
  info?: { version?: string }
}
interface TransportModule {
  connect(options: { servers: string; timeout: number; maxReconnectAttempts: number; user?: string; pass?: string; token?: string }): Promise<Connection>
}
interface KvModule {
  Kvm: new (connection: Connection) => { open(name: string): Promise<Bucket>; create(name: string, options: { history: number }): Promise<Bucket> }
}

const INSTALL = '@nats-io/transport-node @nats-io/kv'
// JetStream's "wrong last sequence": the entry has another revision than the one compared.
const WRONG_LAST_SEQUENCE = new Set([10071, 10164])
const STREAM_NOT_FOUND = 10059

/**
 * Opens a `nats://HOST:PORT[?bucket=NAME]` URL with @nats-io/transport-node and @nats-io/kv
 * (user and password, or a token as the user, in the URL authenticate). Locks are the bucket's
 * keys (default bucket `shedlock-locks`, Java ShedLock's), as the provider writes them.
 */
export async function openNatsStore(url: StoreUrl, _options: StoreOptions): Promise<Store> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use nats://HOST:PORT`)
  if (parsed.pathname !== '' && parsed.pathname !== '/') throw new UsageError(`nats URLs take no path, got ${url.redacted}`)
  const bucketName = ownParameters(url, ['bucket']).get('bucket') ?? NATS_LOCK_BUCKET
  const transport = await importDriver<TransportModule>('@nats-io/transport-node', INSTALL, 'nats://')
  const { Kvm } = await importDriver<KvModule>('@nats-io/kv', INSTALL, 'nats://')
  const credentials =
    parsed.username === ''
      ? {}
      : parsed.password === ''
        ? { token: decodeURIComponent(parsed.username) }
        : { user: decodeURIComponent(parsed.username), pass: decodeURIComponent(parsed.password) }
  let connection: Connection
  try {
    // One attempt, no reconnection: a CLI command should fail at once, not wait for a server.
    connection = await transport.connect({ servers: `${parsed.hostname}:${parsed.port || '4222'}`, timeout: 10_000, maxReconnectAttempts: 0, ...credentials })
  } catch (error) {
    throw new CliError(`cannot reach NATS at ${url.redacted}: ${messageOf(error)}; check the URL and that the server runs`, { cause: error })
  }
  const kvm = new Kvm(connection)
  let bucket: Bucket
  try {
    bucket = await kvm.open(bucketName)
  } catch (error) {
    await connection.close()
    throw new CliError(`cannot open the bucket ${bucketName} at ${url.redacted}: ${messageOf(error)}; JetStream must be enabled`, { cause: error })
  }
  const provider = natsLockProvider({ kv: bucket })
  const clock = "this host's clock (NATS locks expire on the app clock)"
  const missingBucket = `bucket ${bucketName} does not exist; create it with: shedlock init --url ${url.redacted}`
  const exists = async (): Promise<boolean> => {
    try {
      await bucket.status()
      return true
    } catch (error) {
      if (codeOf(error) === STREAM_NOT_FOUND || /stream not found/i.test(messageOf(error))) return false
      throw error
    }
  }
  const read = async (key: string): Promise<LockRecord | undefined> => {
    const entry = await bucket.get(key)
    if (!entry || entry.operation !== 'PUT') return undefined
    return { name: natsLockName(key), lockUntil: lockUntilOf(entry.value), lockedAt: undefined, lockedBy: undefined, token: entry.revision }
  }
  const guarded = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      if (codeOf(error) === STREAM_NOT_FOUND || /stream not found/i.test(messageOf(error))) throw new CliError(missingBucket, { cause: error })
      throw error
    }
  }

  return {
    kind: 'NATS',
    where: `${url.redacted} (bucket ${bucketName})`,
    extensible: true,
    provider: () => provider,
    list: () =>
      guarded(async () => {
        const now = Date.now()
        const keys: string[] = []
        for await (const key of await bucket.keys()) keys.push(key)
        const records = (await Promise.all(keys.map(read))).filter((r): r is LockRecord => r !== undefined)
        return { now, clock, value: records.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) }
      }),
    find: (name) => guarded(async () => ({ now: Date.now(), clock, value: await read(natsLockKey(name)) })),
    async release(record) {
      try {
        // A delete marker at the revision that was shown; the provider writes over markers.
        await bucket.delete(natsLockKey(record.name), { previousSeq: Number(record.token) })
        return true
      } catch (error) {
        if (WRONG_LAST_SEQUENCE.has(codeOf(error) as number)) return false
        throw error
      }
    },
    async init() {
      if (await exists()) return [`bucket ${bucketName} already exists: nothing to do`]
      await kvm.create(bucketName, { history: 1 })
      return [`created bucket ${bucketName} (one value per key, no TTL)`]
    },
    ping: async () => `NATS ${connection.info?.version ?? '?'} (server ${connection.getServer()})`,
    async structure(): Promise<Check[]> {
      if (!(await exists())) return [{ status: 'fail', label: `bucket ${bucketName}`, detail: missingBucket.replace(`bucket ${bucketName} `, '') }]
      const status = await bucket.status()
      if (status.ttl > 0) {
        return [
          {
            status: 'warn',
            label: `bucket ${bucketName}`,
            detail: `has a TTL of ${status.ttl} ms: a lock held longer than that is dropped early; use a bucket without TTL`,
          },
        ]
      }
      return [{ status: 'ok', label: `bucket ${bucketName}`, detail: `exists, no TTL, ${status.values} entr${status.values === 1 ? 'y' : 'ies'}` }]
    },
    async remove(name) {
      await bucket.purge(natsLockKey(name))
    },
    async readClock() {
      // JetStream stamps each message with the server's time: write one, read its stamp, remove it.
      if (!(await exists())) return `not measured: bucket ${bucketName} does not exist`
      const key = `shedlock-doctor-clock-${randomBytes(4).toString('hex')}`
      let revision = 0
      const reading = await timedClock('the timestamp JetStream gives a written entry', 1, async () => {
        revision = await bucket.put(key, new Uint8Array(8))
        return 0
      })
      try {
        const entry = await bucket.get(key)
        if (!entry || entry.revision !== revision) return 'could not read back the entry written to read the clock'
        return { ...reading, storeMs: entry.created.getTime() }
      } finally {
        await bucket.purge(key)
      }
    },
    clockDependence: 'the NATS provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: () => connection.close(),
  }
}

/** The lock name of a KV key: the inverse of the provider's natsLockKey(). */
export function natsLockName(key: string): string {
  if (!key.startsWith('=')) return key
  const bytes: number[] = []
  const rest = key.slice(1)
  for (let i = 0; i < rest.length; i++) {
    const char = rest[i]!
    if (char === '=' && /^[0-9A-F]{2}$/.test(rest.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(rest.slice(i + 1, i + 3), 16))
      i += 2
    } else {
      bytes.push(...Buffer.from(char, 'utf8'))
    }
  }
  return Buffer.from(bytes).toString('utf8')
}

/** The provider's value: lockUntil as 8 bytes, big-endian epoch milliseconds; `undefined` for anything else. */
function lockUntilOf(value: Uint8Array): number | undefined {
  if (value.length !== 8) return undefined
  return Number(new DataView(value.buffer, value.byteOffset, 8).getBigInt64(0))
}

function codeOf(error: unknown): unknown {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown; api_error?: { err_code?: unknown } }).api_error?.err_code ?? (e as { code?: unknown }).code
    if (typeof code === 'number') return code
  }
  return undefined
}
