import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { checkLedger, heapSlope, readLedgers } from './support/ledger.ts'

// The soak's verdict rests on this checker: it must find what it is meant to find.
describe('the ledger checker (self-test)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-faults-ledger-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const ledgers = (files: Record<string, string[]>) => {
    const paths: Record<string, string> = {}
    for (const [node, lines] of Object.entries(files)) {
      paths[node] = join(dir, `${node}-${Math.random()}.ledger`)
      writeFileSync(paths[node], lines.map((l) => `${l}\n`).join(''))
    }
    const { executions, malformed } = readLedgers(paths)
    return checkLedger(executions, malformed)
  }

  it('accepts executions of one name that follow each other, even back to back', () => {
    const report = ledgers({
      a: ['1 S 100 x', '1 E 200', '2 S 400 x', '2 E 500'],
      b: ['1 S 200 x', '1 E 300', '2 S 300 y', '2 E 900'],
    })
    expect(report.overlaps).toEqual([])
    expect(report.executions).toBe(4)
    expect(report.perNode).toEqual({ a: 2, b: 2 })
    expect(report.perName).toEqual({ x: 3, y: 1 })
  })

  it('finds two executions of one name on two nodes that overlap by a nanosecond', () => {
    const report = ledgers({ a: ['1 S 100 x', '1 E 201'], b: ['1 S 200 x', '1 E 300'] })
    expect(report.overlaps).toHaveLength(1)
    expect(report.overlaps[0]!.name).toBe('x')
  })

  it('finds an execution nested inside a long one, past a short one in between', () => {
    const report = ledgers({ a: ['1 S 0 x', '1 E 1000'], b: ['1 S 10 x', '1 E 20'], c: ['1 S 500 x', '1 E 600'] })
    expect(report.overlaps).toHaveLength(2)
  })

  it('counts a start without an end as never ending, and lines it cannot read as malformed', () => {
    const report = ledgers({ a: ['1 S 0 x', '2 E 5', 'garbage'], b: ['1 S 50 x', '1 E 60'] })
    expect(report.unfinished).toBe(1)
    expect(report.overlaps).toHaveLength(1)
    expect(report.malformed).toBe(2)
  })

  it('measures heap growth after the warm-up half', () => {
    const flat = Array.from({ length: 20 }, (_, i) => ({
      at: i * 1000,
      heapUsed: (i < 10 ? 5_000_000 + i * 100_000 : 6_000_000) + (i % 2) * 1000,
    }))
    const leaking = Array.from({ length: 20 }, (_, i) => ({ at: i * 1000, heapUsed: 5_000_000 + i * 50_000 }))
    expect(Math.abs(heapSlope(flat))).toBeLessThan(1_000)
    expect(heapSlope(leaking)).toBeCloseTo(50_000, -2)
    // From a given instant on: the warm-up before it does not count.
    expect(Math.abs(heapSlope(flat, 10_000))).toBeLessThan(1_000)
    expect(heapSlope(flat, 0)).toBeGreaterThan(20_000)
    expect(heapSlope(leaking, 15_000)).toBeCloseTo(50_000, -2)
  })
})
