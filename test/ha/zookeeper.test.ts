// The topology suite (npm run test:ha), ZooKeeper x 3: each server in a network namespace of its
// own (support/netns.ts), the leader cut off while a node holds the lock. The fleet's clients
// take a connection string of all three servers. The rows go to test/ha/results/.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import zookeeper from 'node-zookeeper-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { zookeeperLockProvider } from '../../src/providers/zookeeper/index.ts'
import { inCI } from '../helpers/backends.ts'
import { runs, until } from './support/common.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('zookeeper', rows, skipped))

const ZK_SERVER = '/usr/share/zookeeper/bin/zkServer.sh'
const servers = ['z0', 'z1', 'z2'] as const

describe.runIf(namespaces && (runs('test', ['-x', ZK_SERVER]) || inCI))('ZooKeeper: 3 servers', () => {
  const net = new PrivateNetwork(7)
  let dir = ''
  const clients: zookeeper.Client[] = []

  const startServer = (name: string, i: number) => {
    const data = join(dir, name)
    mkdirSync(data, { recursive: true })
    writeFileSync(join(data, 'myid'), `${i + 1}\n`)
    const cfg = join(dir, `${name}.cfg`)
    writeFileSync(
      cfg,
      [
        // Ticks of 500 ms: a follower gives up on a silent leader after syncLimit ticks (2 s).
        'tickTime=500',
        'initLimit=20',
        'syncLimit=4',
        `dataDir=${data}`,
        'clientPort=2181',
        `clientPortAddress=${net.address(name)}`,
        'admin.enableServer=false',
        '4lw.commands.whitelist=srvr,ruok',
        ...servers.map((s, k) => `server.${k + 1}=${net.address(s)}:2888:3888`),
        '',
      ].join('\n'),
    )
    net.spawn(
      name,
      ['env', `ZOO_LOG_DIR=${dir}`, 'JVMFLAGS=-Xmx96m -XX:+UseSerialGC', ZK_SERVER, 'start-foreground', cfg],
      { dir, log: `${name}.log` },
    )
  }
  // The four-letter word `srvr` of one server: its mode (leader, follower), or undefined when it does not serve.
  const mode = (name: string): Promise<string | undefined> =>
    new Promise((resolve) => {
      let out = ''
      const socket = connect(2181, net.address(name))
      socket.setTimeout(1000, () => socket.destroy())
      socket.on('connect', () => socket.write('srvr'))
      socket.on('data', (d) => {
        out += String(d)
      })
      socket.on('error', () => {})
      socket.on('close', () => resolve(/Mode: (\w+)/.exec(out)?.[1]))
    })
  const leader = async (among: readonly string[] = servers): Promise<string | undefined> => {
    const modes = await Promise.all(among.map(mode))
    if (modes.some((m) => m !== 'leader' && m !== 'follower')) return undefined
    return modes.filter((m) => m === 'leader').length === 1 ? among[modes.indexOf('leader')] : undefined
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-ha-zookeeper-'))
    net.up()
    for (const s of servers) net.add(s)
    servers.forEach(startServer)
    await until(
      async () => (await leader()) !== undefined,
      90_000,
      () => `a leader and two followers (${tail(join(dir, 'z0.log'), 5)})`,
    )
  }, 120_000)

  afterAll(async () => {
    for (const client of clients) client.close()
    await net.down()
    if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
  })

  const fleet = (): Promise<FleetNode[]> =>
    Promise.all(
      ['a', 'b', 'c'].map(async (name) => {
        const client = zookeeper.createClient(servers.map((s) => `${net.address(s)}:2181`).join(','), {
          sessionTimeout: 6000,
          spinDelay: 200,
        })
        clients.push(client)
        const connected = new Promise<void>((resolve) => client.once('connected', () => resolve()))
        client.connect()
        await until(
          () => Promise.race([connected.then(() => true), sleep(1000).then(() => false)]),
          20_000,
          'a client to connect',
        )
        const provider = zookeeperLockProvider({ client, timeout: '2s' })
        return { name, provider: () => provider }
      }),
    )
  const healthy = () => until(async () => (await leader()) !== undefined, 60_000, 'a leader and two followers')

  it('off: leader isolated while a node holds the lock', async () => {
    await healthy()
    let cut = ''
    const fault: Fault = {
      strike: async () => {
        cut = (await leader())!
        net.isolate(cut)
      },
      restore: async () => {
        const rest = servers.filter((s) => s !== cut)
        await until(async () => (await leader(rest)) !== undefined, 30_000, 'the majority to elect a new leader')
        net.heal(cut)
        await healthy()
      },
    }
    const nodes = await fleet()
    const row = await failoverScenario(
      { topology: 'ZooKeeper x 3', option: 'off', fault: 'leader isolated while a node holds the lock' },
      nodes,
      fault,
      'zookeeper-leader',
    )
    rows.push(row)
    expect(row.doubleGrantsStore).toBe(0)
    expect(row.stuckAfterRecovery).toBe(0)
  })
})
