// The topology suite (npm run test:ha), etcd x 3: each member in a network namespace of its own
// (support/netns.ts). The leader is cut off while a node holds the lock; then the holder itself
// is cut off (it keeps running on the minority side), and frozen past lockAtMostFor. The fleet's
// clients know all three endpoints. The rows go to test/ha/results/.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Etcd3 } from 'etcd3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { etcdLockProvider } from '../../src/providers/etcd/index.ts'
import { inCI } from '../helpers/backends.ts'
import { runs, until } from './support/common.ts'
import { HOLDER_FAULTS, holderFaultRow } from './support/holder-faults.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('etcd', rows, skipped))

const members = ['e0', 'e1', 'e2'] as const

describe.runIf(namespaces && (runs('etcd', ['--version']) || inCI))('etcd: 3 members', () => {
  const net = new PrivateNetwork(6)
  let dir = ''
  const clients: Etcd3[] = []
  const hosts = () => members.map((m) => `http://${net.address(m)}:2379`)

  const startMember = (name: string) => {
    const ip = net.address(name)
    net.spawn(
      name,
      [
        'etcd',
        '--name',
        name,
        '--data-dir',
        join(dir, name),
        '--listen-client-urls',
        `http://${ip}:2379`,
        '--advertise-client-urls',
        `http://${ip}:2379`,
        '--listen-peer-urls',
        `http://${ip}:2380`,
        '--initial-advertise-peer-urls',
        `http://${ip}:2380`,
        '--initial-cluster',
        members.map((m) => `${m}=http://${net.address(m)}:2380`).join(','),
        '--initial-cluster-state',
        'new',
        '--heartbeat-interval',
        '100',
        '--election-timeout',
        '1000',
      ],
      { dir, log: `${name}.log` },
    )
  }
  // Each member's own view, over its gRPC gateway: its id and the leader it follows.
  const status = async (name: string): Promise<{ member: string; leader: string } | undefined> => {
    const response = await fetch(`http://${net.address(name)}:2379/v3/maintenance/status`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(1000),
    }).catch(() => undefined)
    if (!response?.ok) return undefined
    const body = (await response.json()) as { header?: { member_id?: string }; leader?: string }
    return body.header?.member_id && body.leader ? { member: body.header.member_id, leader: body.leader } : undefined
  }
  // The leader all reachable members agree on, with every member of `among` following it.
  const leader = async (among: readonly string[] = members): Promise<string | undefined> => {
    const views = await Promise.all(among.map(async (m) => ({ name: m, status: await status(m) })))
    if (views.some((v) => !v.status)) return undefined
    const ids = new Set(views.map((v) => v.status!.leader))
    if (ids.size !== 1) return undefined
    return views.find((v) => v.status!.member === v.status!.leader)?.name
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-ha-etcd-'))
    net.up()
    for (const m of members) net.add(m)
    net.add('h0')
    for (const m of members) startMember(m)
    await until(
      async () => (await leader()) !== undefined,
      60_000,
      () => `a leader (${tail(join(dir, 'e0.log'), 5)})`,
    )
  }, 90_000)

  afterAll(async () => {
    for (const client of clients) client.close()
    await net.down()
    if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
  })

  const fleet = (): FleetNode[] =>
    ['a', 'b', 'c'].map((name) => {
      const client = new Etcd3({ hosts: hosts(), dialTimeout: 1000 })
      clients.push(client)
      const provider = etcdLockProvider({ client, timeout: '2s' })
      return { name, provider: () => provider }
    })
  const topology = 'etcd x 3'
  // Every member up and following one leader: the state each scenario starts from and ends in.
  const healthy = () =>
    until(async () => (await leader()) !== undefined, 30_000, 'all three members to follow one leader')

  it('off: leader isolated while a node holds the lock', async () => {
    await healthy()
    let cut = ''
    const fault: Fault = {
      strike: async () => {
        cut = (await leader())!
        net.isolate(cut)
      },
      restore: async () => {
        const rest = members.filter((m) => m !== cut)
        await until(async () => (await leader(rest)) !== undefined, 30_000, 'the majority to elect a new leader')
        net.heal(cut)
        await healthy()
      },
    }
    const row = await failoverScenario(
      { topology, option: 'off', fault: 'leader isolated while a node holds the lock' },
      fleet(),
      fault,
      'etcd-leader',
    )
    rows.push(row)
    // A quorum's commit is on a majority: a new leader has the lock.
    expect(row.doubleGrantsStore).toBe(0)
    expect(row.stuckAfterRecovery).toBe(0)
  })

  for (const { kind, fault } of HOLDER_FAULTS) {
    it(`off: ${fault}`, async () => {
      await healthy()
      const name = `etcd-holder-${kind}`
      const job = { store: 'etcd', hosts: hosts() }
      rows.push(await holderFaultRow({ net, holderNode: 'h0', dir, topology, kind, job, name, fleet: fleet() }))
    })
  }
})
