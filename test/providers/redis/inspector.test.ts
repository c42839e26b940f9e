import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  fromIoredis,
  type RedisCommands,
  redisLockInspector,
  redisLockProvider,
} from '../../../src/providers/redis/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { REDIS_URL, redisOrSkip } from '../../helpers/kv-clients.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

// A raw connection that reads and writes the store behind the inspector's back.
const raw = await redisOrSkip()

describe.skipIf(!raw)('redisLockInspector', () => {
  const redis = raw!
  // Every key of this file lives under environments that start with this, deleted at the end.
  const environment = `vitest-inspect-${process.pid}-${randomUUID().slice(0, 8)}`
  const keyOf = (name: string, env = environment, prefix = 'job-lock'): string => `${prefix}:${env}:${name}`
  // Not connected yet, so that a skipped run opens no connection: ioredis connects on its first
  // command, node-redis in beforeAll.
  const io = new Redis(REDIS_URL, { lazyConnect: true })
  io.on('error', () => {})
  const nodeRedis = createClient({ url: REDIS_URL })
  nodeRedis.on('error', () => {})

  beforeAll(async () => {
    await nodeRedis.connect()
  })
  afterAll(async () => {
    for await (const keys of redis.scanStream({ match: `*${environment}*`, count: 500 }))
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]))
    io.disconnect()
    nodeRedis.destroy()
    redis.disconnect()
  })

  describe('ioredis', () => {
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => redisLockProvider({ client: io, environment }),
        inspector: redisLockInspector({ client: io, environment }),
      }),
    )
  })

  describe('node-redis', () => {
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => redisLockProvider({ client: nodeRedis, environment }),
        inspector: redisLockInspector({ client: nodeRedis, environment }),
      }),
    )
  })

  it('provider.inspector() inspects the provider’s keys; a handle’s lockedBy is the owner in its value', async () => {
    const name = `own-${randomUUID()}`
    const p = redisLockProvider({ client: io, environment })
    const lock = await p.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(lock)
    const own = p.inspector!()
    expect(own.name).toBe('redis')
    const record = await own.get(name)
    expect(record?.held).toBe(true)
    expect(record?.lockedBy).toBe(lock.lockedBy)
    expect((await own.list({ prefix: name })).locks.map((r) => r.name)).toEqual([name])
    await lock.unlock()
    // A RedisCommands port without command() has a provider, and no inspector.
    const full = fromIoredis(io)
    const bare = redisLockProvider({
      client: { client: 'bare', setIfAbsent: full.setIfAbsent, evalSha: full.evalSha, eval: full.eval },
      environment,
    })
    expect(() => bare.inspector!()).toThrow(LockConfigurationError)
  })

  it('a force-release deletes the key; the holder’s unlock within lockAtLeastFor does not bring it back', async () => {
    const inspector = redisLockInspector({ client: io, environment })
    const name = `deleted-${randomUUID()}`
    const lock = await redisLockProvider({ client: io, environment }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }),
    )
    assert.ok(lock)
    expect(await inspector.release(name)).toBe(true)
    expect(await redis.exists(keyOf(name))).toBe(0)
    await lock.unlock()
    expect(await redis.exists(keyOf(name))).toBe(0)
    expect(await inspector.get(name)).toBeUndefined()
    expect(await inspector.release(name)).toBe(false)
  })

  it('reads a lock written by Java ShedLock: expiry on the server clock, holder and time from the value', async () => {
    const inspector = redisLockInspector({ client: nodeRedis, environment })
    const name = `java-${randomUUID()}`
    await redis.set(keyOf(name), 'ADDED:2030-01-02T03:04:05.678Z@java-host', 'PX', 60_000)
    const [seconds, micros] = await redis.time()
    const serverNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
    const record = await inspector.get(name)
    assert.ok(record)
    expect(record).toMatchObject({
      name,
      lockedBy: 'java-host',
      lockedAt: new Date('2030-01-02T03:04:05.678Z'),
      held: true,
    })
    expect(Math.abs(record.lockUntil!.getTime() - (serverNow + 60_000))).toBeLessThan(1_000)
    expect(record.remainingMs).toBeGreaterThan(58_000)
    expect(record.remainingMs).toBeLessThanOrEqual(60_000)
    // A value of another shape still reads, without holder or time.
    await redis.set(keyOf(`${name}-odd`), 'locked', 'PX', 60_000)
    expect(await inspector.get(`${name}-odd`)).toMatchObject({ lockedBy: undefined, lockedAt: undefined, held: true })
    // Released only while it holds the value read.
    const stale = await inspector.get(name)
    await redis.set(keyOf(name), 'ADDED:2030-01-02T03:04:06.000Z@other-java-host', 'PX', 60_000)
    expect(await inspector.release(stale!)).toBe(false)
    expect(await redis.get(keyOf(name))).toBe('ADDED:2030-01-02T03:04:06.000Z@other-java-host')
    expect(await inspector.release(name)).toBe(true)
    expect(await redis.exists(keyOf(name))).toBe(0)
  })

  it('lists names with colons, spaces, slashes, glob characters and any Unicode, and nothing of an environment whose name the glob would match', async () => {
    // An environment with glob characters: SCAN's MATCH must take it literally.
    const globby = `${environment}-*?[ab]\\`
    const names = [
      'a:b:c',
      'with space',
      'slash/ed',
      'star*',
      'question?',
      '[brackets]',
      'back\\slash',
      'é-ü-日本-🔒',
      ' leading space',
    ]
    const provider = redisLockProvider({ client: io, environment: globby })
    const locks = await Promise.all(
      names.map((name) => provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
    )
    // A key of another environment, which the pattern would match if its glob characters were not escaped.
    await redis.set(keyOf('intruder', `${environment}-XYZa`), 'ADDED:2030-01-01T00:00:00.000Z@x', 'PX', 60_000)
    // A key in the key space that is not a string is no lock.
    await redis.hset(keyOf('a-hash', globby), 'field', 'value')
    const { locks: records } = await redisLockInspector({ client: io, environment: globby }).list()
    expect(records.map((record) => record.name)).toEqual([...names].sort())
    for (const record of records) expect(record.held).toBe(true)
    expect(await redisLockInspector({ client: io, environment: globby }).get('a-hash')).toBeUndefined()
    for (const lock of locks) await lock!.unlock()
    expect((await redisLockInspector({ client: nodeRedis, environment: globby }).list()).locks).toEqual([])
  })

  it('list() reads now from the server and pages through more keys than one SCAN returns', async () => {
    const env = `${environment}-many`
    const pipeline = redis.pipeline()
    for (let i = 0; i < 2_500; i++)
      pipeline.set(
        keyOf(`n${String(i).padStart(4, '0')}`, env),
        `ADDED:2030-01-01T00:00:00.000Z@host-${i}`,
        'PX',
        60_000,
      )
    await pipeline.exec()
    const before = Date.now()
    const { now, locks } = await redisLockInspector({ client: io, environment: env }).list()
    expect(Math.abs(now.getTime() - before)).toBeLessThan(2_000)
    expect(locks).toHaveLength(2_500)
    expect(locks[0]).toMatchObject({ name: 'n0000', lockedBy: 'host-0' })
    expect(locks[2_499]).toMatchObject({ name: 'n2499', lockedBy: 'host-2499' })
  }, 30_000)

  it("honours the client's keyPrefix option (ioredis and node-redis), which SCAN patterns do not get", async () => {
    const clientPrefix = `${environment}-client:`
    const prefixedIo = new Redis(REDIS_URL, { keyPrefix: clientPrefix })
    const prefixedNode = createClient({ url: REDIS_URL, keyPrefix: clientPrefix })
    prefixedNode.on('error', () => {})
    await prefixedNode.connect()
    try {
      // node-redis 5.0 has no keyPrefix and ignores the option (scripts/oldest-drivers.sh runs
      // 5.0.0): its half runs where the client applies the prefix.
      const probe = `${environment}-probe`
      await prefixedNode.set(probe, '1')
      const nodeRedisPrefixes = (await redis.exists(`${clientPrefix}${probe}`)) === 1
      await redis.del(`${clientPrefix}${probe}`, probe)
      for (const client of nodeRedisPrefixes ? [prefixedIo, prefixedNode] : [prefixedIo]) {
        const name = `prefixed-${randomUUID()}`
        const lock = await redisLockProvider({ client, environment }).lock(
          lockConfiguration({ name, lockAtMostFor: '1m' }),
        )
        assert.ok(lock)
        expect(await redis.exists(`${clientPrefix}${keyOf(name)}`)).toBe(1)
        const inspector = redisLockInspector({ client, environment })
        const { locks } = await inspector.list()
        expect(locks.map((record) => record.name)).toEqual([name])
        expect(await inspector.release(locks[0]!)).toBe(true)
        expect(await redis.exists(`${clientPrefix}${keyOf(name)}`)).toBe(0)
      }
    } finally {
      prefixedIo.disconnect()
      prefixedNode.destroy()
    }
  })

  it('refuses a RedisCommands port that cannot send raw commands, and bad options, with LockConfigurationError', () => {
    const { command: _command, ...withoutCommand } = fromIoredis(io)
    const port: RedisCommands = withoutCommand
    expect(() => redisLockInspector({ client: port })).toThrow(LockConfigurationError)
    expect(() => redisLockInspector({ client: port })).toThrow(
      /the inspector sends TIME and SCAN, which the ioredis port passed as client cannot: give it a command\(args\) method/,
    )
    expect(redisLockInspector({ client: fromIoredis(io) }).name).toBe('redis')
    for (const options of [{ environment: 'a:b' }, { keyPrefix: '' }, { timeout: 0 }]) {
      expect(() => redisLockInspector({ client: io, ...options } as never), JSON.stringify(options)).toThrow(
        LockConfigurationError,
      )
    }
    expect(() => redisLockInspector({ client: {} } as never)).toThrow(LockConfigurationError)
    expect(() => redisLockInspector(undefined as never)).toThrow(LockConfigurationError)
  })

  it('an unreachable server rejects with LockProviderError naming the action', async () => {
    const dead = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    dead.on('error', () => {})
    try {
      const inspector = redisLockInspector({ client: dead, environment })
      await expect(inspector.list()).rejects.toThrow(LockProviderError)
      await expect(inspector.list()).rejects.toThrow(/^redis: could not list the locks: Redis is unreachable/)
      await expect(inspector.get('x')).rejects.toThrow(/^redis: could not inspect lock "x": Redis is unreachable/)
      await expect(inspector.release('x')).rejects.toThrow(/^redis: could not release lock "x": /)
    } finally {
      dead.disconnect()
    }
  })
})
