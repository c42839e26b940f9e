// The topology suite (npm run test:ha), MariaDB primary + replica, asynchronous and
// semi-synchronous (built into MariaDB 10.3+): each node in a network namespace of its own
// (support/netns.ts), the primary's machine crashed while a fleet of nodes takes one lock, the
// replica promoted as MaxScale or orchestrator would. The rows go to test/ha/results/.
import { execFile } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../src/index.ts'
import { mysqlLockProvider, mysqlSchema } from '../../src/providers/mysql/index.ts'
import { inCI } from '../helpers/backends.ts'
import { fullMatrix, ids, runs, until } from './support/common.ts'
import { canBuildNamespaces, PrivateNetwork, tail } from './support/netns.ts'
import { type Row, saveRows } from './support/results.ts'
import { type Fault, type FleetNode, failoverScenario } from './support/scenario.ts'

const rows: Row[] = []
const skipped: string[] = []
const namespaces = canBuildNamespaces()
if (!namespaces && inCI) throw new Error('the topology suite needs root and `ip netns` (it builds network namespaces)')
afterAll(() => saveRows('mariadb', rows, skipped))

const run = promisify(execFile)
const hasMariadb = runs('mariadbd', ['--version']) || runs('/usr/sbin/mariadbd', ['--version'])
const mariadbd = runs('mariadbd', ['--version']) ? 'mariadbd' : '/usr/sbin/mariadbd'

for (const mode of ['async', 'semisync'] as const) {
  describe.runIf(namespaces && (hasMariadb || inCI))(
    `MariaDB: primary and ${mode === 'semisync' ? 'semi-synchronous' : 'asynchronous'} replica`,
    () => {
      const net = new PrivateNetwork(mode === 'semisync' ? 5 : 4)
      let dir = ''
      let primary = 'm0'
      let replica = 'm1'
      const pools: mysql.Pool[] = []
      // A new server id for every data folder: a replica skips the events of its own id, so a
      // rebuilt node under its old id skipped the users and the table it had created as primary.
      const serverIds: Record<string, number> = {}
      let lastServerId = 0

      // A fresh data folder (the crashed primary is rebuilt from nothing, then fed the promoted
      // replica's binary log from its start: it may hold a transaction the replica never got).
      // Every command is asynchronous: restore() runs while the fleet takes locks, and a
      // synchronous one (mariadb-install-db takes seconds) stopped the fleet's attempts meanwhile,
      // so that the lost lock had expired before anyone asked for it.
      const install = async (name: string) => {
        serverIds[name] = ++lastServerId
        rmSync(join(dir, name), { recursive: true, force: true })
        await run('mariadb-install-db', [
          '--no-defaults',
          `--datadir=${join(dir, name)}`,
          '--user=mysql',
          '--auth-root-authentication-method=normal',
          '--skip-test-db',
          '--innodb-log-file-size=4M',
        ])
      }
      const start = (name: string) => {
        net.spawn(
          name,
          [
            mariadbd,
            '--no-defaults',
            '--user=mysql',
            `--datadir=${join(dir, name)}`,
            `--socket=${join(dir, `${name}.sock`)}`,
            `--pid-file=${join(dir, `${name}.pid`)}`,
            `--bind-address=${net.address(name)}`,
            '--port=3306',
            `--server-id=${serverIds[name]}`,
            `--log-bin=${join(dir, name, 'binlog')}`,
            '--log-slave-updates=ON',
            '--binlog-format=ROW',
            '--innodb-log-file-size=4M',
            '--innodb-buffer-pool-size=32M',
            '--innodb-flush-log-at-trx-commit=2',
            '--skip-name-resolve',
            // Either node may be primary or replica after a failover: both sides on, on both.
            ...(mode === 'semisync'
              ? [
                  '--rpl-semi-sync-master-enabled=ON',
                  '--rpl-semi-sync-slave-enabled=ON',
                  // Lossless: the commit waits for the replica before it is visible.
                  '--rpl-semi-sync-master-wait-point=AFTER_SYNC',
                  // How long a commit waits before MariaDB goes on asynchronously.
                  '--rpl-semi-sync-master-timeout=500',
                ]
              : []),
          ],
          { dir, log: `${name}.log` },
        )
      }
      const local = async (name: string, statements: string) =>
        (await run('mariadb', ['--no-defaults', `--socket=${join(dir, `${name}.sock`)}`, '-uroot', '-e', statements]))
          .stdout
      const up = (name: string) =>
        local(name, 'SELECT 1').then(
          () => true,
          () => false,
        )
      const follow = (name: string, source: string) =>
        local(
          name,
          `SET GLOBAL read_only = ON; CHANGE MASTER TO MASTER_HOST = '${net.address(source)}', MASTER_PORT = 3306, MASTER_USER = 'repl', MASTER_CONNECT_RETRY = 1, MASTER_USE_GTID = slave_pos; START SLAVE`,
        )
      const replicaState = (name: string) => local(name, 'SHOW SLAVE STATUS\\G')
      const semiSyncOn = (name: string) => local(name, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'")

      const pool = (name: string) => {
        const p = mysql.createPool({
          host: net.address(name),
          port: 3306,
          user: 'app',
          database: 'test',
          connectionLimit: 2,
          connectTimeout: 2000,
        })
        pools.push(p)
        return p
      }

      beforeAll(async () => {
        dir = mkdtempSync(join(tmpdir(), `shedlock-ha-mariadb-${mode}-`))
        chownSync(dir, ...ids('mysql'))
        net.up()
        net.add('m0')
        net.add('m1')
        await install('m0')
        await install('m1')
        start('m0')
        start('m1')
        await until(
          async () => (await up('m0')) && (await up('m1')),
          60_000,
          () => `both servers (${tail(join(dir, 'm0.log'), 5)})`,
        )
        // In the primary's binary log from its start, so the replica (and every node rebuilt
        // later) gets the users, the database and the table by replication.
        await local(
          'm0',
          [
            "CREATE USER IF NOT EXISTS 'repl'@'%'",
            "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'",
            // Not root: read_only does not stop a user with READ_ONLY ADMIN (root has it).
            "CREATE USER IF NOT EXISTS 'app'@'%'",
            "GRANT ALL ON test.* TO 'app'@'%'",
            // The semi-sync status requireSemiSync reads.
            "GRANT BINLOG MONITOR ON *.* TO 'app'@'%'",
            'CREATE DATABASE IF NOT EXISTS test',
            `USE test; ${mysqlSchema()}`,
          ].join('; '),
        )
        await follow('m1', 'm0')
        await until(
          async () => /Slave_SQL_Running_State: Slave has read all relay log/.test(await replicaState('m1')),
          30_000,
          'the replica to catch up',
        )
        if (mode === 'semisync')
          await until(async () => (await semiSyncOn('m0')).includes('ON'), 30_000, 'semi-sync to be on on the primary')
      }, 120_000)

      afterAll(async () => {
        // Bounded: a pool still waiting on a statement to the vanished primary ends only when it does.
        await Promise.race([Promise.all(pools.map((p) => p.end().catch(() => {}))), sleep(5_000)])
        await net.down()
        if (dir && !process.env.SHEDLOCK_HA_KEEP) rmSync(dir, { recursive: true, force: true })
      })

      const fleet = (requireSemiSync: boolean): FleetNode[] =>
        ['a', 'b', 'c'].map((name) => {
          // A pool per node that follows the primary, as a proxy (MaxScale, ProxySQL) would.
          let at = ''
          let provider: ReturnType<typeof mysqlLockProvider> | undefined
          return {
            name,
            provider: () => {
              if (at !== primary) {
                at = primary
                provider = mysqlLockProvider({ client: pool(primary), requireSemiSync })
              }
              return provider!
            },
          }
        })

      const killPrimary = (beforeReplication: boolean): Fault => ({
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
          // What a failover manager does once it has seen the primary die: the replica applies
          // what it received, stops replicating and takes writes.
          await local(replica, 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF')
          const old = primary
          primary = replica
          replica = old
        },
        restore: async () => {
          const old = replica
          await install(old)
          start(old)
          await until(
            () => up(old),
            60_000,
            () => `the rebuilt replica (${tail(join(dir, `${old}.log`), 5)})`,
          )
          await follow(old, primary)
          await until(
            async () => /Slave_SQL_Running_State: Slave has read all relay log/.test(await replicaState(old)),
            30_000,
            'the rebuilt replica to catch up',
          )
          if (mode === 'semisync')
            await until(async () => (await semiSyncOn(primary)).includes('ON'), 30_000, 'semi-sync to be on again')
        },
      })

      const topology = `MariaDB ${mode === 'semisync' ? 'semi-sync' : 'async'} replica`
      for (const safe of [false, true]) {
        // On an asynchronous replica the option refuses every acquisition: one row shows it, in
        // the full matrix. By default: the fault that loses the lock, where the option matters.
        const cases = safe && mode === 'async' ? (fullMatrix ? [true] : []) : fullMatrix ? [true, false] : [true]
        for (const beforeReplication of cases) {
          const option = safe ? 'requireSemiSync' : 'off'
          const fault = beforeReplication ? 'primary killed, lock not replicated' : 'primary killed, lock replicated'
          it(`${option}: ${fault}`, async () => {
            const row = await failoverScenario(
              { topology, option, fault },
              fleet(safe),
              killPrimary(beforeReplication),
              `mariadb-${safe}-${beforeReplication}`,
            )
            rows.push(row)
            // Semi-sync alone does not close the window: after rpl_semi_sync_master_timeout the
            // primary commits without the replica, and the lock is granted anyway.
            if (safe || !beforeReplication) expect(row.doubleGrantsStore).toBe(0)
            else expect(row.doubleGrantsStore).toBeGreaterThan(0)
            if (safe && mode === 'async') {
              expect(row.grants).toBe(0)
              expect(row.errors).toBe(row.attempts)
            } else expect(row.stuckAfterRecovery).toBe(0)
          })
        }
      }

      it('a pool on the replica gets a LockProviderError that says the server is read-only', async () => {
        const error = await mysqlLockProvider({ client: pool(replica) })
          .lock(lockConfiguration({ name: 'on-the-replica', lockAtMostFor: '10s' }))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toContain('the server is read-only')
      })
    },
  )
}
