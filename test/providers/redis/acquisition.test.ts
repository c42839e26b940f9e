// The Redis provider's batched paired acquire (sendPairs in src/providers/redis/acquisition.ts)
// on a real server: a turn's pairs go as one ACQUIRE_PAIRS call; a counter that cannot be INCRed
// fails its own pair alone; a flushed script cache is met by EVAL within the same call. The
// answers themselves are the conformance suite's ("pairs asked for in the same turn").
import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { lockPairOf, type PairedLocks } from '../../../src/core/lock-provider.ts'
import { ACQUIRE_PAIRS, RELEASE_MANY } from '../../../src/providers/redis/format.ts'
import { redisLockProvider } from '../../../src/providers/redis/index.ts'
import { countedRedis, redisOrSkip } from '../../helpers/kv-clients.ts'

const raw = await redisOrSkip()

describe.skipIf(!raw)('redis: paired acquires of one turn in one call', () => {
  const redis = raw!
  const environment = `pairs-${process.pid}-${randomUUID().slice(0, 8)}`
  const keyOf = (name: string) => `job-lock:${environment}:${name}`
  const counterOf = (name: string) => `:{${keyOf(name)}}:fence`
  afterAll(async () => {
    for await (const keys of redis.scanStream({ match: `*${environment}:*`, count: 500 }))
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]))
    redis.disconnect()
  })

  const minute = (name: string) => lockConfiguration({ name, lockAtMostFor: '1m' })
  const pairsOf = (count: number) =>
    Array.from({ length: count }, () => {
      const task = `task-${randomUUID()}`
      return { claim: `${task}@20260101T120000Z`, task }
    })
  const releaseAll = (answers: readonly PairedLocks[]) =>
    Promise.all(answers.flatMap((answer) => answer.flatMap((h) => (h ? [h.unlock()] : []))))

  it("20 pairs asked for in one turn cost one call, each lock set with its own value; their task locks' releases one more", async () => {
    const { client, sent } = countedRedis()
    try {
      const pair = lockPairOf(redisLockProvider({ client, environment }))!
      // Both scripts cached, so that each batch is one EVALSHA (a NOSCRIPT would add an EVAL).
      for (const { source } of [ACQUIRE_PAIRS, RELEASE_MANY]) await client.script('LOAD', source)
      sent.length = 0
      const pairs = pairsOf(20)
      const answers = await Promise.all(pairs.map(({ claim, task }) => pair(minute(claim), minute(task))))
      expect(sent).toEqual(['evalsha'])
      expect(answers.every(([record, lock]) => record && lock)).toBe(true)
      const values = await redis.mget(...pairs.flatMap(({ claim, task }) => [keyOf(claim), keyOf(task)]))
      expect(new Set(values).size, 'a value per acquisition').toBe(40)
      // The task locks, released in one turn: one call too, and each key is gone after it.
      sent.length = 0
      await Promise.all(answers.map(([, lock]) => lock!.unlock()))
      expect(sent).toEqual(['evalsha'])
      expect(await redis.exists(...pairs.map(({ task }) => keyOf(task)))).toBe(0)
      await Promise.all(answers.map(([record]) => record!.unlock()))
    } finally {
      client.disconnect()
    }
  })

  it('a counter Redis cannot INCR fails its own pair alone and leaves both of its keys free', async () => {
    const provider = redisLockProvider({ client: redis, environment, fencingTokens: true })
    const pair = lockPairOf(provider)!
    const [good, broken, other] = pairsOf(3)
    await redis.set(counterOf(broken!.task), 'not a number')
    const settled = await Promise.allSettled(
      [good!, broken!, other!].map(({ claim, task }) => pair(minute(claim), minute(task))),
    )
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    const error = (settled[1] as PromiseRejectedResult).reason as Error
    expect(error).toBeInstanceOf(LockProviderError)
    expect(error.message).toContain(broken!.claim)
    expect(error.message).toMatch(/not an integer/)
    expect(await redis.exists(keyOf(broken!.claim), keyOf(broken!.task))).toBe(0)
    const taken = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))
    for (const [record, lock] of taken) {
      expect(record).toBeDefined()
      expect(lock?.fencingToken).toBe(1n)
    }
    await releaseAll(taken)
  })

  it('after SCRIPT FLUSH a batch sends the script again (NOSCRIPT), in the same call', async () => {
    const pair = lockPairOf(redisLockProvider({ client: redis, environment, fencingTokens: true }))!
    await redis.script('FLUSH')
    const answers = await Promise.all(pairsOf(3).map(({ claim, task }) => pair(minute(claim), minute(task))))
    expect(answers.every(([record, lock]) => record && lock?.fencingToken === 1n)).toBe(true)
    await releaseAll(answers)
  })
})
