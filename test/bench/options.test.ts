import { describe, expect, it } from 'vitest'
import { BenchUsageError, MEASUREMENTS, parseBenchArgs, STORES } from '../../bench/options.ts'

describe('bench options', () => {
  it('defaults to every store and measurement, and --quick shortens the run', () => {
    const full = parseBenchArgs([])
    expect(full.stores).toEqual(STORES)
    expect(full.storesGiven).toBe(false)
    // The fleet measurement waits minutes for per-minute crons: only when asked for.
    expect(full.measurements).toEqual(MEASUREMENTS.filter((m) => m !== 'fleet'))
    expect(full.fleet).toMatchObject({ sizes: [{ replicas: 4, jobs: 200 }], ticks: 10, minuteTicks: 2, periodMs: 2000 })
    expect(full).toMatchObject({
      blocks: 10,
      rounds: 100,
      contenders: 32,
      scaleNames: 10_000,
      cycles: 100_000,
      concurrency: [1, 16],
      processes: 3,
    })
    const quick = parseBenchArgs(['--quick'])
    expect(quick.blocks).toBeLessThan(full.blocks)
    expect(quick.blockMs).toBeLessThan(full.blockMs)
    expect(quick.rounds).toBeLessThan(full.rounds)
    expect(quick.processes).toBe(1)
    // An explicit flag wins over --quick.
    expect(parseBenchArgs(['--quick', '--rounds', '100']).rounds).toBe(100)
  })

  it('takes stores and measurements as lists, in the suite order', () => {
    const options = parseBenchArgs([
      '--providers',
      'redis, postgres',
      '--only',
      'herd,overhead',
      '--concurrency',
      '4,1,4',
    ])
    expect(options.stores).toEqual(['postgres', 'redis'])
    expect(options.storesGiven).toBe(true)
    expect(options.measurements).toEqual(['overhead', 'herd'])
    expect(options.concurrency).toEqual([4, 1])
  })

  it('takes the fleet sizes as lists, or the growth grid', () => {
    const sizes = parseBenchArgs(['--only', 'fleet', '--fleet-replicas', '2,4', '--fleet-jobs', '50']).fleet.sizes
    expect(sizes).toEqual([
      { replicas: 2, jobs: 50 },
      { replicas: 4, jobs: 50 },
    ])
    expect(parseBenchArgs(['--fleet-growth']).fleet.sizes).toHaveLength(9)
    expect(parseBenchArgs(['--fleet-contenders', 'shedlock,pg-boss']).fleet.contenders).toEqual(['shedlock', 'pg-boss'])
    expect(() => parseBenchArgs(['--fleet-period', '1500'])).toThrow(/--fleet-period must be 1000 or 2000/)
    expect(() => parseBenchArgs(['--fleet-contenders', 'agenda'])).toThrow(/--fleet-contenders: choose from shedlock/)
  })

  it('rejects unknown names, bad numbers and unknown flags with a message naming them', () => {
    expect(() => parseBenchArgs(['--providers', 'postgres,oracle'])).toThrow(/unknown "oracle"; choose from postgres/)
    expect(() => parseBenchArgs(['--rounds', '0'])).toThrow(/--rounds must be a whole number from 1/)
    expect(() => parseBenchArgs(['--blocks', 'ten'])).toThrow(BenchUsageError)
    expect(() => parseBenchArgs(['--concurrency', '1,x'])).toThrow(/--concurrency/)
    expect(() => parseBenchArgs(['--fast'])).toThrow(BenchUsageError)
    expect(() => parseBenchArgs(['--only', ''])).toThrow(/--only needs at least one/)
    expect(() => parseBenchArgs(['--processes', '0'])).toThrow(/--processes must be a whole number from 1 to 99/)
  })
})
