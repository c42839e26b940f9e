// The topology suite (npm run test:ha), Redis Cluster: 3 primaries and 3 replicas, each node in a
// network namespace of its own (support/netns.ts). The primary that owns the lock key's slot is
// crashed while a fleet of ioredis Cluster clients takes the lock; its replica takes over by
// itself. The rows go to test/ha/results/.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Cluster } from 'ioredis'
import { createCluster } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../src/index.ts'
import { redisLockProvider } from '../../src/providers/redis/index.ts'
import { inCI } from '../helpers/backends.ts'
import { fullMatrix, runs, until } from './support/common.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('redis-cluster', rows, skipped))

const run = promisify(execFile)
const nodes = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5'] as const

describe.runIf(namespaces && (runs('redis-server', ['--version']) || inCI))(
  'Redis Cluster: 3 primaries, 3 replicas',
  () => {
    const net = new PrivateNetwork(9)
    let dir = ''
    const clients: Cluster[] = []

    const start = (name: string) =>
      net.spawn(
        name,
        [
          'redis-server',
          '--bind',
          net.address(name),
          '--port',
          '6379',
          '--protected-mode',
          'no',
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          dir,
          '--dbfilename',
          `${name}.rdb`,
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `${name}-nodes.conf`),
          // A replica takes over a primary it has not heard from for 2 s.
          '--cluster-node-timeout',
          '2000',
          '--repl-diskless-sync-delay',
          '0',
        ],
        { dir, log: `${name}.log` },
      )
    // Asynchronous: the checks run while the fleet takes locks, which a synchronous one would stop.
    const cli = async (name: string, ...args: string[]) =>
      (await run('redis-cli', ['-h', net.address(name), '-p', '6379', ...args], { timeout: 5_000 })).stdout
    const quiet = (p: Promise<string>): Promise<string> => p.catch(() => '')
    // `CLUSTER NODES` as the cluster sees it now: per node its address, flags and primary's id.
    const view = async (from: string) =>
      (await quiet(cli(from, 'CLUSTER', 'NODES')))
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [id, address, flags, primaryId] = line.split(' ')
          return { id: id!, ip: address!.split(':')[0]!, flags: flags!.split(','), primaryId: primaryId! }
        })
    const nameOf = (ip: string) => nodes.find((n) => net.address(n) === ip)!
    // Healthy: cluster_state ok, 3 primaries each with a connected replica, no node failed.
    const healthy = async (from: string): Promise<boolean> => {
      if (!(await quiet(cli(from, 'CLUSTER', 'INFO'))).includes('cluster_state:ok')) return false
      const v = await view(from)
      if (
        v.length !== 6 ||
        v.some((n) => n.flags.some((f) => f.includes('fail') || f === 'handshake' || f === 'noaddr'))
      )
        return false
      const primaries = v.filter((n) => n.flags.includes('master'))
      return primaries.length === 3 && primaries.every((p) => v.some((r) => r.primaryId === p.id))
    }
    const alive = async () => {
      const pongs = await Promise.all(nodes.map((n) => quiet(cli(n, 'PING'))))
      return nodes.filter((_, i) => pongs[i]!.includes('PONG'))
    }
    const allHealthy = async () => (await Promise.all(nodes.map(healthy))).every(Boolean)

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'shedlock-ha-redis-cluster-'))
      net.up()
      for (const n of nodes) net.add(n)
      for (const n of nodes) start(n)
      await until(
        async () => (await alive()).length === 6,
        30_000,
        () => `six nodes (${tail(join(dir, 'c0.log'), 5)})`,
      )
      await run(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...nodes.map((n) => `${net.address(n)}:6379`),
          '--cluster-replicas',
          '1',
          '--cluster-yes',
        ],
        { timeout: 60_000 },
      )
      await until(allHealthy, 60_000, 'the cluster to be ok on every node')
    }, 120_000)

    afterAll(async () => {
      for (const client of clients) client.disconnect()
      await net.down()
      if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
    })

    const startupNodes = () => nodes.map((n) => ({ host: net.address(n), port: 6379 }))
    const fleet = (waitForReplicas: number): FleetNode[] =>
      ['a', 'b', 'c'].map((name) => {
        const client = new Cluster(startupNodes(), {
          redisOptions: { connectTimeout: 1000, maxRetriesPerRequest: 1 },
          clusterRetryStrategy: () => 200,
          retryDelayOnFailover: 200,
          retryDelayOnClusterDown: 200,
          slotsRefreshTimeout: 1000,
        })
        client.on('error', () => {})
        clients.push(client)
        const provider = redisLockProvider({ client, timeout: '2s', waitForReplicas, waitForReplicasTimeout: '500ms' })
        return { name, provider: () => provider }
      })

    // The primary of the slot of `job-lock:default:<name>` (the provider's key), and its replica.
    const owners = async (lockName: string) => {
      const from = (await alive())[0]!
      const slot = Number((await cli(from, 'CLUSTER', 'KEYSLOT', `job-lock:default:${lockName}`)).trim())
      const slots = await cli(from, '--json', 'CLUSTER', 'SLOTS')
      const ranges = JSON.parse(slots) as [number, number, [string, number, string], ...[string, number, string][]][]
      const range = ranges.find(([lo, hi]) => slot >= lo && slot <= hi)!
      const primary = nameOf(range[2][0])
      const v = await view(from)
      const primaryId = v.find((n) => n.ip === net.address(primary))!.id
      const replica = nameOf(v.find((n) => n.primaryId === primaryId)!.ip)
      return { primary, replica }
    }

    const killPrimary = (
      { primary, replica }: { primary: string; replica: string },
      beforeReplication: boolean,
    ): Fault => {
      return {
        prepare: beforeReplication
          ? () => {
              net.cutBetween(replica, primary)
              net.cutBetween(primary, replica)
            }
          : undefined,
        strike: async () => {
          net.crash(primary)
          net.heal(replica)
          net.heal(primary)
        },
        restore: async () => {
          // The cluster's replica takes over by itself; the crashed node comes back with its node
          // file (its identity) and no data, and the cluster makes it the new primary's replica.
          await until(
            async () =>
              (await view(replica)).find((n) => n.ip === net.address(replica))?.flags.includes('master') ?? false,
            30_000,
            'the replica to take over',
          )
          start(primary)
          await until(allHealthy, 60_000, () => `the cluster to be ok again (${tail(join(dir, `${primary}.log`), 5)})`)
        },
      }
    }

    const topology = 'Redis Cluster 3+3'
    for (const [option, replicas] of [
      ['off', 0],
      ['waitForReplicas: 1', 1],
    ] as const) {
      for (const beforeReplication of fullMatrix ? [true, false] : [true]) {
        const fault = beforeReplication
          ? "key's primary killed, lock not replicated"
          : "key's primary killed, lock replicated"
        it(`${option}: ${fault}`, async () => {
          await until(allHealthy, 60_000, 'the cluster to be ok')
          const name = `cluster-${replicas}-${beforeReplication}`
          const row = await failoverScenario(
            { topology, option, fault },
            fleet(replicas),
            killPrimary(await owners(name), beforeReplication),
            name,
          )
          rows.push(row)
          if (replicas > 0 || !beforeReplication) expect(row.doubleGrantsStore).toBe(0)
          else expect(row.doubleGrantsStore).toBeGreaterThan(0)
          expect(row.stuckAfterRecovery).toBe(0)
        })
      }
    }

    it('node-redis createCluster: lock, waitForReplicas and release on the key’s node', async () => {
      await until(allHealthy, 60_000, 'the cluster to be ok')
      const client = createCluster({ rootNodes: nodes.map((n) => ({ url: `redis://${net.address(n)}:6379` })) })
      client.on('error', () => {})
      await client.connect()
      try {
        for (const waitForReplicas of [0, 1]) {
          const provider = redisLockProvider({
            client,
            timeout: '2s',
            waitForReplicas,
            waitForReplicasTimeout: '500ms',
          })
          const config = () => lockConfiguration({ name: `node-redis-${waitForReplicas}`, lockAtMostFor: '10s' })
          const lock = await provider.lock(config())
          expect(lock).toBeDefined()
          expect(await provider.lock(config())).toBeUndefined()
          await lock!.unlock()
          const again = await provider.lock(config())
          expect(again).toBeDefined()
          await again!.unlock()
        }
      } finally {
        await client.close()
      }
    })
  },
)
