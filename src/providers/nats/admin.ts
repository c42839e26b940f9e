import { randomBytes } from 'node:crypto'
import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { importDriver } from '../../support/import-driver.ts'
import {
  type Check,
  cannotHoldPause,
  type StoreAdmin,
  type StoreOptions,
  timed,
  withInitAdvice,
} from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import { isStreamNotFound, NATS_LOCK_BUCKET, natsLockKey, natsSchema } from './format.ts'
import { natsLockInspector } from './inspector.ts'
import { natsLockProvider } from './provider.ts'

interface Entry {
  readonly value: Uint8Array
  readonly revision: number
  readonly operation: 'PUT' | 'DEL' | 'PURGE'
  readonly created: Date
}
interface Bucket {
  readonly bucket: string
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
  connect(options: {
    servers: string
    timeout: number
    maxReconnectAttempts: number
    user?: string
    pass?: string
    token?: string
  }): Promise<Connection>
}
interface KvModule {
  Kvm: new (
    connection: Connection,
  ) => { open(name: string): Promise<Bucket>; create(name: string, options: { history: number }): Promise<Bucket> }
}

const INSTALL = '@nats-io/transport-node @nats-io/kv'

/** `shedlock schema nats`: the nats CLI command that creates the bucket. */
export function schema(_table: string | undefined): string {
  return natsSchema()
}

/**
 * Opens a `nats://HOST:PORT[?bucket=NAME]` URL with @nats-io/transport-node and @nats-io/kv
 * (user and password, or a token as the user, in the URL authenticate). Locks are the bucket's
 * keys (default bucket `shedlock-locks`, Java ShedLock's), as the provider writes them.
 */
export async function open(url: StoreUrl, _options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.hostname === '') throw new UsageError(`${url.redacted} names no host; use nats://HOST:PORT`)
  if (parsed.pathname !== '' && parsed.pathname !== '/')
    throw new UsageError(`nats URLs take no path, got ${url.redacted}`)
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
    connection = await transport.connect({
      servers: `${parsed.hostname}:${parsed.port || '4222'}`,
      timeout: 10_000,
      maxReconnectAttempts: 0,
      ...credentials,
    })
  } catch (error) {
    throw new CliError(
      `cannot reach NATS at ${url.redacted}: ${firstLine(error)}; check the URL and that the server runs`,
      { cause: error },
    )
  }
  const kvm = new Kvm(connection)
  let bucket: Bucket
  try {
    bucket = await kvm.open(bucketName)
  } catch (error) {
    await connection.close()
    throw new CliError(
      `cannot open the bucket ${bucketName} at ${url.redacted}: ${firstLine(error)}; JetStream must be enabled`,
      { cause: error },
    )
  }
  const missingBucket = `bucket ${bucketName} does not exist; create it with: shedlock init --url ${url.redacted}`
  const exists = async (): Promise<boolean> => {
    try {
      await bucket.status()
      return true
    } catch (error) {
      if (isStreamNotFound(error)) return false
      throw error
    }
  }

  return {
    kind: 'NATS',
    where: `${url.redacted} (bucket ${bucketName})`,
    extensible: true,
    provider: (options) => {
      if (options?.lockedBy !== undefined)
        throw cannotHoldPause(
          'NATS',
          "a lock's value is its lockUntil alone (Java ShedLock's format), so no node could tell a paused lock from a run's",
        )
      return natsLockProvider({ kv: bucket })
    },
    inspector: withInitAdvice(natsLockInspector({ kv: bucket }), isStreamNotFound, missingBucket),
    async init() {
      if (await exists()) return [`bucket ${bucketName} already exists: nothing to do`]
      await kvm.create(bucketName, { history: 1 })
      return [`created bucket ${bucketName} (one value per key, no TTL)`]
    },
    ping: async () => `NATS ${connection.info?.version ?? '?'} (server ${connection.getServer()})`,
    async structure(): Promise<Check[]> {
      if (!(await exists()))
        return [
          { status: 'fail', label: `bucket ${bucketName}`, detail: missingBucket.replace(`bucket ${bucketName} `, '') },
        ]
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
      return [
        {
          status: 'ok',
          label: `bucket ${bucketName}`,
          detail: `exists, no TTL, ${status.values} entr${status.values === 1 ? 'y' : 'ies'}`,
        },
      ]
    },
    async remove(name) {
      await bucket.purge(natsLockKey(name))
    },
    async readClock() {
      // JetStream stamps each message with the server's time: write one, read its stamp, remove it.
      if (!(await exists())) return `not measured: bucket ${bucketName} does not exist`
      const key = `shedlock-doctor-clock-${randomBytes(4).toString('hex')}`
      let revision = 0
      const reading = await timed('the timestamp JetStream gives a written entry', 1, async () => {
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
    clockDependence:
      'the NATS provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: () => connection.close(),
  }
}
