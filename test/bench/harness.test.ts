import { describe, expect, it } from 'vitest'
import {
  blockOrder,
  type Contender,
  calibrate,
  compare,
  interleave,
  opsForBlock,
  runBlock,
  warmUp,
} from '../../bench/harness.ts'

/** A clock that advances only when an operation says so: the harness's arithmetic, without real time. */
function fakeClock() {
  let now = 0n
  return {
    clock: () => now,
    advance: (ns: number) => {
      now += BigInt(ns)
    },
  }
}

describe('bench harness', () => {
  it('runs exactly the requested operations, spread over the callers', async () => {
    const byWorker = new Map<number, number>()
    let running = 0
    let peak = 0
    const latencies: number[] = []
    await runBlock(
      async (worker) => {
        running++
        peak = Math.max(peak, running)
        byWorker.set(worker, (byWorker.get(worker) ?? 0) + 1)
        await new Promise((resolve) => setImmediate(resolve))
        running--
      },
      40,
      4,
      latencies,
    )
    expect([...byWorker.values()].reduce((a, b) => a + b, 0)).toBe(40)
    expect([...byWorker.keys()].sort()).toEqual([0, 1, 2, 3])
    expect(peak).toBe(4)
    expect(latencies).toHaveLength(40)
    // Fewer operations than callers: no caller runs an extra one.
    let count = 0
    await runBlock(async () => void count++, 2, 16)
    expect(count).toBe(2)
  })

  it('rotates the order of contenders from block to block', () => {
    expect(blockOrder(['a', 'b'], 0)).toEqual(['a', 'b'])
    expect(blockOrder(['a', 'b'], 1)).toEqual(['b', 'a'])
    expect(blockOrder(['a', 'b', 'c'], 4)).toEqual(['b', 'c', 'a'])
  })

  it('interleaves blocks of equal size and reports per-operation latency and ops/s', async () => {
    const { clock, advance } = fakeClock()
    const order: string[] = []
    const side = (label: string, ns: number): Contender => ({
      label,
      async operation() {
        order.push(label)
        advance(ns)
      },
    })
    // A fake CPU clock that moves 10 µs per reading: two readings around each measured block.
    let cpuNow = 0
    const cpu = (): number => (cpuNow += 10)
    const [fast, slow] = await interleave(
      [side('fast', 1_000), side('slow', 3_000)],
      { blocks: 4, opsPerBlock: 5, concurrency: 1, warmupOps: 2 },
      clock,
      cpu,
    )
    // Warm-up (2 each), then blocks of 5 in the order AB, BA, AB, BA.
    const run = (label: string, n: number): string[] => Array<string>(n).fill(label)
    expect(order).toEqual([
      ...run('fast', 2),
      ...run('slow', 2),
      ...[...run('fast', 5), ...run('slow', 5)],
      ...[...run('slow', 5), ...run('fast', 5)],
      ...[...run('fast', 5), ...run('slow', 5)],
      ...[...run('slow', 5), ...run('fast', 5)],
    ])
    expect(fast!.ops).toBe(20)
    expect(slow!.ops).toBe(20)
    expect(fast!.latency.p50).toBe(1)
    expect(slow!.latency.p99).toBe(3)
    expect(fast!.opsPerSecond).toBe(1_000_000)
    expect(slow!.opsPerSecond).toBeCloseTo(333_333.33, 1)
    // 4 blocks of 5 operations, 10 µs of CPU each: 2 µs per operation.
    expect(fast!.cpuPerOpUs).toBe(2)
    expect(slow!.cpuPerOpUs).toBe(2)
  })

  it('sizes blocks on the slowest contender, as a multiple of the concurrency, within bounds', async () => {
    expect(opsForBlock(0.5, { blockMs: 100, minOps: 4, maxOps: 1000, concurrency: 1 })).toBe(200)
    expect(opsForBlock(0.5, { blockMs: 100, minOps: 4, maxOps: 1000, concurrency: 16 })).toBe(208)
    expect(opsForBlock(0.0001, { blockMs: 100, minOps: 4, maxOps: 1000, concurrency: 1 })).toBe(1000)
    expect(opsForBlock(50, { blockMs: 100, minOps: 4, maxOps: 1000, concurrency: 1 })).toBe(4)
    const { clock, advance } = fakeClock()
    const at = (ms: number): Contender => ({ label: String(ms), operation: async () => advance(ms * 1e6) })
    expect(
      await calibrate(
        [at(0.1), at(0.4)],
        { blockMs: 100, concurrency: 1, probeOps: 10, minOps: 1, maxOps: 10_000 },
        clock,
      ),
    ).toBe(250)
  })

  it('compares on the same number of operations for every side', async () => {
    const { clock, advance } = fakeClock()
    const counts = { a: 0, b: 0 }
    const { results, opsPerBlock } = await compare(
      [
        {
          label: 'a',
          operation: async () => {
            counts.a++
            advance(1e6)
          },
        },
        {
          label: 'b',
          operation: async () => {
            counts.b++
            advance(2e6)
          },
        },
      ],
      { blocks: 3, blockMs: 40, warmupOps: 4, concurrency: 1 },
      clock,
    )
    expect(opsPerBlock).toBe(20)
    expect(results.map((r) => r.ops)).toEqual([60, 60])
    expect(counts.a).toBe(counts.b)
  })

  it('warms up until both the operations and the wall time have passed', async () => {
    const { clock, advance } = fakeClock()
    let ops = 0
    const operation = async (): Promise<void> => {
      ops++
      advance(1e6)
    }
    await warmUp(operation, 10, 35, 1, clock)
    // Blocks of 10 operations of 1 ms each, until 35 ms had passed: four blocks.
    expect(ops).toBe(40)
    ops = 0
    await warmUp(operation, 10, 0, 1, clock)
    expect(ops).toBe(10)
    ops = 0
    await warmUp(operation, 0, 100, 1, clock)
    expect(ops).toBe(0)
  })
})
