// The topology suite (npm run test:ha), Redis primary + replica + 3 Sentinels: each node in a
// network namespace of its own (support/netns.ts), failed over while a fleet of nodes takes one
// lock. The rows go to test/ha/results/ (support/results.ts).
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../src/index.ts'
import { redisLockProvider } from '../../src/providers/redis/index.ts'
import { inCI } from '../helpers/backends.ts'
import { fullMatrix, runs, until } from './support/common.ts'
import { HOLDER_FAULTS, holderFaultRow } from './support/holder-faults.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario, slotScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('redis-sentinel', rows, skipped))

const hasRedis = runs('redis-server', ['--version'])
describe.runIf(namespaces && (hasRedis || inCI))('Redis: primary, replica and 3 Sentinels', () => {
  const net = new PrivateNetwork(1)
  let dir = ''
  const servers = new Map<string, ChildProcess>()
  const clients: Redis[] = []
  let primary = 'r0'
  let replica = 'r1'
  const sentinels: { host: string; port: number }[] = []

  const startRedis = (name: string, extra: string[]) => {
    servers.set(
      name,
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
          '--repl-diskless-sync-delay',
          '0',
          ...extra,
        ],
        { dir, log: `${name}.log` },
      ),
    )
  }
  const admin = (host: string, port = 6379): Redis => {
    const client = new Redis({
      host,
      port,
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 1000,
      retryStrategy: () => 200,
    })
    client.on('error', () => {})
    clients.push(client)
    return client
  }
  const sentinelAdmins: Redis[] = []
  // Every Sentinel names the same primary as the master, knows the other node as its healthy
  // replica, and knows the other Sentinels: the state a scenario starts from. A Sentinel that has
  // not yet seen the rejoined replica (it asks the master every 10 s) cannot fail over to it, and
  // one that still names the old primary sends the fleet there. The primary is the one they agree
  // on, not the one the test expects: a Sentinel may have failed over once more meanwhile.
  const settled = async () => {
    const nodes = ['r0', 'r1'] as const
    await until(
      async () => {
        const masters = new Set<string>()
        for (const client of sentinelAdmins) {
          const master = (await client.call('SENTINEL', 'MASTER', 'm')) as string[]
          const field = (k: string) => master[master.indexOf(k) + 1]
          if (field('num-other-sentinels') !== '2' || field('flags') !== 'master') return false
          masters.add(String(field('ip')))
        }
        const agreed = nodes.find((n) => masters.size === 1 && masters.has(net.address(n)))
        if (!agreed) return false
        const other = agreed === 'r0' ? 'r1' : 'r0'
        for (const client of sentinelAdmins) {
          const replicas = (await client.call('SENTINEL', 'REPLICAS', 'm')) as string[][]
          const healthy = replicas.some((r) => {
            const f = (k: string) => r[r.indexOf(k) + 1]
            return (
              f('ip') === net.address(other) &&
              f('flags') === 'slave' &&
              f('master-link-status') === 'ok' &&
              f('master-host') === net.address(agreed)
            )
          })
          if (!healthy) return false
        }
        primary = agreed
        replica = other
        return true
      },
      30_000,
      () => `the Sentinels to agree on a primary and see the other node as its healthy replica`,
    )
  }
  // The primary a majority of the Sentinels name now (after a failover: once they switched).
  const sentinelsName = async (name: string): Promise<boolean> => {
    let votes = 0
    for (const client of sentinelAdmins) {
      const [ip] = ((await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'm').catch(() => [])) as string[]) ?? []
      if (ip === net.address(name)) votes++
    }
    return votes >= 2
  }
  const role = async (name: string): Promise<string> => {
    const probe = new Redis({
      host: net.address(name),
      port: 6379,
      maxRetriesPerRequest: 0,
      connectTimeout: 500,
      retryStrategy: () => null,
    })
    probe.on('error', () => {})
    try {
      return String(await probe.info('replication'))
    } finally {
      probe.disconnect()
    }
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'shedlock-ha-redis-'))
    net.up()
    for (const name of ['r0', 'r1', 's0', 's1', 's2', 'h0']) net.add(name)
    startRedis('r0', [])
    startRedis('r1', ['--replicaof', net.address('r0'), '6379'])
    await until(
      async () => (await role('r1')).includes('master_link_status:up'),
      20_000,
      () => `the replica's link (${tail(join(dir, 'r1.log'))})`,
    )
    for (const s of ['s0', 's1', 's2']) {
      const conf = join(dir, `${s}.conf`)
      writeFileSync(
        conf,
        [
          `bind ${net.address(s)}`,
          'port 26379',
          'protected-mode no',
          `dir ${dir}`,
          `sentinel monitor m ${net.address('r0')} 6379 2`,
          // 2 s, twice the Sentinels' PING period: at 1 s a Sentinel declared the new master down
          // just after a switch (its first PING's reply came after 1 s) and failed over again.
          'sentinel down-after-milliseconds m 2000',
          'sentinel failover-timeout m 4000',
          'sentinel parallel-syncs m 1',
          '',
        ].join('\n'),
      )
      servers.set(s, net.spawn(s, ['redis-server', conf, '--sentinel'], { dir, log: `${s}.log` }))
      sentinels.push({ host: net.address(s), port: 26379 })
    }
    for (const s of sentinels) sentinelAdmins.push(admin(s.host, s.port))
    await settled()
  }, 90_000)

  afterAll(async () => {
    for (const client of clients) client.disconnect()
    await net.down()
    // SHEDLOCK_HA_KEEP=1 keeps the servers' logs and data in the temporary folder, to read after a failure.
    if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
  })

  // A scenario's clients, disconnected when it ends: left reconnecting, they would load the
  // machine and the Sentinels through every later scenario.
  let scenarioClients: Redis[] = []
  const fleet = (waitForReplicas: number): FleetNode[] =>
    ['a', 'b', 'c'].map((name) => {
      const client = new Redis({
        sentinels,
        name: 'm',
        maxRetriesPerRequest: 1,
        connectTimeout: 1000,
        sentinelRetryStrategy: () => 200,
        retryStrategy: () => 200,
      })
      client.on('error', () => {})
      scenarioClients.push(client)
      const provider = redisLockProvider({ client, timeout: '2s', waitForReplicas, waitForReplicasTimeout: '500ms' })
      return { name, provider: () => provider }
    })
  const endScenario = () => {
    for (const client of scenarioClients) client.disconnect()
    scenarioClients = []
  }

  const killPrimary = (beforeReplication: boolean): Fault => ({
    // Both ways: the primary's replication stream must not reach the replica either.
    prepare: beforeReplication
      ? () => {
          net.cutBetween(replica, primary)
          net.cutBetween(primary, replica)
        }
      : undefined,
    strike: async () => {
      net.crash(primary)
      // Both ends: the cut's blackhole routes live in the namespaces, which outlive the crash, and
      // one left in the killed node's would keep it from ever reaching the new primary.
      net.heal(replica)
      net.heal(primary)
    },
    restore: async () => {
      const old = primary
      // Sentinel promoted the replica; the killed one comes back as its replica (started as one,
      // as an operator would: Sentinel would convert a returning old primary too, but later).
      // 40 s: when the Sentinels split their votes, the next election comes failover-timeout x 2
      // later (8 s here), and a loaded machine can split them twice; 20 s timed out now and then.
      // Once the Sentinels switched, not as soon as the replica answers as a master: it does at
      // SLAVEOF NO ONE, before the Sentinels end the failover, and a node restarted in between
      // led them into a second failover, back to it (the suite's timeouts until November 27).
      await until(
        async () => (await role(replica)).includes('role:master') && (await sentinelsName(replica)),
        40_000,
        'Sentinel to promote the replica',
      )
      primary = replica
      replica = old
      startRedis(old, ['--replicaof', net.address(primary), '6379'])
      await until(
        async () => (await role(old)).includes('master_link_status:up'),
        20_000,
        () => `the old primary to rejoin as a replica (${tail(join(dir, `${old}.log`), 5)})`,
      )
      await settled()
    },
  })

  const topology = 'Redis + 3 Sentinels'
  for (const [option, replicas] of [
    ['off', 0],
    ['waitForReplicas: 1', 1],
  ] as const) {
    // By default the fault that loses the lock; the full matrix adds the one that does not.
    for (const beforeReplication of fullMatrix ? [true, false] : [true]) {
      const fault = beforeReplication ? 'primary killed, lock not replicated' : 'primary killed, lock replicated'
      it(`${option}: ${fault}`, async () => {
        // Where the last scenario left it; a restore that failed fails this one here, by name.
        await settled()
        const row = await failoverScenario(
          { topology, option, fault },
          fleet(replicas),
          killPrimary(beforeReplication),
          `sentinel-${replicas}-${beforeReplication}`,
        ).finally(endScenario)
        rows.push(row)
        if (replicas > 0 || !beforeReplication) expect(row.doubleGrantsStore).toBe(0)
        // The window the option closes: a harness whose fault does not lose the lock proves nothing.
        else expect(row.doubleGrantsStore).toBeGreaterThan(0)
        expect(row.stuckAfterRecovery).toBe(0)
      })
    }
  }

  for (const [option, replicas] of fullMatrix
    ? ([
        ['off', 0],
        ['waitForReplicas: 1', 1],
      ] as const)
    : ([['off', 0]] as const)) {
    const fault = 'slot runs, primary killed, claims not replicated'
    it(`${option}: ${fault}`, async () => {
      await settled()
      const row = await slotScenario(
        { topology, option, fault },
        fleet(replicas),
        killPrimary(true),
        `sentinel-slots-${replicas}`,
      ).finally(endScenario)
      rows.push(row)
      // Late nodes find no claim for the slots the promoted replica never received and run them again.
      if (replicas === 0) expect(row.duplicateSlotRuns).toBeGreaterThan(0)
      else expect(row.duplicateSlotRuns).toBe(0)
    })
  }

  // The holder's own faults: the store is healthy; what matters is the holder's watchdog.
  for (const { kind, fault } of HOLDER_FAULTS) {
    it(`off: ${fault}`, async () => {
      await settled()
      const job = { store: 'redis', sentinels, master: 'm' }
      const name = `sentinel-holder-${kind}`
      rows.push(
        await holderFaultRow({ net, holderNode: 'h0', dir, topology, kind, job, name, fleet: fleet(0) }).finally(
          endScenario,
        ),
      )
    })
  }

  it('a client on the replica gets a LockProviderError that says it is read-only', async () => {
    await settled()
    const client = admin(net.address(replica))
    const error = await redisLockProvider({ client, timeout: '2s' })
      .lock(lockConfiguration({ name: 'on-the-replica', lockAtMostFor: '10s' }))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toContain('the client is connected to a read-only replica')
  })
})
