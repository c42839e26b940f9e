// The topology suite (npm run test:ha), PostgreSQL primary + streaming standby, asynchronous and
// synchronous: each node in a network namespace of its own (support/netns.ts), the primary's
// machine crashed while a fleet of nodes takes one lock, the standby promoted as Patroni or
// repmgr would. The rows go to test/ha/results/ (support/results.ts).
import { type ChildProcess, execFile, execFileSync, spawnSync } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../src/providers/postgres/index.ts'
import { inCI } from '../helpers/backends.ts'
import { fullMatrix, ids, until } from './support/common.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario, slotScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('postgres', rows, skipped))

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
          // As docs/providers/postgres.md advises, below the provider's timeout (10 s): a
          // connection to the vanished primary is dropped, not kept busy until the kernel gives
          // its socket up (which also held pool.end() below for minutes).
          query_timeout: 8000,
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
        // Bounded: a pool still waiting on a statement to the vanished primary ends only when it does.
        await Promise.race([Promise.all(pools.map((p) => p.end().catch(() => {}))), sleep(5_000)])
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

      const killPrimary = (beforeReplication: boolean): Fault => ({
        prepare: beforeReplication
          ? () => {
              net.cutBetween(standby, primary)
              net.cutBetween(primary, standby)
            }
          : undefined,
        strike: async () => {
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
          // Asynchronous: the fleet takes locks meanwhile (a synchronous clone would stop it).
          await promisify(execFile)(
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
            { uid: ids('postgres')[0], gid: ids('postgres')[1], cwd: dir },
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
      })

      const topology = `PostgreSQL ${mode} standby`
      for (const safe of [false, true]) {
        // On an asynchronous standby the option refuses every acquisition, whatever the fault: one
        // row shows it. By default: the fault that loses the lock, where the option matters.
        const cases =
          safe && mode === 'async' ? [true] : fullMatrix ? [true, false] : mode === 'sync' && !safe ? [] : [true]
        for (const beforeReplication of cases) {
          const option = safe ? 'requireSynchronousStandby' : 'off'
          const fault = beforeReplication ? 'primary killed, lock not replicated' : 'primary killed, lock replicated'
          it(`${option}: ${fault}`, async () => {
            const row = await failoverScenario(
              { topology, option, fault },
              fleet(safe),
              killPrimary(beforeReplication),
              `pg-${safe}-${beforeReplication}`,
            )
            rows.push(row)
            if (safe || mode === 'sync' || !beforeReplication) expect(row.doubleGrantsStore).toBe(0)
            // The window the option closes: a harness whose fault does not lose the lock proves nothing.
            else expect(row.doubleGrantsStore).toBeGreaterThan(0)
            if (safe && mode === 'async') {
              // By design: no synchronous standby, no lock; every attempt fails with the reason.
              expect(row.grants).toBe(0)
              expect(row.errors).toBe(row.attempts)
            } else expect(row.stuckAfterRecovery).toBe(0)
          })
        }
      }

      // Slot runs: asynchronous and off shows the claims lost with the primary; synchronous with
      // the option, that none is.
      const slotSafe = mode === 'sync'
      it(`${slotSafe ? 'requireSynchronousStandby' : 'off'}: slot runs, primary killed, claims not replicated`, async () => {
        const row = await slotScenario(
          {
            topology,
            option: slotSafe ? 'requireSynchronousStandby' : 'off',
            fault: 'slot runs, primary killed, claims not replicated',
          },
          fleet(slotSafe),
          killPrimary(true),
          `pg-slots-${mode}`,
        )
        rows.push(row)
        // Late nodes find no claim for the slots the promoted standby never received and run them again.
        if (slotSafe) expect(row.duplicateSlotRuns).toBe(0)
        else expect(row.duplicateSlotRuns).toBeGreaterThan(0)
      })

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
