import { describe, expect, it } from 'vitest'
import type { ContenderResult } from '../../bench/harness.ts'
import { memoryRow } from '../../bench/measurements/memory.ts'
import {
  formatBytes,
  formatLatency,
  formatRate,
  formatRatio,
  formatReport,
  formatSummary,
  markdownTable,
} from '../../bench/report.ts'
import type { BenchResult } from '../../bench/result.ts'

const contender = (
  label: string,
  p50: number,
  p99: number,
  opsPerSecond: number,
  cpuPerOpUs = 20,
): ContenderResult => ({
  label,
  latency: { count: 100, mean: p50, min: p50 / 2, p50, p90: p99, p99, max: p99 * 2 },
  opsPerSecond,
  ops: 100,
  concurrency: 1,
  cpuPerOpUs,
})

function sampleResult(): BenchResult {
  return {
    startedAt: '2025-01-01T00:00:00.000Z',
    finishedAt: '2025-01-01T00:03:00.000Z',
    seconds: 180,
    machine: { os: 'Linux', cpu: 'Test CPU', cores: 2, memory: '8 GiB', node: '20.19.0' },
    settings: { blocks: 10, blockMs: 250, warmup: 200 },
    stores: {
      postgres: { versions: { server: 'PostgreSQL 15', client: 'pg 8' }, notes: [] },
      mongodb: { skipped: 'SHEDLOCK_MONGODB_URL is not set' },
    },
    overhead: [
      {
        store: 'postgres',
        concurrency: 1,
        opsPerBlock: 500,
        ours: contender('shedlock', 110, 300, 9000, 24),
        baseline: contender('baseline', 100, 250, 10_000, 20),
        p50Ratio: 1.1,
        p99Ratio: 1.2,
        opsRatio: 0.9,
        cpuRatio: 1.2,
      },
      {
        store: 'postgres',
        concurrency: 16,
        opsPerBlock: 800,
        ours: contender('shedlock', 500, 2000, 30_000),
        baseline: contender('baseline', 400, 1500, 32_000),
        p50Ratio: 1.25,
        p99Ratio: 1.33,
        opsRatio: 0.94,
        cpuRatio: 1,
      },
    ],
    roundTrips: [
      {
        store: 'postgres',
        samples: 20,
        ours: {
          acquire: { mean: 1, max: 1, methods: { query: 1 } },
          release: { mean: 1, max: 1, methods: { query: 1 } },
          losingAcquire: { mean: 1, max: 1, methods: { query: 1 } },
        },
        baseline: {
          acquire: { mean: 1, max: 1, methods: { query: 1 } },
          release: { mean: 1, max: 1, methods: { query: 1 } },
          losingAcquire: { mean: 1, max: 1, methods: { query: 1 } },
        },
      },
    ],
    herd: [
      {
        store: 'postgres',
        contenders: 32,
        rounds: 100,
        exactlyOneWinner: 100,
        noWinner: 0,
        severalWinners: 0,
        failures: 0,
        allLosersKnow: { count: 100, mean: 2000, min: 1000, p50: 1800, p90: 2500, p99: 4000, max: 5000 },
        winnerKnows: { count: 100, mean: 500, min: 300, p50: 450, p90: 700, p99: 900, max: 1000 },
        loserCalls: { mean: 1, max: 1 },
      },
    ],
    scale: [
      {
        store: 'postgres',
        mode: 'separate',
        smallNames: 10,
        largeNames: 10_000,
        small: contender('10 names', 100, 200, 9000),
        large: contender('10000 names', 104, 210, 8800),
        p50Ratio: 1.04,
        p99Ratio: 1.05,
      },
    ],
    peers: [
      {
        store: 'postgres',
        concurrency: 1,
        opsPerBlock: 100,
        ours: contender('shedlock', 100, 200, 9000),
        peers: [
          {
            result: contender('advisory-lock', 1500, 3000, 600),
            description: 'advisory-lock 2.0.0, tryLock()',
            p50Ratio: 0.067,
            p99Ratio: 0.067,
            opsRatio: 15,
          },
        ],
      },
    ],
    memory: [
      memoryRow({
        variant: 'executor',
        cycles: 100_000,
        seconds: 2.5,
        heapBefore: 4 * 1024 * 1024,
        heapMiddle: 4 * 1024 * 1024 + 512,
        heapAfter: 4 * 1024 * 1024 + 2048,
        resourcesBefore: { Timeout: 1, TTYWrap: 2 },
        resourcesAfter: { Timeout: 1, TTYWrap: 2 },
        processListenersLeft: 0,
      }),
    ],
    executor: {
      opsPerBlock: 50_000,
      bare: contender('lock() + task + unlock()', 2, 5, 400_000),
      executor: contender('executeWithLock()', 5, 12, 160_000),
      p50Ratio: 2.5,
      p99Ratio: 2.4,
      addedMeanUs: 3.75,
      addedCpuUs: 3.5,
    },
    libraryCpu: [
      {
        what: 'executeWithLock() (in memory)',
        baseline: 'lock() + task + unlock()',
        ops: 1000,
        rounds: 6,
        oursCpuPerOpUs: 3.5,
        baselineCpuPerOpUs: 1.3,
        addedCpuUs: 2.2,
      },
    ],
    errors: [{ store: 'redis', measurement: 'herd', message: 'connection reset' }],
  }
}

describe('bench report', () => {
  it("lists each process's ratios when the overhead ran in several, and says how they were combined", () => {
    const result = sampleResult()
    const [first, ...rest] = result.overhead
    const ratios = (p50Ratio: number, cpuRatio: number) => ({
      p50Ratio,
      p99Ratio: 1,
      opsRatio: 1,
      cpuRatio,
      addedCpuUs: 1,
    })
    const report = formatReport({
      ...result,
      settings: { ...result.settings, processes: 3 },
      overhead: [{ ...first!, processes: [ratios(1.2, 1.04), ratios(1.01, 1.12), ratios(1.06, 1.08)] }, ...rest],
    })
    expect(report).toContain('measured in 3 fresh processes per store')
    expect(report).toContain('| 1.20 / 1.01 / 1.06 |')
    expect(report).toContain('| 1.04 / 1.12 / 1.08 |')
  })

  it("lists each process's ratios against a peer, and judges a peer on p50 and ops/s", () => {
    const result = sampleResult()
    const row = result.peers[0]!
    const peer = row.peers[0]!
    const ratios = (p50Ratio: number, opsRatio: number) => ({ p50Ratio, p99Ratio: 1, opsRatio })
    const report = formatReport({
      ...result,
      peers: [
        {
          ...row,
          peers: [
            {
              ...peer,
              p50Ratio: 0.98,
              opsRatio: 0.99,
              processes: [ratios(0.97, 1.01), ratios(0.98, 0.99), ratios(1.02, 0.97)],
            },
          ],
        },
      ],
    })
    // Faster at p50 but fewer operations per second: not as fast.
    expect(report).toContain('| 0.98 | 0.07 | 0.99 | ✗ | 0.97 / 0.98 / 1.02 | 1.01 / 0.99 / 0.97 |')
    expect(report).toContain("Each peer's ratios are the medians over the processes")
  })

  it('formats latencies, ratios, rates and bytes with their units', () => {
    expect(formatLatency(0.85)).toBe('850 ns')
    expect(formatLatency(12.345)).toBe('12.3 µs')
    expect(formatLatency(1250)).toBe('1.25 ms')
    expect(formatLatency(2_500_000)).toBe('2.50 s')
    // Added CPU can be below 0 (the baseline's block was the dearer one).
    expect(formatLatency(-10.5)).toBe('−10.5 µs')
    expect(formatLatency(-0.5)).toBe('−500 ns')
    expect(formatLatency(Number.NaN)).toBe('–')
    expect(formatRatio(1.149)).toBe('1.15')
    expect(formatRatio(Number.NaN)).toBe('–')
    expect(formatRate(950)).toBe('950')
    expect(formatRate(12_345)).toBe('12.3k')
    expect(formatRate(1_250_000)).toBe('1.25M')
    expect(formatBytes(-512)).toBe('-512 B')
    expect(formatBytes(2048)).toBe('+2.00 KiB')
  })

  it('builds Markdown tables with aligned numeric columns and escaped cells', () => {
    expect(markdownTable(['a', 'n'], [['x|y', '1'], ['z']], [1])).toBe(
      ['| a | n |', '| --- | ---: |', '| x\\|y | 1 |', '| z |  |'].join('\n'),
    )
  })

  it('reports every measurement with its figures, the goals and the method', () => {
    const report = formatReport(sampleResult())
    expect(report).toContain('Single-machine loopback figures: client and servers share 2 cores (Test CPU)')
    expect(report).toContain('- mongodb: skipped (SHEDLOCK_MONGODB_URL is not set)')
    expect(report).toContain(
      '| postgres | 1 | 500 | 110 µs | 100 µs | 1.10 | 300 µs | 250 µs | 1.20 | 9.00k | 10.0k | 0.90 | ✓ |',
    )
    expect(report).toContain('| postgres | 16 | 800 | 500 µs | 400 µs | 1.25 |')
    expect(report).toMatch(/\| postgres \| 16 \|.*\| ✗ \|/)
    expect(report).toContain('| postgres | 1 (query) | 1 (query) | 1 (query) | 1 (query) | 1 (query) | 1 (query) |')
    expect(report).toContain('| postgres | 32 | 100 | 100 | 0 | 0 | 0 | 1.80 ms | 4.00 ms | 450 µs | 1.00 (1) |')
    expect(report).toContain('| postgres | separate, 10 / 10000 | 100 µs | 104 µs | 1.04 |')
    expect(report).toContain(
      '| postgres | 1 | advisory-lock 2.0.0, tryLock() | 1.50 ms | 3.00 ms | 600 | 0.07 | 0.07 | 15.00 | ✓ |',
    )
    expect(report).toContain('| executor | 100000 | 2.5 | 4.00 MiB | +512 B | +1.50 KiB | +2.00 KiB | 0.02 B | 0 | 0 |')
    expect(report).toContain(
      'executeWithLock adds 3.75 µs per execution (mean, from the ops/s of both), 3.50 µs of CPU.',
    )
    expect(report).toContain('| store | callers | CPU/op ours | CPU/op baseline | ratio | added per op |')
    expect(report).toContain('| postgres | 1 | 24.0 µs | 20.0 µs | 1.20 | 4.00 µs |')
    expect(report).toContain(
      '| executeWithLock() (in memory) | 3.50 µs | lock() + task + unlock() | 1.30 µs | 2.20 µs |',
    )
    expect(report).toContain('- redis / herd: connection reset')
  })

  it('summarises ratios only, one row per store', () => {
    const summary = formatSummary(sampleResult())
    expect(summary).toContain(
      '| store | p50 ratio, 1 caller | p99 ratio, 1 | p50 ratio, 16 callers | p99 ratio, 16 | calls per acquire / release | herd: one winner | scale p50 ratio |',
    )
    expect(summary).toContain('| postgres | 1.10 | 1.20 | 1.25 | 1.33 | 1 / 1 | 100/100 | 1.04 |')
    expect(summary).toContain('| postgres | advisory-lock | 1 | 0.07 | 15.00 |')
    expect(summary).toContain('p50 ratio 2.50, 3.75 µs added per execution, 3.50 µs of CPU')
    // CPU: the ratio, and the absolute cost added (what a per-store allowance is stated in).
    expect(summary).toContain('| postgres | 1 | 1.20 | 4.00 µs |')
    expect(summary).toContain(
      '- executeWithLock() (in memory), without I/O: 2.20 µs of CPU per operation over lock() + task + unlock().',
    )
    // The latency table holds ratios only: absolute latencies depend on the machine.
    expect(summary.split('\n\n')[0]).not.toMatch(/\d+ µs \|/)
  })
})
