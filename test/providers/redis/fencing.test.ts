// Redis's fencing tokens (fencingTokens: a counter key INCRed in the acquisition's script) from
// several processes over dist/, the paused-holder scenario, and what Java's plain SET NX does to
// the counter. Build dist/ first (`npm run build`; `npm test` does).
import type { Duration } from '../../../src/core/duration.ts'
import { randomUUID } from 'node:crypto'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { type RedisCommands, fromIoredis, redisLockProvider } from '../../../src/providers/redis/index.ts'
import { fencingRace } from '../../helpers/fencing-race.ts'
import { REDIS_URL, redisOrSkip } from '../../helpers/kv-clients.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { killStartedProcesses } from '../../helpers/processes.ts'

const raw = await redisOrSkip()
const config = (name: string, lockAtMostFor: Duration = '1m') =>
  lockConfiguration({ name, lockAtMostFor, lockAtLeastFor: 0 })

describe.skipIf(!raw)('redis fencing tokens', () => {
  const redis = raw!
  const environment = `fencing-${process.pid}-${randomUUID().slice(0, 8)}`
  const keyOf = (name: string) => `job-lock:${environment}:${name}`
  const counterOf = (name: string) => `:{${keyOf(name)}}:fence`
  let nodeRedis: ReturnType<typeof createClient>
  const nodeProvider = (client: 'ioredis' | 'node-redis') =>
    client === 'ioredis'
      ? `
import { Redis } from 'ioredis'
import { redisLockProvider } from 'shedlock/redis'
const client = new Redis(${JSON.stringify(REDIS_URL)})
export const provider = redisLockProvider({ client, environment: ${JSON.stringify(environment)}, fencingTokens: true })
export const close = async () => client.disconnect()
`
      : `
import { createClient } from 'redis'
import { redisLockProvider } from 'shedlock/redis'
const client = createClient({ url: ${JSON.stringify(REDIS_URL)} })
client.on('error', () => {})
await client.connect()
export const provider = redisLockProvider({ client, environment: ${JSON.stringify(environment)}, fencingTokens: true })
export const close = async () => client.destroy()
`
  beforeAll(async () => {
    nodeRedis = createClient({ url: REDIS_URL })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
  })
  afterAll(async () => {
    killStartedProcesses()
    for await (const keys of redis.scanStream({ match: `*:${environment}:*`, count: 500 }))
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]))
    nodeRedis?.destroy()
    redis.disconnect()
  })

  it('the token is the count of the key beside the lock, which only acquisitions raise', async () => {
    const name = `counter-${randomUUID()}`
    for (const client of [redis, nodeRedis]) {
      const provider = redisLockProvider({ client, environment, fencingTokens: true })
      const lock = await provider.lock(config(name))
      expect(lock?.fencingToken).toBe(BigInt((await redis.get(counterOf(name)))!))
      // A failed attempt does not count.
      expect(await provider.lock(config(name))).toBeUndefined()
      const extended = await lock!.extend('2m', 0)
      expect(extended?.fencingToken).toBe(lock!.fencingToken)
      await extended!.unlock()
      // The counter stays when the lock key goes: it has no expiry.
      expect(await redis.exists(keyOf(name))).toBe(0)
      expect(await redis.pttl(counterOf(name))).toBe(-1)
    }
    expect(await redis.get(counterOf(name))).toBe('2')
  })

  it("Java's SET NX PX leaves the counter alone; the next Node acquisition still gets a greater token", async () => {
    const name = `java-${randomUUID()}`
    const provider = redisLockProvider({ client: redis, environment, fencingTokens: true })
    const first = await provider.lock(config(name))
    await first!.unlock()
    // Java ShedLock: SET key value NX PX, then DEL.
    expect(await redis.set(keyOf(name), 'ADDED:2026-01-01T00:00:00.000Z@java:1', 'PX', 60_000, 'NX')).toBe('OK')
    expect(await provider.lock(config(name))).toBeUndefined()
    await redis.del(keyOf(name))
    const next = await provider.lock(config(name))
    expect(next!.fencingToken).toBe(first!.fencingToken! + 1n)
    await next!.unlock()
  })

  it('a counter Redis cannot INCR fails the acquisition and leaves the lock free', async () => {
    const name = `broken-${randomUUID()}`
    await redis.set(counterOf(name), 'not a number')
    const provider = redisLockProvider({ client: redis, environment, fencingTokens: true })
    const error = await provider.lock(config(name)).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toMatch(/not an integer/)
    expect(await redis.exists(keyOf(name))).toBe(0)
  })

  it('a RedisCommands port that drops moreKeys gets a clear refusal, and the lock stays free', async () => {
    const io = fromIoredis(redis)
    const port: RedisCommands = {
      client: 'mine',
      setIfAbsent: io.setIfAbsent,
      evalSha: (sha1, key, args) => io.evalSha(sha1, key, args),
      eval: (script, key, args) => io.eval(script, key, args),
    }
    const name = `port-${randomUUID()}`
    const error = await redisLockProvider({ client: port, environment, fencingTokens: true })
      .lock(config(name))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toContain('a RedisCommands port must pass moreKeys')
    expect(await redis.exists(keyOf(name))).toBe(0)
  })

  it('after SCRIPT FLUSH the acquisition sends the script again (NOSCRIPT), in the same call', async () => {
    const name = `noscript-${randomUUID()}`
    const provider = redisLockProvider({ client: redis, environment, fencingTokens: true })
    await redis.script('FLUSH')
    const lock = await provider.lock(config(name))
    expect(lock?.fencingToken).toBe(1n)
    await lock!.unlock()
  })

  it('refuses a fencingTokens that is not a boolean', () => {
    expect(() => redisLockProvider({ client: redis, fencingTokens: 'yes' as unknown as boolean })).toThrow(
      /fencingTokens must be true or false, got "yes"/,
    )
  })

  it('1,000 acquisitions from 4 processes (ioredis and node-redis), with expiries and takeovers: tokens strictly increase', async () => {
    const outcome = await fencingRace({ nodeProvider: [nodeProvider('ioredis'), nodeProvider('node-redis')] })
    expect(outcome.acquisitions).toHaveLength(1000)
    expect(outcome.violations).toEqual([])
    expect(outcome.takeovers).toBeGreaterThan(0)
  }, 240_000)

  it('a paused holder cannot write with its token after the lock was taken over', async () => {
    const outcome = await pausedHolder({
      holderProvider: nodeProvider('ioredis'),
      taker: redisLockProvider({ client: nodeRedis, environment, fencingTokens: true }),
    })
    expect(outcome.takerToken).toBeGreaterThan(outcome.holderToken)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
