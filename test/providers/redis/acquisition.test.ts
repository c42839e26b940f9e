// The Redis provider's batched paired acquire (sendPairs in src/providers/redis/acquisition.ts)
// on a real server: a turn's pairs go as one ACQUIRE_PAIRS call; a counter that cannot be INCRed
// fails its own pair alone; a flushed script cache is met by EVAL within the same call; a batch
// that lands after its timeout is given back, key by key. The answers themselves are the
// conformance suite's ("pairs asked for in the same turn").
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { lockPairOf, type PairedLocks } from '../../../src/core/lock-provider.ts'
import { ACQUIRE_PAIRS, DELETE_IF_OWNED, RELEASE_MANY } from '../../../src/providers/redis/format.ts'
import { redisLockProvider } from '../../../src/providers/redis/index.ts'
import { countedRedis, redisOrSkip } from '../../helpers/kv-clients.ts'
import { expectEachRejectedNaming } from '../../helpers/fail-closed.ts'
import { freePort, portOpen, stopProcess, waitFor } from '../../helpers/processes.ts'

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

  it('a batch Redis runs after its timeout (the server busy) gives every key back, and every pair rejects naming its lock', async () => {
    // A server of its own: the stall below would hold up every other test's commands.
    const port = await freePort()
    const server = spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    )
    expect(await waitFor(() => portOpen(port), 15_000), `redis-server on port ${port}`).toBe(true)
    const own = new Redis(`redis://127.0.0.1:${port}`)
    const client = own.duplicate()
    // The owner-checked deletes the provider sends for the late answers, with their replies (1: deleted).
    const givenBack: Promise<unknown>[] = []
    const send = client.sendCommand.bind(client)
    client.sendCommand = ((
      command: { name: string; args: unknown[]; promise: Promise<unknown> },
      ...rest: unknown[]
    ) => {
      const sent = (send as (...args: unknown[]) => unknown)(command, ...rest)
      if (command.name === 'evalsha' && command.args[0] === DELETE_IF_OWNED.sha1) givenBack.push(command.promise)
      return sent
    }) as typeof client.sendCommand
    const busy = own.duplicate()
    try {
      const provider = redisLockProvider({ client, environment, timeout: '200ms' })
      const pair = lockPairOf(provider)!
      await (await provider.lock(minute(`warm-${randomUUID()}`)))!.unlock()
      // The scripts cached, so that the late batch sets its keys rather than meet NOSCRIPT.
      await own.script('LOAD', ACQUIRE_PAIRS.source)
      await own.script('LOAD', DELETE_IF_OWNED.source)
      givenBack.length = 0
      const pairs = pairsOf(5)
      // A script that keeps the server to itself for 700 ms: the batch, sent meanwhile, waits in
      // its queue, its callers time out at 200 ms, and it runs once the script ends.
      const stall = busy.eval(
        "local t = redis.call('TIME'); local until_us = (tonumber(t[1]) * 1000000 + tonumber(t[2])) + 700000; repeat t = redis.call('TIME') until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= until_us; return 1",
        0,
      )
      await new Promise((resolve) => setTimeout(resolve, 50))
      const settled = await Promise.allSettled(pairs.map(({ claim, task }) => pair(minute(claim), minute(task))))
      expectEachRejectedNaming(
        settled,
        pairs.map(({ claim }) => claim),
      )
      await stall
      // The batch has landed by now (it was queued behind the script) and set the keys; the
      // provider deletes each, owner-checked, as its late answer arrives.
      const keys = pairs.flatMap(({ claim, task }) => [keyOf(claim), keyOf(task)])
      let left = await own.exists(...keys)
      for (let i = 0; i < 50 && left > 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        left = await own.exists(...keys)
      }
      expect(left, 'keys of the late batch still set').toBe(0)
      // They were set, and deleted by this client's give-backs: one per key.
      expect(await Promise.all(givenBack)).toEqual(keys.map(() => 1))
    } finally {
      busy.disconnect()
      client.disconnect()
      own.disconnect()
      await stopProcess(server)
    }
  })
})
