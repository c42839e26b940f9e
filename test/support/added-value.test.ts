import { describe, expect, it } from 'vitest'
import { addedValue, parseAddedValue } from '../../src/support/added-value.ts'

describe('addedValue', () => {
  it('writes the time as toISOString() does, whatever second or millisecond, cached or not', () => {
    const times = [
      0, 1, 9, 10, 99, 100, 999, 1000, -1, -999, -1000, -1001, 1_700_000_000_000, 1_700_000_000_009, 1_700_000_000_999,
      253_402_300_799_999, -62_198_755_200_000, 8.64e15, -8.64e15,
    ]
    for (let i = 0; i < 2000; i++) times.push(1_700_000_000_000 + Math.floor(Math.random() * 5000))
    for (const ms of times) expect(addedValue(ms, 'host:1:ab')).toBe(`ADDED:${new Date(ms).toISOString()}@host:1:ab`)
  })

  it('falls back to toISOString() for fractions, and throws as it does out of range', () => {
    expect(addedValue(1.5, 'o')).toBe(`ADDED:${new Date(1.5).toISOString()}@o`)
    expect(() => addedValue(8.64e15 + 1, 'o')).toThrow(RangeError)
    expect(() => addedValue(Number.NaN, 'o')).toThrow(RangeError)
  })

  it('reads back what it wrote', () => {
    expect(parseAddedValue(addedValue(1_700_000_000_123, 'host:1:ab'))).toEqual({
      lockedAt: 1_700_000_000_123,
      lockedBy: 'host:1:ab',
    })
  })
})
