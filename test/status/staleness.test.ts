import { describe, expect, it } from 'vitest'
import { UsageError } from '../../src/support/admin-errors.ts'
import { staleness } from '../../src/status/staleness.ts'

describe('staleness', () => {
  it('reads NAME=AGE per task and a bare AGE for every other task, the later entry winning', () => {
    const { byName, all } = staleness(['report=26h', 'PT2H', 'a=b=90s', 'report=1d'])
    expect([...byName]).toEqual([
      ['report', 86_400_000],
      ['a=b', 90_000],
    ])
    expect(all).toBe(7_200_000)
    expect(staleness([])).toEqual({ byName: new Map(), all: undefined })
  })

  it('a bad entry is a UsageError that names it and the form to use', () => {
    expect(() => staleness(['=1h'])).toThrow(
      new UsageError('--stale "=1h" names no task; use NAME=AGE, e.g. --stale report=26h'),
    )
    expect(() => staleness(['x=soon'])).toThrow(UsageError)
    expect(() => staleness(['x=soon'])).toThrow(
      /^--stale "x=soon": Invalid duration "soon": .*; use NAME=AGE or AGE, e\.g\. --stale report=26h$/,
    )
  })
})
