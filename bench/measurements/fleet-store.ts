// The fleet measurement's view of the servers: a space of its own for each contender (a
// PostgreSQL database, a Redis key prefix), and what the server did meanwhile (statements or
// commands, CPU time of the processes serving it).
import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import pg from 'pg'
import { postgresRunsSchema, postgresSchema } from '../../src/providers/postgres/index.ts'
import type { FleetContenderId, FleetStore } from './fleet-plan.ts'

/** Counters of the server at one instant. */
export interface ServerSample {
  /** PostgreSQL: transactions committed or rolled back in the database; Redis: commands executed (all clients, scripts' commands included). */
  readonly ops: number
  /** CPU time (user + system, ms) of the server processes serving the space: the database's backends, or redis-server. */
  readonly cpuMs: number
}

/** A contender's space on the server, and how to read the server's counters. */
export interface FleetSpace {
  /** What the replicas connect to. */
  readonly url: string
  /** Names of the space: key prefix, schema, environment. */
  readonly space: string
  sample(): Promise<ServerSample>
  /** Removes the space. */
  drop(): Promise<void>
}

/** A connection to the server, for the whole measurement. */
export interface FleetServer {
  readonly store: FleetStore
  readonly version: string
  /** The space for one contender at one size; `name` is short, `[a-z0-9_]`. */
  space(name: string, contender: FleetContenderId): Promise<FleetSpace>
  close(): Promise<void>
}

const CLOCK_TICKS_PER_SECOND = 100

/** utime + stime of a process in ms, from /proc; undefined once it has exited. */
function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND
  } catch {
    return undefined
  }
}

/** PostgreSQL at `url`: each contender gets a database of its own, so its statistics and backends are its own. */
export async function postgresFleetServer(url: string): Promise<FleetServer> {
  const admin = new pg.Pool({ connectionString: url, max: 2 })
  const version = String((await admin.query('SHOW server_version')).rows[0]?.server_version)
  return {
    store: 'postgres',
    version: `PostgreSQL ${version}`,
    async space(name, contender) {
      const database = `fleet_${name}`
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      await admin.query(`CREATE DATABASE ${database}`)
      const dbUrl = new URL(url)
      dbUrl.pathname = `/${database}`
      if (contender === 'shedlock') {
        const setup = new pg.Client({ connectionString: dbUrl.toString() })
        await setup.connect()
        try {
          await setup.query(postgresSchema({}))
          await setup.query(postgresRunsSchema({}))
        } finally {
          await setup.end()
        }
      }
      // A backend's CPU is kept after it exits, so that a pool that replaces a connection loses nothing.
      const cpuByPid = new Map<number, number>()
      return {
        url: dbUrl.toString(),
        space: `fleet_${name}`,
        async sample() {
          const { rows } = await admin.query<{ ops: string }>(
            'SELECT xact_commit + xact_rollback AS ops FROM pg_stat_database WHERE datname = $1',
            [database],
          )
          const pids = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [
            database,
          ])
          for (const { pid } of pids.rows) {
            const cpu = processCpuMs(pid)
            if (cpu !== undefined) cpuByPid.set(pid, cpu)
          }
          let cpuMs = 0
          for (const cpu of cpuByPid.values()) cpuMs += cpu
          return { ops: Number(rows[0]?.ops ?? 0), cpuMs }
        },
        async drop() {
          await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
        },
      }
    },
    close: () => admin.end(),
  }
}

/** Commands executed by the server so far, from INFO commandstats (scripts' own commands included). */
function commandsOf(info: string): number {
  let calls = 0
  for (const match of info.matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) calls += Number(match[1])
  return calls
}

/** Redis at `url`: each contender gets a key prefix of its own; the server's counters are the whole server's. */
export async function redisFleetServer(url: string): Promise<FleetServer> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 })
  const info = await client.info('server')
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown'
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1])
  return {
    store: 'redis',
    version: `Redis ${version}`,
    async space(name) {
      const space = `fleet-${name}`
      return {
        url,
        space,
        async sample() {
          // The INFO itself counts: one command per sample, negligible beside a tick's.
          return { ops: commandsOf(await client.info('commandstats')), cpuMs: processCpuMs(pid) ?? Number.NaN }
        },
        async drop() {
          let cursor = '0'
          do {
            const [next, keys] = await client.scan(cursor, 'MATCH', `*${space}*`, 'COUNT', 1000)
            cursor = next
            if (keys.length > 0) await client.del(...keys)
          } while (cursor !== '0')
        },
      }
    },
    async close() {
      await client.quit()
    },
  }
}
