import { describe, expect, it } from 'vitest'
import { describeHolder, formatTable, humanDuration, lockJson, remainingText } from '../../src/cli/lock-table.ts'
import type { LockRecord } from '../../src/core/lock-inspector.ts'

const NOW = Date.UTC(2030, 0, 1, 12, 0, 0)
// A record as an inspector reads it at NOW: held while lockUntil is ahead (or unknown).
const record = (fields: { lockUntil?: number; lockedAt?: number; lockedBy?: string }): LockRecord => ({
  name: 'report',
  lockUntil: fields.lockUntil === undefined ? undefined : new Date(fields.lockUntil),
  lockedAt: fields.lockedAt === undefined ? undefined : new Date(fields.lockedAt),
  lockedBy: fields.lockedBy,
  held: fields.lockUntil === undefined || fields.lockUntil > NOW,
  remainingMs: fields.lockUntil === undefined ? undefined : Math.max(0, fields.lockUntil - NOW),
})

describe('humanDuration', () => {
  it.each([
    [0, '<1s'],
    [999, '<1s'],
    [1_000, '1s'],
    [59_999, '59s'],
    [598_700, '9m 58s'],
    [3_600_000, '1h'],
    [7_500_000, '2h 5m'],
    [3 * 86_400_000 + 4 * 3_600_000 + 59_000, '3d 4h'],
    [86_400_000 + 30_000, '1d'],
  ])('%i ms is %s (rounded down, two units at most)', (ms, text) => {
    expect(humanDuration(ms)).toBe(text)
  })
})

describe('lock records', () => {
  it('held while lockUntil is ahead of the store now, free after; JSON in ISO UTC with null for what the store does not keep', () => {
    const held = record({ lockUntil: NOW + 61_000, lockedAt: NOW - 5_000, lockedBy: 'web-1:42:abc' })
    expect(lockJson(held)).toEqual({
      name: 'report',
      state: 'held',
      lockedBy: 'web-1:42:abc',
      lockedAt: '2030-01-01T11:59:55.000Z',
      lockUntil: '2030-01-01T12:01:01.000Z',
      remainingMs: 61_000,
    })
    expect(lockJson(record({ lockUntil: NOW - 1 }))).toMatchObject({
      state: 'free',
      remainingMs: 0,
      lockedBy: null,
      lockedAt: null,
    })
    expect(lockJson(record({}))).toMatchObject({ state: 'held', lockUntil: null, remainingMs: null })
    expect(remainingText(record({ lockUntil: NOW - 125_000 }), new Date(NOW))).toBe('expired 2m 5s ago')
    expect(describeHolder(held)).toBe(
      'held by web-1:42:abc since 2030-01-01T11:59:55.000Z until 2030-01-01T12:01:01.000Z (1m 1s left)',
    )
    expect(describeHolder(record({}))).toBe(
      'held by an unknown holder (the store does not record it) until an expiry the store does not reveal',
    )
  })

  it('formatTable aligns columns two spaces apart without trailing blanks', () => {
    expect(
      formatTable(
        ['A', 'BB', 'C'],
        [
          ['long-name', 'x', ''],
          ['y', 'zzz', 'end'],
        ],
      ),
    ).toBe(['A          BB   C', 'long-name  x', 'y          zzz  end'].join('\n'))
  })
})
