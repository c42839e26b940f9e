import { describe, expect, it } from 'vitest'
import { combinePeers } from '../../bench/measurements/peers.ts'
import type { PeerRow } from '../../bench/result.ts'
import { flatContender } from './contender.ts'

// One process's row: ours at `oursP50` µs against redlock and redis-semaphore at the p50s given.
const row = (
  concurrency: number,
  oursP50: number,
  redlockP50: number,
  semaphoreP50: number,
  opsPerBlock: number,
): PeerRow => ({
  store: 'redis',
  concurrency,
  opsPerBlock,
  ours: flatContender('shedlock', oursP50),
  peers: [
    {
      result: flatContender('redlock', redlockP50),
      description: 'redlock',
      p50Ratio: oursP50 / redlockP50,
      p99Ratio: oursP50 / redlockP50,
      opsRatio: redlockP50 / oursP50,
    },
    {
      result: flatContender('redis-semaphore', semaphoreP50),
      description: 'redis-semaphore',
      p50Ratio: oursP50 / semaphoreP50,
      p99Ratio: oursP50 / semaphoreP50,
      opsRatio: semaphoreP50 / oursP50,
    },
  ],
})

describe('peers over several processes', () => {
  it("reports each peer's median ratios, the results of its median process, and every process", () => {
    const combined = combinePeers([
      [row(1, 100, 125, 90, 10)],
      [row(1, 100, 110, 100, 11)],
      [row(1, 100, 120, 110, 12)],
    ])
    expect(combined).toHaveLength(1)
    const [redlock, semaphore] = combined[0]!.peers
    // Against redlock: 0.80, 0.91, 0.83; the median is the third process's.
    expect(redlock!.p50Ratio).toBeCloseTo(100 / 120, 10)
    expect(redlock!.result.latency.p50).toBe(120)
    expect(redlock!.processes?.map((p) => p.p50Ratio)).toEqual([100 / 125, 100 / 110, 100 / 120])
    // Against redis-semaphore: 1.11, 1.00, 0.91; the median is the second process's.
    expect(semaphore!.p50Ratio).toBeCloseTo(1, 10)
    expect(semaphore!.opsRatio).toBeCloseTo(1, 10)
    expect(semaphore!.result.latency.p50).toBe(100)
    // Ours and the block size come from the process chosen for the first peer.
    expect(combined[0]!.opsPerBlock).toBe(12)
  })

  it('refuses processes that measured different rows or peers', () => {
    expect(() =>
      combinePeers([[row(1, 100, 100, 100, 1), row(16, 100, 100, 100, 1)], [row(1, 100, 100, 100, 1)]]),
    ).toThrow('redis: a process measured no peers for 16 callers')
    const swapped: PeerRow = { ...row(1, 100, 100, 100, 1), peers: [...row(1, 100, 100, 100, 1).peers].reverse() }
    expect(() => combinePeers([[row(1, 100, 100, 100, 1)], [swapped]])).toThrow(
      'redis: the processes measured different peers for 1 callers',
    )
  })
})
