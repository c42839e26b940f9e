// waitForReplicas (replication-safe acquisition) and a client on a replica, against a primary
// and a replica of this file's own, on free ports: the shared Redis on 6379 has no replica.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { type RedisCommands, redisLockProvider } from '../../../src/providers/redis/index.ts'
import { freePort } from '../../helpers/processes.ts'
import { redisOrSkip } from '../../helpers/kv-clients.ts'

// Skips (or fails in CI) like the other Redis tests when no redis-server is installed.
;(await redisOrSkip())?.disconnect()

const config = (name: string) => lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: 0 })
const dir = mkdtempSync(join(tmpdir(), 'shedlock-redis-replication-'))
const children: ChildProcess[] = []
let primaryPort = 0
let replicaPort = 0
let primary: Redis
let replica: Redis

async function startServer(port: number, extra: string[]): Promise<Redis> {
  const child = spawn(
    'redis-server',
    [
      '--bind',
      '127.0.0.1',
      '--port',
      String(port),
      '--dir',
      dir,
      '--dbfilename',
      `${port}.rdb`,
      '--save',
      '',
      ...extra,
    ],
    {
      stdio: 'ignore',
    },
  )
  children.push(child)
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  for (let i = 0; ; i++) {
    try {
      await client.connect()
      await client.ping()
      return client
    } catch (error) {
      if (i > 100) throw error
      client.disconnect()
      await sleep(100)
    }
  }
}

async function linkUp(): Promise<void> {
  await replica.call('REPLICAOF', '127.0.0.1', String(primaryPort))
  for (let i = 0; i < 100; i++) {
    if (String(await replica.info('replication')).includes('master_link_status:up')) return
    await sleep(100)
  }
  throw new Error('the replica did not connect to the primary')
}

beforeAll(async () => {
  primaryPort = await freePort()
  replicaPort = await freePort()
  primary = await startServer(primaryPort, ['--repl-diskless-sync-delay', '0'])
  replica = await startServer(replicaPort, [])
  await linkUp()
}, 30_000)

afterAll(async () => {
  primary?.disconnect()
  replica?.disconnect()
  for (const child of children) child.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

describe('waitForReplicas', () => {
  it('ioredis: an acquisition the replica confirmed is granted, and the replica has the key', async () => {
    const client = new Redis({ port: primaryPort, host: '127.0.0.1' })
    try {
      const provider = redisLockProvider({ client, waitForReplicas: 1, waitForReplicasTimeout: '2s' })
      const lock = await provider.lock(config('confirmed-ioredis'))
      expect(lock).toBeDefined()
      // WAIT returned 1: the replica applied the SET before the lock was handed out.
      expect(await replica.get('job-lock:default:confirmed-ioredis')).toMatch(/^ADDED:/)
      expect(await provider.lock(config('confirmed-ioredis'))).toBeUndefined()
      await lock!.unlock()
    } finally {
      client.disconnect()
    }
  })

  it('node-redis: an acquisition the replica confirmed is granted', async () => {
    const client = createClient({ socket: { port: primaryPort, host: '127.0.0.1' } })
    client.on('error', () => {})
    await client.connect()
    try {
      const provider = redisLockProvider({ client, waitForReplicas: 1 })
      const lock = await provider.lock(config('confirmed-node-redis'))
      expect(lock).toBeDefined()
      expect(await replica.get('job-lock:default:confirmed-node-redis')).toMatch(/^ADDED:/)
      await lock!.unlock()
    } finally {
      await client.close()
    }
  })

  it('an acquisition no replica confirms is given back and rejects: the task would not run', async () => {
    await replica.call('REPLICAOF', 'NO', 'ONE')
    const ioredis = new Redis({ port: primaryPort, host: '127.0.0.1' })
    const nodeRedis = createClient({ socket: { port: primaryPort, host: '127.0.0.1' } })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
    try {
      for (const [client, name] of [
        [ioredis, 'unconfirmed-ioredis'],
        [nodeRedis, 'unconfirmed-node-redis'],
      ] as const) {
        const provider = redisLockProvider({ client, waitForReplicas: 1, waitForReplicasTimeout: '200ms' })
        const error = await provider.lock(config(name)).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toContain(`could not acquire lock "${name}"`)
        expect((error as Error).message).toContain('0 of the 1 replicas of waitForReplicas confirmed it within 200ms')
        // Given back: the name is free again at once, not held until lockAtMostFor.
        for (let i = 0; i < 50 && (await primary.exists(`job-lock:default:${name}`)) === 1; i++) await sleep(20)
        expect(await primary.exists(`job-lock:default:${name}`)).toBe(0)
      }
    } finally {
      ioredis.disconnect()
      await nodeRedis.close()
      await linkUp()
    }
  })

  it('without it, the same acquisition is granted on the primary alone', async () => {
    await replica.call('REPLICAOF', 'NO', 'ONE')
    const client = new Redis({ port: primaryPort, host: '127.0.0.1' })
    try {
      const lock = await redisLockProvider({ client }).lock(config('unreplicated'))
      expect(lock).toBeDefined()
      expect(await replica.exists('job-lock:default:unreplicated')).toBe(0)
      await lock!.unlock()
    } finally {
      client.disconnect()
      await linkUp()
    }
  })

  it('refuses a bad count, a wait not shorter than timeout, and a port without setIfAbsentAndWait', () => {
    const client = new Redis({ port: primaryPort, host: '127.0.0.1', lazyConnect: true })
    expect(() => redisLockProvider({ client, waitForReplicas: -1 })).toThrow(
      /waitForReplicas must be a whole number of replicas/,
    )
    expect(() => redisLockProvider({ client, waitForReplicas: 1.5 })).toThrow(LockConfigurationError)
    expect(() =>
      redisLockProvider({ client, waitForReplicas: 1, timeout: '1s', waitForReplicasTimeout: '1s' }),
    ).toThrow(/waitForReplicasTimeout must be longer than 0ms and shorter than timeout \(1000ms\)/)
    const port: RedisCommands = {
      client: 'mine',
      setIfAbsent: async () => true,
      evalSha: async () => 1,
      eval: async () => 1,
    }
    expect(() => redisLockProvider({ client: port, waitForReplicas: 1 })).toThrow(
      /give your RedisCommands port setIfAbsentAndWait\(\)/,
    )
    expect(() => redisLockProvider({ client: port, waitForReplicas: 0 })).not.toThrow()
    client.disconnect()
  })
})

describe('waitForReplicas with fencingTokens', () => {
  const counter = (name: string) => `:{job-lock:default:${name}}:fence`

  it('the WAIT after the script covers the counter: a confirmed acquisition finds its token on the replica', async () => {
    const ioredis = new Redis({ port: primaryPort, host: '127.0.0.1' })
    const nodeRedis = createClient({ socket: { port: primaryPort, host: '127.0.0.1' } })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
    try {
      for (const [client, name] of [
        [ioredis, 'fenced-ioredis'],
        [nodeRedis, 'fenced-node-redis'],
      ] as const) {
        const provider = redisLockProvider({ client, waitForReplicas: 1, fencingTokens: true })
        for (let i = 1; i <= 3; i++) {
          const lock = await provider.lock(config(name))
          expect(lock?.fencingToken).toBe(BigInt(i))
          // Read at once, on the replica: WAIT returned only once it had the script's writes, both.
          expect(await replica.get(counter(name))).toBe(String(i))
          expect(await replica.get(`job-lock:default:${name}`)).toMatch(/^ADDED:/)
          await lock!.unlock()
        }
      }
    } finally {
      ioredis.disconnect()
      await nodeRedis.close()
    }
  })

  it('an acquisition no replica confirms is given back and rejects; its count is skipped, never handed out', async () => {
    await replica.call('REPLICAOF', 'NO', 'ONE')
    const client = new Redis({ port: primaryPort, host: '127.0.0.1' })
    try {
      const name = 'fenced-unconfirmed'
      const provider = redisLockProvider({
        client,
        waitForReplicas: 1,
        waitForReplicasTimeout: '200ms',
        fencingTokens: true,
      })
      const error = await provider.lock(config(name)).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('0 of the 1 replicas of waitForReplicas confirmed it within 200ms')
      for (let i = 0; i < 50 && (await primary.exists(`job-lock:default:${name}`)) === 1; i++) await sleep(20)
      expect(await primary.exists(`job-lock:default:${name}`)).toBe(0)
      expect(await primary.get(counter(name))).toBe('1')
    } finally {
      client.disconnect()
      await linkUp()
    }
  })

  it('refuses a RedisCommands port without evalAndWait', () => {
    const port: RedisCommands = {
      client: 'mine',
      setIfAbsent: async () => true,
      setIfAbsentAndWait: async () => ({ set: true, replicas: 1 }),
      evalSha: async () => 1,
      eval: async () => 1,
    }
    expect(() => redisLockProvider({ client: port, waitForReplicas: 1, fencingTokens: true })).toThrow(
      /waitForReplicas with fencingTokens needs a client that can send EVAL and WAIT on one connection.*give your RedisCommands port evalAndWait\(\)/,
    )
    expect(() => redisLockProvider({ client: port, waitForReplicas: 1 })).not.toThrow()
  })
})

describe('waitForReplicas on an ioredis Cluster whose key moved (a failover)', () => {
  // ioredis does not redirect a Cluster pipeline whose first reply is MOVED and whose WAIT
  // answered: a stand-in Cluster shows the provider follows the move and sends it once more.
  it('follows the MOVED through the Cluster (a keyed command), then sends the pipeline once more', async () => {
    let moved = true
    const calls: string[][] = []
    const pipeline = {
      set: () => pipeline,
      eval: () => pipeline,
      wait: () => pipeline,
      exec: async () =>
        moved
          ? [
              [new Error('MOVED 3939 10.231.9.10:6379'), null],
              [null, 0],
            ]
          : [
              [null, 'OK'],
              [null, 1],
            ],
    }
    const cluster = {
      isCluster: true,
      set: async () => 'OK',
      evalsha: async () => 1,
      eval: async () => 1,
      pipeline: () => pipeline,
      call: async (...args: string[]) => {
        calls.push(args)
        moved = false
        return 0
      },
    }
    const provider = redisLockProvider({ client: cluster as never, waitForReplicas: 1 })
    const lock = await provider.lock(config('cluster-moved'))
    expect(lock).toBeDefined()
    expect(calls.map((c) => c[0])).toEqual(['EXISTS'])
  })
})

describe('a client connected to a replica', () => {
  it('rejects with a LockProviderError that says it is a read-only replica, for ioredis and node-redis', async () => {
    const ioredis = new Redis({ port: replicaPort, host: '127.0.0.1' })
    const nodeRedis = createClient({ socket: { port: replicaPort, host: '127.0.0.1' } })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
    try {
      for (const client of [ioredis, nodeRedis]) {
        const error = await redisLockProvider({ client })
          .lock(config('on-a-replica'))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toMatch(
          /could not acquire lock "on-a-replica": the client is connected to a read-only replica \(READONLY .*\); point it at the master/,
        )
      }
    } finally {
      ioredis.disconnect()
      await nodeRedis.close()
    }
  })
})
