import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, LockConfigurationError } from '../../../src/index.ts'
import {
  type RedisCommands,
  fromIoredis,
  redisLockInspector,
  redisLockProvider,
  redisRunLedger,
} from '../../../src/providers/redis/index.ts'
import { APPEND_RUNS } from '../../../src/providers/redis/format.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { countedRedis, REDIS_URL, redisOrSkip } from '../../helpers/kv-clients.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'

const raw = await redisOrSkip()

describe.skipIf(!raw)('redisRunLedger', () => {
  const redis = raw!
  const environment = `vitest-runs-${process.pid}-${randomUUID().slice(0, 8)}`
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
    registerRunLedgerSuite(
      runLedgerSuite({
        ledger: redisRunLedger({ client: io, environment, keep: 5 }),
        keep: 5,
        provider: () => redisLockProvider({ client: io, environment }),
        withMaxAge: (maxAge) => redisRunLedger({ client: io, environment, keep: 5, maxAge }),
      }),
    )
  })

  describe('node-redis', () => {
    registerRunLedgerSuite(
      runLedgerSuite({
        ledger: redisRunLedger({ client: nodeRedis, environment, keep: 5 }),
        keep: 5,
        provider: () => redisLockProvider({ client: nodeRedis, environment }),
      }),
    )
  })

  it("runs of several tasks recorded in one turn cost one call, each run in its task's capped stream", async () => {
    const { client, sent } = countedRedis()
    try {
      // The script cached, so that the batch is one EVALSHA (a NOSCRIPT would add an EVAL).
      await client.script('LOAD', APPEND_RUNS.source)
      sent.length = 0
      const ledger = redisRunLedger({ client, environment, keep: 2, maxAge: '1h' })
      const names = [`batch-${randomUUID()}`, `batch-${randomUUID()}`]
      const at = new Date()
      await Promise.all(
        Array.from({ length: 10 }, (_, k) =>
          ledger.record({
            name: names[k % 2]!,
            slot: undefined,
            node: `n${k}`,
            startedAt: at,
            finishedAt: at,
            outcome: 'ok',
            durationMs: k,
          }),
        ),
      )
      expect(sent).toEqual(['evalsha'])
      for (const name of names) {
        const key = `shedlock-runs:${environment}:${name}`
        expect(await redis.xlen(key), 'trimmed to 2 × keep').toBe(4)
        expect(await redis.pttl(key)).toBeGreaterThan(3_000_000)
        expect((await ledger.history(name)).length).toBe(2)
      }
    } finally {
      client.disconnect()
    }
  })

  it('one capped stream per task under shedlock-runs:<environment>:, with an expiry, never seen as a lock', async () => {
    const name = `stream-${randomUUID()}`
    const ledger = redisRunLedger({ client: io, environment, keep: 3, maxAge: '1h' })
    for (let i = 0; i < 10; i++)
      await ledger.record({
        name,
        slot: undefined,
        node: 'n',
        startedAt: new Date(),
        finishedAt: new Date(),
        outcome: 'ok',
        durationMs: 1,
      })
    const key = `shedlock-runs:${environment}:${name}`
    expect(await redis.type(key)).toBe('stream')
    expect(await redis.xlen(key)).toBe(6)
    const ttl = await redis.pttl(key)
    expect(ttl).toBeGreaterThan(3_590_000)
    expect(ttl).toBeLessThanOrEqual(3_600_000)
    const { locks } = await redisLockInspector({ client: io, environment }).list()
    expect(locks.map((l) => l.name)).not.toContain(name)
  })

  it('runs older than maxAge are not read back', async () => {
    const name = `aged-${randomUUID()}`
    const ledger = redisRunLedger({ client: io, environment, maxAge: '1h' })
    await ledger.record({
      name,
      slot: undefined,
      node: 'n',
      startedAt: new Date(Date.now() - 2 * 3_600_000),
      finishedAt: new Date(),
      outcome: 'ok',
      durationMs: 1,
    })
    await ledger.record({
      name,
      slot: undefined,
      node: 'n',
      startedAt: new Date(),
      finishedAt: new Date(),
      outcome: 'failed',
      durationMs: 1,
    })
    expect((await ledger.history(name)).map((r) => r.outcome)).toEqual(['failed'])
  })

  it('a key under the prefix that is not a stream reads as no runs', async () => {
    const name = `not-a-stream-${randomUUID()}`
    await redis.set(`shedlock-runs:${environment}:${name}`, 'x')
    const ledger = redisRunLedger({ client: io, environment })
    expect(await ledger.history(name)).toEqual([])
    expect((await ledger.tasks()).map((t) => t.name)).not.toContain(name)
  })

  it("a run's handle records its end once; a second finish() is refused, naming why", async () => {
    const ledger = redisRunLedger({ client: io, environment })
    const run = await ledger.start({ name: `twice-${Date.now()}`, slot: undefined, node: 'n', startedAt: new Date() })
    await run.finish({ finishedAt: new Date(), outcome: 'ok', durationMs: 1 })
    await expect(run.finish({ finishedAt: new Date(), outcome: 'ok', durationMs: 1 })).rejects.toThrow(
      /has already finished/,
    )
  })

  it('a port without command() records and reads, and tasks() says what it needs', async () => {
    const full = fromIoredis(io)
    const port: RedisCommands = {
      client: 'custom',
      setIfAbsent: full.setIfAbsent,
      evalSha: full.evalSha,
      eval: full.eval,
    }
    const ledger = redisRunLedger({ client: port, environment })
    const name = `port-${randomUUID()}`
    const executor = createLockingTaskExecutor(redisLockProvider({ client: port, environment }), { runLedger: ledger })
    await executor.executeWithLock(() => undefined, { name, lockAtMostFor: '1m' })
    expect((await ledger.history(name)).map((r) => r.outcome)).toEqual(['ok'])
    await expect(ledger.tasks()).rejects.toThrow(LockConfigurationError)
    await expect(ledger.tasks()).rejects.toThrow(/command\(args\)/)
  })

  it('bad options are refused, naming the option', () => {
    expect(() => redisRunLedger({ client: io, keep: 0 })).toThrow(/keep must be a whole number/)
    expect(() => redisRunLedger({ client: io, environment: 'a:b' })).toThrow(
      /environment must be a non-empty string without ':'/,
    )
    expect(() => redisRunLedger({ client: io, maxAge: 0 })).toThrow(/longer than 0ms/)
  })
})
