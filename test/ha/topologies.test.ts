// The topology suite (npm run test:ha): replicated stores, each node in a network namespace of
// its own (support/netns.ts), failed over while a fleet of nodes takes one lock. Prints the
// table and writes it to test/ha/results/ (docs/guarantees.md shows the latest run's).
import { type ChildProcess, execFileSync, spawnSync } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../src/providers/postgres/index.ts'
import { redisLockProvider } from '../../src/providers/redis/index.ts'
import { inCI } from '../helpers/backends.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type FleetNode, killPrimaryScenario, type Row, writeResults } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces) {
  const why = 'the topology suite needs root and `ip netns` (it builds network namespaces)'
  if (inCI) throw new Error(why)
  skipped.push(why)
}

afterAll(() => {
  if (rows.length === 0) return
  const table = writeResults(rows, skipped)
  console.log(`\nReplicated topologies (test/ha/results/latest.md):\n\n${table}\n`)
})

async function until(
  check: () => boolean | Promise<boolean>,
  ms: number,
  what: string | (() => string),
): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    // Each check is bounded too: a probe stuck on a dead peer's connection must not outlast the deadline unnoticed.
    const left = Math.max(deadline - Date.now(), 100)
    if (
      await Promise.race([Promise.resolve(check()).catch(() => false), sleep(Math.min(left, 5_000)).then(() => false)])
    )
      return
    if (Date.now() > deadline)
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'string' ? what : what()}`)
    await sleep(100)
  }
}

const hasRedis = spawnSync('redis-server', ['--version']).status === 0
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
  // Each Sentinel names the current primary as the master, knows the replica and sees it healthy,
  // and knows the other Sentinels: the state a scenario starts from. A Sentinel that has not yet
  // seen the rejoined replica (it asks the master every 10 s) cannot fail over to it, and one
  // that still names the old primary sends the fleet there.
  const settled = async () => {
    const deadline = Date.now() + 30_000
    for (const client of sentinelAdmins) {
      await until(
        async () => {
          const master = (await client.call('SENTINEL', 'MASTER', 'm')) as string[]
          const field = (k: string) => master[master.indexOf(k) + 1]
          if (
            field('ip') !== net.address(primary) ||
            field('num-other-sentinels') !== '2' ||
            field('flags') !== 'master'
          )
            return false
          const replicas = (await client.call('SENTINEL', 'REPLICAS', 'm')) as string[][]
          return replicas.some((r) => {
            const f = (k: string) => r[r.indexOf(k) + 1]
            return (
              f('ip') === net.address(replica) &&
              f('flags') === 'slave' &&
              f('master-link-status') === 'ok' &&
              f('master-host') === net.address(primary)
            )
          })
        },
        Math.max(deadline - Date.now(), 0),
        () => `the Sentinels to agree on ${primary} as the primary and ${replica} as its healthy replica`,
      )
    }
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
    for (const name of ['r0', 'r1', 's0', 's1', 's2']) net.add(name)
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
          'sentinel down-after-milliseconds m 1000',
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
      clients.push(client)
      const provider = redisLockProvider({ client, timeout: '2s', waitForReplicas, waitForReplicasTimeout: '500ms' })
      return { name, provider: () => provider }
    })

  const faults = {
    // Both ways: the primary's replication stream must not reach the replica either.
    cutReplication: () => {
      net.cutBetween(replica, primary)
      net.cutBetween(primary, replica)
    },
    killPrimary: async () => {
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
      await until(async () => (await role(replica)).includes('role:master'), 20_000, 'Sentinel to promote the replica')
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
  }

  for (const [option, replicas] of [
    ['off', 0],
    ['waitForReplicas: 1', 1],
  ] as const) {
    for (const beforeReplication of [true, false]) {
      it(`${option}: ${beforeReplication ? 'primary killed before the lock replicated' : 'primary killed after the lock replicated'}`, async () => {
        const row = await killPrimaryScenario(
          'Redis + 3 Sentinels',
          option,
          fleet(replicas),
          faults,
          beforeReplication,
          `sentinel-${replicas}-${beforeReplication}`,
        )
        rows.push(row)
        if (replicas > 0 || !beforeReplication) expect(row.doubleGrants).toBe(0)
        // The window the option closes: a harness whose fault does not lose the lock proves nothing.
        else expect(row.doubleGrants).toBeGreaterThan(0)
        expect(row.stuckAfterRecovery).toBe(0)
      })
    }
  }

  it('a client on the replica gets a LockProviderError that says it is read-only', async () => {
    const client = admin(net.address(replica))
    const error = await redisLockProvider({ client, timeout: '2s' })
      .lock(lockConfiguration({ name: 'on-the-replica', lockAtMostFor: '10s' }))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toContain('the client is connected to a read-only replica')
  })
})

const pgBin = (() => {
  try {
    const v = execFileSync('ls', ['/usr/lib/postgresql'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .sort((a, b) => Number(a) - Number(b))
      .at(-1)
    return v ? `/usr/lib/postgresql/${v}/bin` : undefined
  } catch {
    return undefined
  }
})()

for (const mode of ['async', 'sync'] as const) {
  describe.runIf(namespaces && (pgBin !== undefined || inCI))(
    `PostgreSQL: primary and ${mode === 'sync' ? 'synchronous' : 'asynchronous'} streaming standby`,
    () => {
      const net = new PrivateNetwork(mode === 'sync' ? 3 : 2)
      let dir = ''
      const servers = new Map<string, ChildProcess>()
      const pools: pg.Pool[] = []
      let primary = 'p0'
      let standby = 'p1'
      const bin = (tool: string) => join(pgBin!, tool)

      const startPostgres = (name: string) => {
        servers.set(
          name,
          net.spawn(
            name,
            [
              bin('postgres'),
              '-D',
              join(dir, name),
              '-c',
              `listen_addresses=${net.address(name)}`,
              '-c',
              'unix_socket_directories=',
              '-c',
              'port=5432',
            ],
            {
              dir,
              log: `${name}.log`,
              user: 'postgres',
            },
          ),
        )
      }
      const ready = (name: string) =>
        spawnSync(bin('pg_isready'), ['-q', '-h', net.address(name), '-p', '5432', '-U', 'postgres']).status === 0
      const pool = (name: string) => {
        const p = new pg.Pool({
          host: net.address(name),
          port: 5432,
          user: 'postgres',
          database: 'postgres',
          max: 2,
          connectionTimeoutMillis: 2000,
        })
        p.on('error', () => {})
        pools.push(p)
        return p
      }
      const sql = async (name: string, text: string) => {
        const client = new pg.Client({
          host: net.address(name),
          port: 5432,
          user: 'postgres',
          database: 'postgres',
          connectionTimeoutMillis: 2000,
        })
        client.on('error', () => {})
        await client.connect()
        try {
          return (await client.query(text)).rows
        } finally {
          await client.end().catch(() => {})
        }
      }

      beforeAll(async () => {
        dir = mkdtempSync(join(tmpdir(), `shedlock-ha-pg-${mode}-`))
        chownSync(dir, ...ids('postgres'))
        net.up()
        net.add('p0')
        net.add('p1')
        const asPostgres = { uid: ids('postgres')[0], gid: ids('postgres')[1], stdio: 'ignore' as const, cwd: dir }
        execFileSync(bin('initdb'), ['-D', join(dir, 'p0'), '-U', 'postgres', '--auth=trust', '--no-sync'], asPostgres)
        writeFileSync(
          join(dir, 'p0', 'postgresql.auto.conf'),
          [
            'wal_level = replica',
            'max_wal_senders = 5',
            'hot_standby = on',
            'fsync = off',
            'shared_buffers = 16MB',
            "synchronous_commit = 'on'",
            // Before the clone, so that the standby (promoted later) and every standby rebuilt
            // from it are synchronous topologies too: set on p0 alone, the first failover would
            // leave an asynchronous one.
            ...(mode === 'sync' ? ["synchronous_standby_names = '*'"] : []),
            '',
          ].join('\n'),
        )
        writeFileSync(
          join(dir, 'p0', 'pg_hba.conf'),
          [
            'local all all trust',
            'host all all 10.231.0.0/16 trust',
            'host replication all 10.231.0.0/16 trust',
            '',
          ].join('\n'),
        )
        chownSync(join(dir, 'p0', 'pg_hba.conf'), ...ids('postgres'))
        chownSync(join(dir, 'p0', 'postgresql.auto.conf'), ...ids('postgres'))
        startPostgres('p0')
        await until(
          () => ready('p0'),
          30_000,
          () => `the primary (${tail(join(dir, 'p0.log'))})`,
        )
        execFileSync(
          bin('pg_basebackup'),
          [
            '-h',
            net.address('p0'),
            '-p',
            '5432',
            '-U',
            'postgres',
            '-D',
            join(dir, 'p1'),
            '-R',
            '-X',
            'stream',
            '--no-sync',
          ],
          asPostgres,
        )
        startPostgres('p1')
        await until(
          () => ready('p1'),
          30_000,
          () => `the standby (${tail(join(dir, 'p1.log'))})`,
        )
        await until(
          async () =>
            (await sql('p0', 'SELECT sync_state FROM pg_stat_replication')).some(
              (r) => r.sync_state === (mode === 'sync' ? 'sync' : 'async'),
            ),
          30_000,
          'the standby to stream',
        )
        await sql('p0', postgresSchema())
      }, 120_000)

      afterAll(async () => {
        for (const p of pools) await p.end().catch(() => {})
        await net.down()
        if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
      })

      const fleet = (requireSynchronousStandby: boolean): FleetNode[] =>
        ['a', 'b', 'c'].map((name) => {
          // A pool per node that follows the primary, as a proxy or a DNS name would after a promotion.
          let at = ''
          let provider: ReturnType<typeof postgresLockProvider> | undefined
          return {
            name,
            provider: () => {
              if (at !== primary) {
                at = primary
                provider = postgresLockProvider({ client: pool(primary), requireSynchronousStandby })
              }
              return provider!
            },
          }
        })

      const faults = {
        cutReplication: () => {
          net.cutBetween(standby, primary)
          net.cutBetween(primary, standby)
        },
        killPrimary: async () => {
          // The postmaster and its backends: a backend outlives a killed postmaster.
          net.crash(primary)
          // Both ends: a blackhole route left in the killed node's namespace keeps its rebuilt
          // standby from ever reaching the promoted primary.
          net.heal(standby)
          net.heal(primary)
          // What a failover manager (Patroni, repmgr) does once it has seen the primary die.
          net.exec(standby, [bin('pg_ctl'), 'promote', '-D', join(dir, standby), '-w'], 'postgres')
          await until(
            async () => (await sql(standby, 'SELECT pg_is_in_recovery() AS r'))[0]?.r === false,
            20_000,
            'the promotion',
          )
          const old = primary
          primary = standby
          standby = old
        },
        restore: async () => {
          // The old primary is not rewound (pg_rewind is out of scope): a new standby is cloned from the promoted one.
          const old = standby
          rmSync(join(dir, old), { recursive: true, force: true })
          const asPostgres = { uid: ids('postgres')[0], gid: ids('postgres')[1], stdio: 'ignore' as const, cwd: dir }
          execFileSync(
            bin('pg_basebackup'),
            [
              '-h',
              net.address(primary),
              '-p',
              '5432',
              '-U',
              'postgres',
              '-D',
              join(dir, old),
              '-R',
              '-X',
              'stream',
              '--no-sync',
            ],
            asPostgres,
          )
          startPostgres(old)
          await until(() => ready(old), 30_000, 'the rebuilt standby')
          await until(
            async () =>
              (await sql(primary, 'SELECT sync_state FROM pg_stat_replication')).some(
                (r) => r.sync_state === (mode === 'sync' ? 'sync' : 'async'),
              ),
            30_000,
            'the rebuilt standby to stream',
          )
        },
      }

      for (const safe of [false, true]) {
        // On an asynchronous standby the option refuses every acquisition, whatever the fault: one row shows it.
        for (const beforeReplication of safe && mode === 'async' ? [true] : [true, false]) {
          const option = safe ? 'requireSynchronousStandby' : 'off'
          it(`${option}: ${beforeReplication ? 'primary killed before the lock replicated' : 'primary killed after the lock replicated'}`, async () => {
            const row = await killPrimaryScenario(
              `PostgreSQL ${mode} standby`,
              option,
              fleet(safe),
              faults,
              beforeReplication,
              `pg-${safe}-${beforeReplication}`,
            )
            rows.push(row)
            if (safe || mode === 'sync' || !beforeReplication) expect(row.doubleGrants).toBe(0)
            // The window the option closes: a harness whose fault does not lose the lock proves nothing.
            else expect(row.doubleGrants).toBeGreaterThan(0)
            if (safe && mode === 'async') {
              // By design: no synchronous standby, no lock; every attempt fails with the reason.
              expect(row.grants).toBe(0)
              expect(row.errors).toBe(row.attempts)
            } else expect(row.stuckAfterRecovery).toBe(0)
          })
        }
      }

      it('a pool on the standby gets a LockProviderError that says the server is read-only', async () => {
        const error = await postgresLockProvider({ client: pool(standby) })
          .lock(lockConfiguration({ name: 'on-the-standby', lockAtMostFor: '10s' }))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toContain(
          'the server is read-only (cannot execute INSERT in a read-only transaction)',
        )
      })
    },
  )
}

function ids(user: string): [number, number] {
  const line = execFileSync('getent', ['passwd', user], { encoding: 'utf8' }).trim()
  const [, , uid, gid] = line.split(':')
  return [Number(uid), Number(gid)]
}
