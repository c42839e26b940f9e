import { describe, expect, it } from 'vitest'
import { clockOffset } from '../../src/cli/doctor.ts'

describe('clockOffset', () => {
  it('compares the store reading with the middle of the round trip; the uncertainty is half the round trip', () => {
    expect(clockOffset({ storeMs: 1_000, before: 1_100, after: 1_120, resolutionMs: 1, source: '' })).toEqual({
      offset: 110,
      uncertainty: 10,
    })
    expect(clockOffset({ storeMs: 5_000, before: 4_990, after: 4_990, resolutionMs: 1, source: '' })).toEqual({
      offset: -10,
      uncertainty: 0,
    })
  })

  it('a clock of whole seconds was somewhere within its second: half a second more uncertainty, centred', () => {
    expect(clockOffset({ storeMs: 10_000, before: 10_400, after: 10_600, resolutionMs: 1_000, source: '' })).toEqual({
      offset: 0,
      uncertainty: 600,
    })
  })
})
