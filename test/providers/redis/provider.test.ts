import type { Duration } from '../../../src/core/duration.ts'
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { createHash, randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { Cluster, Redis } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import type { LockInspector } from '../../../src/core/lock-inspector.ts'
import {
  fromIoredis,
  fromNodeRedis,
  type RedisCommands,
  redisLockInspector,
  redisLockProvider,
  toRedisCommands,
} from '../../../src/providers/redis/index.ts'
import { lockInspectorSuite, lockProviderSuite } from '../../../src/testing/index.ts'
import { REDIS_URL, redisOrSkip } from '../../helpers/kv-clients.ts'
import { assertFailsClosed } from '../../helpers/fail-closed.ts'
import { registerInspectorSuite, registerSuite } from '../../helpers/register-suite.ts'

const url = REDIS_URL
// A raw connection that reads the store behind the providers' backs.
const raw = await redisOrSkip()

const run = promisify(execFile)
const config = (name: string, lockAtMostFor: Duration = '5m', lockAtLeastFor: Duration = 0) =>
  lockConfiguration({ name, lockAtMostFor, lockAtLeastFor })
const JAVA_VALUE = /^ADDED:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z@/

/** Polls `check` until it holds or `ms` pass. */
async function eventually(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

/** A TCP port free right now on 127.0.0.1 (and, with `withBus`, port + 10000 too, for a Cluster bus). */
async function freePort(withBus = false): Promise<number> {
  const tryListen = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer()
      server.once('error', () => resolve(false))
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
    })
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000)
    if ((await tryListen(port)) && (!withBus || (await tryListen(port + 10_000)))) return port
  }
  throw new Error('no free port found')
}

async function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
  })
}

/** A redis-server of our own, on its own port and directory, without persistence. */
class OwnRedis {
  readonly port: number
  readonly dir: string
  readonly extra: string[]
  private child: ChildProcess | undefined
  constructor(port: number, dir: string, extra: string[] = []) {
    this.port = port
    this.dir = dir
    this.extra = extra
  }
  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--bind',
        '127.0.0.1',
        '--port',
        String(this.port),
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        ...this.extra,
      ],
      { stdio: 'ignore' },
    )
    this.child = child
    await eventually(
      async () => child.exitCode === null && (await answersPing(this.port)),
      15_000,
      `redis-server on port ${this.port}`,
    )
  }
  async stop(): Promise<void> {
    const child = this.child
    this.child = undefined
    if (!child || child.exitCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
}

describe.skipIf(!raw)('redis', () => {
  const inspector = raw!
  // The suites use their own environment, so that afterAll can delete every key they leave.
  const environment = `vitest-${process.pid}-${randomUUID().slice(0, 8)}`
  // Created in beforeAll, so that a skipped run opens no connection.
  let io: Redis
  let nodeRedis: ReturnType<typeof createClient>
  const closeLater: Array<() => unknown> = []
  const javaKeys: string[] = []

  beforeAll(async () => {
    io = new Redis(url)
    io.on('error', () => {})
    nodeRedis = createClient({ url })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
  })
  afterAll(async () => {
    for (const close of closeLater) await close()
    for await (const keys of inspector.scanStream({ match: `*:${environment}*:*`, count: 500 }))
      if ((keys as string[]).length > 0) await inspector.del(...(keys as string[]))
    if (javaKeys.length > 0) await inspector.del(...javaKeys)
    io.disconnect()
    nodeRedis.destroy()
    inspector.disconnect()
  })

  const keyOf = (name: string, env = environment, prefix = 'job-lock'): string => `${prefix}:${env}:${name}`
  // Java's Redis contract: locked = the key exists; unlocked = the key is absent.
  const exists = async (key: string): Promise<boolean> => (await inspector.exists(key)) === 1

  const unreachableIoredis = () => {
    const client = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    client.on('error', () => {})
    closeLater.push(() => client.disconnect())
    return redisLockProvider({ client, environment })
  }

  describe('ioredis', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => redisLockProvider({ client: io, environment, fencingTokens: true }),
        isLocked: (name) => exists(keyOf(name)),
        deleteRecord: async (name) => {
          await inspector.del(keyOf(name))
        },
        unreachableProvider: unreachableIoredis,
        extensible: true,
        slots: { inspector: true, paired: true },
        fencing: true,
        // No maxNameLength: keys hold 512 MiB, more than a JavaScript string of ASCII characters
        // can (V8 strings end at 2^29 - 24 characters); "name length" below tests the limit.
      }),
    )
  })

  // The default, a plain SET … NX PX: no counter, no token.
  describe('ioredis without fencingTokens', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => redisLockProvider({ client: io, environment }),
        isLocked: (name) => exists(keyOf(name)),
        deleteRecord: async (name) => {
          await inspector.del(keyOf(name))
        },
        unreachableProvider: unreachableIoredis,
        extensible: true,
        slots: { inspector: true, paired: true },
        fencing: false,
      }),
    )
  })

  describe('node-redis', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => redisLockProvider({ client: nodeRedis, environment, fencingTokens: true }),
        isLocked: (name) => exists(keyOf(name)),
        deleteRecord: async (name) => {
          await inspector.del(keyOf(name))
        },
        // Never connected: node-redis rejects every command with "The client is closed".
        unreachableProvider: () =>
          redisLockProvider({ client: createClient({ url: 'redis://127.0.0.1:1' }), environment }),
        extensible: true,
        slots: { inspector: true, paired: true },
        fencing: true,
      }),
    )
  })

  describe('Java ShedLock storage format', () => {
    const javaKey = (name: string): string => {
      const key = `job-lock:default:${name}`
      javaKeys.push(key)
      return key
    }
    const javaValue = (): string => `ADDED:${new Date().toISOString()}@java-host:${randomUUID()}`

    it('writes job-lock:default:<name> with ADDED:<iso>@<host>:<pid>:<random> and a PX expiry', async () => {
      for (const client of [io, nodeRedis]) {
        const name = `format-${randomUUID()}`
        const key = javaKey(name)
        const lock = await redisLockProvider({ client }).lock(config(name, '1m'))
        assert.ok(lock)
        const value = await inspector.get(key)
        expect(value).toMatch(
          new RegExp(
            `${JAVA_VALUE.source}${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${process.pid}:[0-9a-f]{12}$`,
          ),
        )
        const iso = value!.slice('ADDED:'.length, value!.indexOf('@'))
        expect(new Date(iso).toISOString()).toBe(iso)
        expect(Math.abs(Date.parse(iso) - Date.now())).toBeLessThan(10_000)
        const pttl = await inspector.pttl(key)
        expect(pttl).toBeGreaterThan(50_000)
        expect(pttl).toBeLessThanOrEqual(60_000)
        await lock.unlock()
        expect(await exists(key)).toBe(false)
      }
    })

    it('respects a lock written by Java ShedLock and takes over once its PX has passed', async () => {
      const held = `java-held-${randomUUID()}`
      const expiring = `java-expiring-${randomUUID()}`
      const value = javaValue()
      await inspector.set(javaKey(held), value, 'PX', 60_000)
      await inspector.set(javaKey(expiring), javaValue(), 'PX', 1_500)
      for (const client of [io, nodeRedis]) {
        const provider = redisLockProvider({ client })
        expect(await provider.lock(config(held))).toBeUndefined()
        expect(await provider.lock(config(expiring))).toBeUndefined()
      }
      expect(await inspector.get(`job-lock:default:${held}`)).toBe(value)
      await eventually(
        async () => !(await exists(`job-lock:default:${expiring}`)),
        10_000,
        "the Java lock's PX to pass",
      )
      const lock = await redisLockProvider({ client: io }).lock(config(expiring))
      assert.ok(lock)
      expect(await inspector.get(`job-lock:default:${expiring}`)).toMatch(JAVA_VALUE)
      await lock.unlock()
      expect(await exists(`job-lock:default:${expiring}`)).toBe(false)
    })

    it("never releases or extends a Java holder's key, even with the same name", async () => {
      const name = `java-after-expiry-${randomUUID()}`
      const key = javaKey(name)
      const lock = await redisLockProvider({ client: io }).lock(config(name, 200))
      assert.ok(lock)
      await sleep(500)
      // Java took the expired lock over.
      const value = javaValue()
      expect(await inspector.set(key, value, 'PX', 60_000, 'NX')).toBe('OK')
      await lock.unlock()
      expect(await inspector.get(key)).toBe(value)
      expect(await inspector.pttl(key)).toBeGreaterThan(50_000)
    })

    it('extend keeps the value and moves the PX; unlock within lockAtLeastFor leaves the key to expire by itself', async () => {
      const name = `extend-${randomUUID()}`
      const key = javaKey(name)
      const lock = await redisLockProvider({ client: nodeRedis }).lock(config(name, 2_000))
      assert.ok(lock && 'extend' in lock)
      const value = await inspector.get(key)
      const extended = await lock.extend('1m', '30s')
      assert.ok(extended)
      expect(await inspector.get(key)).toBe(value)
      expect(await inspector.pttl(key)).toBeGreaterThan(50_000)
      await extended.unlock()
      expect(await inspector.get(key)).toBe(value)
      const pttl = await inspector.pttl(key)
      expect(pttl).toBeGreaterThan(20_000)
      expect(pttl).toBeLessThanOrEqual(30_000)
    })
  })

  // Java ShedLock's AbstractRedisSafeUpdateIntegrationTest, with shorter sleeps.
  describe('stale holders (Java safe update)', () => {
    for (const [label, client] of [
      ['ioredis', () => io],
      ['node-redis', () => nodeRedis],
    ] as const) {
      it(`${label}: unlocking after expiration is a no-op`, async () => {
        const name = `stale-unlock-${randomUUID()}`
        const provider = redisLockProvider({ client: client(), environment })
        const stale = await provider.lock(config(name, 300))
        assert.ok(stale)
        await sleep(800)
        const fresh = await provider.lock(config(name))
        assert.ok(fresh)
        const value = await inspector.get(keyOf(name))
        await stale.unlock()
        expect(await inspector.get(keyOf(name))).toBe(value)
        await fresh.unlock()
        expect(await exists(keyOf(name))).toBe(false)
      })

      it(`${label}: extending after expiration is a no-op`, async () => {
        const name = `stale-extend-${randomUUID()}`
        const provider = redisLockProvider({ client: client(), environment })
        const stale = await provider.lock(config(name, 300))
        assert.ok(stale && 'extend' in stale)
        await sleep(800)
        expect(await provider.lock(config(name, 300))).toBeDefined()
        expect(await stale.extend('10s', 0)).toBeUndefined()
        expect(await inspector.pttl(keyOf(name))).toBeLessThanOrEqual(300)
        await sleep(800)
        expect(await exists(keyOf(name))).toBe(false)
      })
    }
  })

  describe('name length', () => {
    it("a key over Redis's 512 MiB (proto-max-bulk-len) fails fast with LockConfigurationError, and locks on the same connection are not disturbed", async () => {
      // Its own connection: Redis closes a connection that sends a longer bulk string.
      const own = new Redis(url)
      own.on('error', () => {})
      try {
        const locks = redisLockProvider({ client: own, environment })
        // 2^28 two-byte characters in UTF-8: 512 MiB for the name alone.
        const tooLong = 'é'.repeat(2 ** 28)
        const other = `other-${randomUUID()}`
        const [refused, concurrent] = await Promise.allSettled([locks.lock(config(tooLong)), locks.lock(config(other))])
        assert.equal(refused.status, 'rejected')
        expect(refused.reason).toBeInstanceOf(LockConfigurationError)
        expect((refused.reason as Error).message).toMatch(/536,?87\d,?\d{3} bytes/)
        assert.equal(concurrent.status, 'fulfilled')
        assert.ok(concurrent.value, 'a lock on another name, sent alongside, failed')
        await concurrent.value.unlock()
        const next = await locks.lock(config(`next-${randomUUID()}`))
        assert.ok(next, 'a lock on another name right after failed')
        await next.unlock()
      } finally {
        own.disconnect()
      }
    }, 60_000)
  })

  describe('options', () => {
    it('a client double whose commands answer with plain values, not promises, takes and releases a lock', async () => {
      // The shape of an ioredis client, as a unit test of an app might fake it.
      const keys = new Map<string, string>()
      const double = {
        isCluster: false,
        set: (key: string, value: string) => {
          if (keys.has(key)) return null
          keys.set(key, value)
          return 'OK'
        },
        evalsha: (_sha: string, _keys: number, key: string, value: string) =>
          keys.get(key) === value ? Number(keys.delete(key)) : 0,
        eval: () => 0,
      }
      const provider = redisLockProvider({ client: double as never, environment })
      const lock = await provider.lock(config('double'))
      assert.ok(lock)
      expect(await provider.lock(config('double'))).toBeUndefined()
      await lock.unlock()
      expect(keys.size).toBe(0)
    })

    it('environment and keyPrefix select the key; different environments do not exclude each other', async () => {
      const name = `options-${randomUUID()}`
      const other = `${environment}b`
      const a = await redisLockProvider({ client: io, environment }).lock(config(name))
      const b = await redisLockProvider({ client: nodeRedis, environment: other }).lock(config(name))
      const prefix = `my-app-${process.pid}`
      const c = await redisLockProvider({ client: io, environment, keyPrefix: prefix, lockedBy: 'ops-box' }).lock(
        config(name),
      )
      assert.ok(a && b && c)
      expect(await exists(keyOf(name))).toBe(true)
      expect(await exists(keyOf(name, other))).toBe(true)
      expect(await inspector.get(keyOf(name, environment, prefix))).toMatch(
        new RegExp(`${JAVA_VALUE.source}ops-box:${process.pid}:[0-9a-f]{12}$`),
      )
      expect(await redisLockProvider({ client: io, environment: other }).lock(config(name))).toBeUndefined()
      for (const lock of [a, b, c]) await lock.unlock()
      for (const key of [keyOf(name), keyOf(name, other), keyOf(name, environment, prefix)])
        expect(await exists(key)).toBe(false)
    })

    it('rejects bad options with LockConfigurationError before touching Redis', () => {
      const bad: Array<Record<string, unknown>> = [
        { keyPrefix: '' },
        { keyPrefix: 'a:b' },
        { keyPrefix: 7 },
        { environment: '' },
        { environment: 'prod:eu' },
        { environment: null },
        { lockedBy: '' },
        { lockedBy: '  ' },
        { timeout: 0 },
        { timeout: 'soon' },
      ]
      for (const options of bad) {
        expect(() => redisLockProvider({ client: io, ...options } as never), JSON.stringify(options)).toThrow(
          LockConfigurationError,
        )
      }
      expect(() => redisLockProvider({ client: io, environment: 'a:b' })).toThrow(
        /environment must be a non-empty string without ':'/,
      )
      for (const client of [undefined, null, {}, { set() {} }, 'redis://127.0.0.1']) {
        expect(() => redisLockProvider({ client } as never), String(client)).toThrow(LockConfigurationError)
      }
      expect(() => redisLockProvider(undefined as never)).toThrow(LockConfigurationError)
      expect(() => fromIoredis({} as never)).toThrow(/no set\(\), evalsha\(\), eval\(\)/)
      expect(() => fromNodeRedis({ set() {} } as never)).toThrow(LockConfigurationError)
    })

    it('recognises ioredis and node-redis clients and clusters by shape, and passes a RedisCommands port through', () => {
      const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
      const nodeCluster = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })
      expect(toRedisCommands(io).client).toBe('ioredis')
      expect(toRedisCommands(cluster).client).toBe('ioredis')
      expect(toRedisCommands(nodeRedis).client).toBe('node-redis')
      expect(toRedisCommands(nodeCluster).client).toBe('node-redis')
      const port = fromNodeRedis(nodeRedis)
      expect(toRedisCommands(port)).toBe(port)
      cluster.disconnect()
    })

    it("an ioredis client's keyPrefix applies to the SET and to the scripts alike", async () => {
      const prefixed = new Redis(url, { keyPrefix: `app-${process.pid}:` })
      prefixed.on('error', () => {})
      try {
        const name = `client-prefix-${randomUUID()}`
        const key = `app-${process.pid}:${keyOf(name)}`
        const lock = await redisLockProvider({ client: prefixed, environment }).lock(config(name, '1m'))
        assert.ok(lock && 'extend' in lock)
        expect(await exists(key)).toBe(true)
        const extended = await lock.extend('2m', 0)
        assert.ok(extended)
        expect(await inspector.pttl(key)).toBeGreaterThan(60_000)
        await extended.unlock()
        expect(await exists(key)).toBe(false)
      } finally {
        prefixed.disconnect()
      }
    })

    it('explicit fromIoredis / fromNodeRedis ports work', async () => {
      for (const client of [fromIoredis(io), fromNodeRedis(nodeRedis)]) {
        const name = `port-${randomUUID()}`
        const lock = await redisLockProvider({ client, environment }).lock(config(name))
        assert.ok(lock)
        expect(await exists(keyOf(name))).toBe(true)
        await lock.unlock()
        expect(await exists(keyOf(name))).toBe(false)
      }
    })

    it("the ports' evalSha and eval pass every argument, however many (the ioredis port passes one or two without a spread)", async () => {
      const script = 'return ARGV'
      const sha1 = createHash('sha1').update(script).digest('hex')
      for (const port of [fromIoredis(io), fromNodeRedis(nodeRedis)]) {
        for (const args of [[], ['a'], ['a', 'b'], ['a', 'b', 'c']]) {
          expect(await port.eval(script, keyOf('argv'), args)).toEqual(args)
          expect(await port.evalSha(sha1, keyOf('argv'), args)).toEqual(args)
        }
      }
    })

    it('a closed node-redis client rejects with advice to connect, without secrets in the message', async () => {
      const closed = createClient({ url: 'redis://shedlock:s3cret-pass@127.0.0.1:1' })
      const error = await redisLockProvider({ client: closed, environment })
        .lock(config('closed-client'))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toContain('"closed-client"')
      expect(error.message).toContain('client.connect()')
      expect(error.message).not.toContain('s3cret-pass')
      expect(error.provider).toBe('redis')
      expect(error.cause).toBeDefined()
    })

    it('an acquisition that answers after the timeout rejects, and its late SET is released', async () => {
      const real = fromIoredis(io)
      // The real client, slowed down: the SET reaches Redis after the provider gave up on it.
      const slow: RedisCommands = {
        ...real,
        client: 'slow ioredis',
        setIfAbsent: async (...args) => {
          await sleep(600)
          return real.setIfAbsent(...args)
        },
      }
      const name = `late-${randomUUID()}`
      const error = await redisLockProvider({ client: slow, environment, timeout: 100 })
        .lock(config(name))
        .catch((e: unknown) => e)
      assert.ok(error instanceof LockProviderError)
      expect(error.message).toMatch(/did not answer within 100ms/)
      await eventually(
        async () => {
          await sleep(700)
          return !(await exists(keyOf(name)))
        },
        5_000,
        'the late SET to be released',
      )
      const lock = await redisLockProvider({ client: io, environment }).lock(config(name))
      assert.ok(lock, 'the late acquisition still blocks the name')
      await lock.unlock()
    })
  })

  describe('own redis-server: script cache and outages', () => {
    let dir = ''
    let server: OwnRedis
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'shedlock-redis-'))
      server = new OwnRedis(await freePort(), dir)
      await server.start()
    })
    afterAll(async () => {
      await server?.stop()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })
    const own = () => `redis://127.0.0.1:${server.port}`

    it('falls back to EVAL on NOSCRIPT, then uses EVALSHA alone (one round trip per operation)', async () => {
      const client = new Redis(own())
      client.on('error', () => {})
      const nodeClient = createClient({ url: own() })
      nodeClient.on('error', () => {})
      await nodeClient.connect()
      try {
        for (const base of [fromIoredis(client), fromNodeRedis(nodeClient)]) {
          const calls: string[] = []
          const counting: RedisCommands = {
            client: base.client,
            setIfAbsent: (...args) => {
              calls.push('SET')
              return base.setIfAbsent(...args)
            },
            evalSha: async (...args) => {
              calls.push('EVALSHA')
              try {
                return await base.evalSha(...args)
              } catch (error) {
                calls.push((error as Error).message.split(' ')[0]!)
                throw error
              }
            },
            eval: (...args) => {
              calls.push('EVAL')
              return base.eval(...args)
            },
          }
          await client.script('FLUSH')
          const provider = redisLockProvider({ client: counting })
          const name = `noscript-${randomUUID()}`
          // Release by delete (lockAtLeastFor passed), then by PEXPIRE (within lockAtLeastFor):
          // each script's first use loads it with EVAL, later uses send only EVALSHA.
          const load = ['SET', 'EVALSHA', 'NOSCRIPT', 'EVAL']
          const cached = ['SET', 'EVALSHA']
          for (const [lockName, atLeast, expected] of [
            [`${name}-del`, 0, load],
            [`${name}-del`, 0, cached],
            [`${name}-keep`, '30s', load],
            [`${name}-keep2`, '30s', cached],
          ] as const) {
            calls.length = 0
            const lock = await provider.lock(config(lockName, '1m', atLeast))
            assert.ok(lock)
            await lock.unlock()
            if (atLeast === 0) expect(await client.exists(`job-lock:default:${lockName}`)).toBe(0)
            else expect(await client.pttl(`job-lock:default:${lockName}`)).toBeGreaterThan(20_000)
            expect(calls).toEqual(expected)
          }
          // A restart or SCRIPT FLUSH empties the cache again: the plain clients recover too.
          await client.script('FLUSH')
          const third = await redisLockProvider({ client: base.client === 'ioredis' ? client : nodeClient }).lock(
            config(`${name}-2`),
          )
          assert.ok(third)
          await client.script('FLUSH')
          await third.unlock()
          expect(await client.exists(`job-lock:default:${name}-2`)).toBe(0)
        }
      } finally {
        client.disconnect()
        nodeClient.destroy()
      }
    })

    it('rejects with LockProviderError while Redis is down, runs no task, and works again once it is back', async () => {
      const ioClient = new Redis(own())
      ioClient.on('error', () => {})
      const nodeClient = createClient({ url: own() })
      nodeClient.on('error', () => {})
      await nodeClient.connect()
      const providers = [
        redisLockProvider({ client: ioClient, timeout: 1_000 }),
        redisLockProvider({ client: nodeClient, timeout: 1_000 }),
      ]
      try {
        for (const provider of providers) {
          const lock = await provider.lock(config(`before-${randomUUID()}`))
          assert.ok(lock)
          await lock.unlock()
        }
        const heldName = `held-${randomUUID()}`
        const held = await Promise.all(providers.map((provider, i) => provider.lock(config(`${heldName}-${i}`))))
        await server.stop()
        for (const lock of held) {
          assert.ok(lock && 'extend' in lock)
          await expect(lock.extend('1m', 0)).rejects.toThrow(
            /^redis: could not extend lock ".*": .*the lock was not extended/,
          )
          await expect(lock.unlock()).rejects.toThrow(
            /^redis: could not release lock ".*": .*the lock stays held until it expires/,
          )
        }
        const name = `outage-${randomUUID()}`
        for (const provider of providers) await assertFailsClosed(provider, name)
        await server.start()
        // Both clients queued the SETs above while offline and send them on reconnection; those
        // acquisitions timed out here, so the provider releases them and the name is free again.
        for (const provider of providers) {
          let lock: Awaited<ReturnType<typeof provider.lock>>
          await eventually(
            async () => {
              lock = await provider.lock(config(name)).catch(() => undefined)
              return lock !== undefined
            },
            20_000,
            'the provider to lock again after the restart',
          )
          await lock!.unlock()
        }
        // The restarted server has no persistence: it forgot the locks held before the outage
        // (the README's caveat). Their handles stayed usable after the failed unlock.
        for (const [i, lock] of held.entries()) {
          expect(await ioClient.exists(`job-lock:default:${heldName}-${i}`)).toBe(0)
          await lock!.unlock()
        }
      } finally {
        ioClient.disconnect()
        nodeClient.destroy()
      }
    }, 60_000)
  })

  describe('Redis Cluster (3 masters, no replicas)', () => {
    let dir = ''
    const servers: OwnRedis[] = []
    let cluster: Cluster | undefined
    let ioCluster: Cluster | undefined
    let nodeCluster: ReturnType<typeof createCluster> | undefined
    let ready = false

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'shedlock-redis-cluster-'))
      for (let i = 0; i < 3; i++) {
        const port = await freePort(true)
        const nodeDir = join(dir, String(port))
        mkdirSync(nodeDir)
        const server = new OwnRedis(port, nodeDir, [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '5000',
        ])
        servers.push(server)
        await server.start()
      }
      await run('redis-cli', [
        '--cluster',
        'create',
        ...servers.map((s) => `127.0.0.1:${s.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ])
      for (const s of servers) {
        await eventually(
          async () =>
            (await run('redis-cli', ['-p', String(s.port), 'cluster', 'info'])).stdout.includes('cluster_state:ok'),
          30_000,
          `cluster state ok on ${s.port}`,
        )
      }
      const rootNodes = servers.map((s) => ({ host: '127.0.0.1', port: s.port }))
      cluster = new Cluster(rootNodes)
      ioCluster = new Cluster(rootNodes)
      nodeCluster = createCluster({ rootNodes: servers.map((s) => ({ url: `redis://127.0.0.1:${s.port}` })) })
      nodeCluster.on('error', () => {})
      await nodeCluster.connect()
      await cluster.ping()
      ready = true
    }, 120_000)

    afterAll(async () => {
      cluster?.disconnect()
      ioCluster?.disconnect()
      nodeCluster?.destroy()
      for (const s of servers) await s.stop()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })

    const clusterSuite = (
      client: () => Cluster | ReturnType<typeof createCluster>,
      unreachable: () => Cluster | ReturnType<typeof createCluster>,
    ) =>
      lockProviderSuite({
        unreachableProvider: () => redisLockProvider({ client: unreachable() }),
        provider: () => {
          assert.ok(ready, 'the cluster did not come up')
          // The counter key must share the lock key's slot, or the script fails with CROSSSLOT.
          return redisLockProvider({ client: client(), fencingTokens: true })
        },
        isLocked: async (name) => (await cluster!.exists(`job-lock:default:${name}`)) === 1,
        deleteRecord: async (name) => {
          await cluster!.del(`job-lock:default:${name}`)
        },
        extensible: true,
        slots: { inspector: true },
        fencing: true,
        fuzzIterations: 10,
      })

    describe('ioredis Cluster', () => {
      registerSuite(
        clusterSuite(
          () => ioCluster!,
          () => {
            const dead = new Cluster([{ host: '127.0.0.1', port: 1 }], {
              lazyConnect: true,
              enableOfflineQueue: false,
              clusterRetryStrategy: () => null,
            })
            dead.on('error', () => {})
            closeLater.push(() => dead.disconnect())
            return dead
          },
        ),
      )
    })

    describe('node-redis createCluster', () => {
      // Never connected, like the standalone case.
      registerSuite(
        clusterSuite(
          () => nodeCluster!,
          () => createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] }),
        ),
      )
    })

    // The inspector on the Cluster: records are read on the node that holds each key, and list()
    // SCANs every master. Built on first use: the clusters connect in beforeAll.
    const lazyInspector = (make: () => LockInspector): LockInspector => {
      let inspector: LockInspector | undefined
      const get = (): LockInspector => (inspector ??= make())
      return {
        get name() {
          return get().name
        },
        get clock() {
          return get().clock
        },
        list: (selection) => get().list(selection),
        get: (name) => get().get(name),
        release: (lock) => get().release(lock),
        removeExpired: (selection) => get().removeExpired(selection),
      }
    }
    describe('inspector on an ioredis Cluster', () => {
      registerInspectorSuite(
        lockInspectorSuite({
          provider: () => redisLockProvider({ client: ioCluster! }),
          inspector: lazyInspector(() => redisLockInspector({ client: ioCluster! })),
        }),
      )
    })
    describe('inspector on a node-redis createCluster', () => {
      registerInspectorSuite(
        lockInspectorSuite({
          provider: () => redisLockProvider({ client: nodeCluster! }),
          inspector: lazyInspector(() => redisLockInspector({ client: nodeCluster! })),
        }),
      )
    })

    it('the inspector lists the keys of all three masters, with ioredis and node-redis clusters', async () => {
      const environment = `inspect-${randomUUID()}`
      const names = Array.from({ length: 30 }, (_, i) => `spread-${String(i).padStart(2, '0')}`)
      const provider = redisLockProvider({ client: ioCluster!, environment })
      const locks = await Promise.all(names.map((name) => provider.lock(config(name))))
      const nodes = new Set<number>()
      for (const name of names) {
        const slot = Number(await cluster!.cluster('KEYSLOT', `job-lock:${environment}:${name}`))
        nodes.add(slot < 5461 ? 0 : slot < 10923 ? 1 : 2)
      }
      expect(nodes.size).toBe(3)
      for (const client of [ioCluster!, nodeCluster!]) {
        const { now, locks: records } = await redisLockInspector({ client, environment }).list()
        expect(records.map((record) => record.name)).toEqual(names)
        expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(2_000)
        for (const record of records) expect(record.remainingMs).toBeGreaterThan(250_000)
      }
      expect(await redisLockInspector({ client: nodeCluster!, environment }).release(names[0]!)).toBe(true)
      expect(await cluster!.exists(`job-lock:${environment}:${names[0]}`)).toBe(0)
      for (const lock of locks) await lock!.unlock()
      expect((await redisLockInspector({ client: ioCluster!, environment }).list()).locks).toEqual([])
    })

    it('keys of one environment spread over all three masters, each loading the scripts on first use', async () => {
      const names = Array.from({ length: 30 }, () => `spread-${randomUUID()}`)
      const provider = redisLockProvider({ client: ioCluster! })
      const locks = await Promise.all(names.map((name) => provider.lock(config(name))))
      const slots = new Set<string>()
      for (const name of names) {
        const slot = Number(await cluster!.cluster('KEYSLOT', `job-lock:default:${name}`))
        slots.add(slot < 5461 ? 'a' : slot < 10923 ? 'b' : 'c')
      }
      expect(slots.size).toBe(3)
      for (const lock of locks) await lock!.unlock()
      for (const name of names) expect(await cluster!.exists(`job-lock:default:${name}`)).toBe(0)
    })

    it('a standalone client pointed at one node is told to use a Cluster client (MOVED)', async () => {
      const single = new Redis({ port: servers[0]!.port, maxRetriesPerRequest: 1 })
      single.on('error', () => {})
      try {
        const provider = redisLockProvider({ client: single })
        let error: unknown
        for (let i = 0; i < 50 && error === undefined; i++) {
          const lock = await provider.lock(config(`moved-${randomUUID()}`)).catch((e: unknown) => {
            error = e
            return undefined
          })
          await lock?.unlock()
        }
        assert.ok(error instanceof LockProviderError)
        expect(error.message).toMatch(/MOVED .*pass a Cluster client/)
      } finally {
        single.disconnect()
      }
    })
  })
})
