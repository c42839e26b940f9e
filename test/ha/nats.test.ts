// The topology suite (npm run test:ha), NATS x 3 with JetStream and a KV bucket of 3 replicas:
// each server in a network namespace of its own (support/netns.ts), the bucket's stream leader
// cut off while a node holds the lock. The fleet's connections know all three servers. The rows
// go to test/ha/results/.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { jetstreamManager } from '@nats-io/jetstream'
import { Kvm } from '@nats-io/kv'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { natsLockProvider } from '../../src/providers/nats/index.ts'
import { inCI } from '../helpers/backends.ts'
import { runs, until } from './support/common.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('nats', rows, skipped))

const natsServer = runs('nats-server', ['--version']) ? 'nats-server' : '/usr/sbin/nats-server'
const servers = ['n0', 'n1', 'n2'] as const
const BUCKET = 'ha-locks'

describe.runIf(namespaces && (runs(natsServer, ['--version']) || inCI))('NATS: 3 servers, KV with 3 replicas', () => {
  const net = new PrivateNetwork(8)
  let dir = ''
  const connections: NatsConnection[] = []

  const startServer = (name: string) => {
    const ip = net.address(name)
    const conf = join(dir, `${name}.conf`)
    writeFileSync(
      conf,
      [
        `server_name: ${name}`,
        `listen: ${ip}:4222`,
        `jetstream { store_dir: "${join(dir, name)}" }`,
        'cluster {',
        '  name: ha',
        `  listen: ${ip}:6222`,
        `  routes: [${servers
          .filter((s) => s !== name)
          .map((s) => `nats://${net.address(s)}:6222`)
          .join(', ')}]`,
        '}',
        '',
      ].join('\n'),
    )
    net.spawn(name, [natsServer, '-c', conf], { dir, log: `${name}.log` })
  }
  // Pings every second: a connection to a server that was cut off (no reset, just silence) is
  // given up after two unanswered pings, and the client moves to another server.
  const connection = async (among: readonly string[] = servers): Promise<NatsConnection> => {
    const nc = await connect({
      servers: among.map((s) => `nats://${net.address(s)}:4222`),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 200,
      timeout: 2000,
      pingInterval: 1000,
      maxPingOut: 2,
    })
    connections.push(nc)
    return nc
  }
  let admin: NatsConnection
  // The server that leads the bucket's stream, as the stream's info says, once all three replicas are current.
  const streamLeader = async (): Promise<string | undefined> => {
    const jsm = await jetstreamManager(admin, { timeout: 2000 })
    const info = await jsm.streams.info(`KV_${BUCKET}`)
    const replicas = info.cluster?.replicas ?? []
    if (!info.cluster?.leader || replicas.length !== 2 || replicas.some((r) => !r.current || r.offline))
      return undefined
    return info.cluster.leader
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-ha-nats-'))
    net.up()
    for (const s of servers) net.add(s)
    for (const s of servers) startServer(s)
    await until(
      async () => {
        admin ??= await connection()
        await new Kvm(admin).create(BUCKET, { history: 1, replicas: 3 })
        return true
      },
      60_000,
      () => `JetStream to create the bucket (${tail(join(dir, 'n0.log'), 5)})`,
    )
    await until(
      async () => (await streamLeader()) !== undefined,
      30_000,
      'the stream to have a leader and 2 current replicas',
    )
  }, 90_000)

  afterAll(async () => {
    for (const nc of connections) await nc.close().catch(() => {})
    await net.down()
    if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
  })

  const fleet = (): Promise<FleetNode[]> =>
    Promise.all(
      ['a', 'b', 'c'].map(async (name) => {
        const kv = await new Kvm(await connection()).open(BUCKET)
        const provider = natsLockProvider({ kv })
        return { name, provider: () => provider }
      }),
    )

  it('off: stream leader isolated while a node holds the lock', async () => {
    let cut = ''
    const fault: Fault = {
      strike: async () => {
        cut = (await streamLeader())!
        net.isolate(cut)
      },
      restore: async () => {
        // Asked on the majority's side: a connection to the cut-off server hears nothing.
        const majority = await connection(servers.filter((s) => s !== cut))
        try {
          await until(
            async () => {
              const jsm = await jetstreamManager(majority, { timeout: 2000 })
              const leader = (await jsm.streams.info(`KV_${BUCKET}`)).cluster?.leader
              return leader !== undefined && leader !== cut
            },
            45_000,
            'the majority to elect a new stream leader',
          )
        } finally {
          await majority.close().catch(() => {})
        }
        net.heal(cut)
        await until(async () => (await streamLeader()) !== undefined, 60_000, 'the isolated server to catch up')
      },
    }
    const row = await failoverScenario(
      {
        topology: 'NATS x 3, KV replicas 3',
        option: 'off',
        fault: 'stream leader isolated while a node holds the lock',
      },
      await fleet(),
      fault,
      'nats-leader',
    )
    rows.push(row)
    expect(row.doubleGrantsStore).toBe(0)
    expect(row.stuckAfterRecovery).toBe(0)
  })
})
