import type { Duration } from '../../src/core/duration.ts'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { LockConfigurationError } from '../../src/core/errors.ts'
import {
  isLockConfiguration,
  type LockConfigurationOptions,
  lockConfiguration,
} from '../../src/core/lock-configuration.ts'

const createdAt = new Date('2024-05-01T10:00:00.000Z')

function errorOf(fn: () => unknown): Error {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(LockConfigurationError)
    return error as Error
  }
  throw new Error('expected a LockConfigurationError, nothing was thrown')
}

describe('lockConfiguration', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('refuses a bad name at every call, and takes a name it took before, past the bound of the names it remembers', () => {
    for (let round = 0; round < 2; round++) {
      for (const bad of [' ', 'a\uD800']) expect(errorOf(() => lockConfiguration({ name: bad, lockAtMostFor: '1m' })))
      for (let i = 0; i < 1_500; i++)
        expect(lockConfiguration({ name: `task-${i}`, lockAtMostFor: '1m' }).name).toBe(`task-${i}`)
    }
  })

  it('returns a frozen configuration with durations in ms and absolute deadlines from createdAt', () => {
    const config = lockConfiguration({ name: 'report', lockAtMostFor: '10m', lockAtLeastFor: 'PT30S', createdAt })
    expect(config).toEqual({
      name: 'report',
      createdAt,
      lockAtMostFor: 600_000,
      lockAtLeastFor: 30_000,
      lockAtMostUntil: new Date('2024-05-01T10:10:00.000Z'),
      lockAtLeastUntil: new Date('2024-05-01T10:00:30.000Z'),
    })
    expect(Object.isFrozen(config)).toBe(true)
    expect(() => {
      ;(config as { name: string }).name = 'other'
    }).toThrow(TypeError)
    expect(isLockConfiguration(config)).toBe(true)
  })

  it('accepts numbers as milliseconds', () => {
    const config = lockConfiguration({ name: 'n', lockAtMostFor: 1500, lockAtLeastFor: 0.5, createdAt })
    expect(config.lockAtMostFor).toBe(1500)
    expect(config.lockAtLeastFor).toBe(1)
    expect(config.lockAtMostUntil.getTime()).toBe(createdAt.getTime() + 1500)
    expect(config.lockAtLeastUntil.getTime()).toBe(createdAt.getTime() + 1)
  })

  it('defaults lockAtLeastFor to 0 and createdAt to now', () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2030-01-02T03:04:05.678Z') })
    const config = lockConfiguration({ name: 'n', lockAtMostFor: '1s' })
    expect(config.lockAtLeastFor).toBe(0)
    expect(config.createdAt.toISOString()).toBe('2030-01-02T03:04:05.678Z')
    expect(config.lockAtLeastUntil.getTime()).toBe(config.createdAt.getTime())
    expect(config.lockAtMostUntil.toISOString()).toBe('2030-01-02T03:04:06.678Z')
  })

  it("copies createdAt, so mutating the caller's Date changes nothing", () => {
    const mine = new Date(createdAt)
    const config = lockConfiguration({ name: 'n', lockAtMostFor: '1m', createdAt: mine })
    expect(config.createdAt).not.toBe(mine)
    mine.setTime(0)
    expect(config.createdAt.getTime()).toBe(createdAt.getTime())
    expect(config.lockAtMostUntil.getTime()).toBe(createdAt.getTime() + 60_000)
  })

  it('allows the shortest lock, 1 ms, with lockAtLeastFor 0', () => {
    const config = lockConfiguration({ name: 'n', lockAtMostFor: 1, lockAtLeastFor: 0, createdAt })
    expect(config.lockAtMostUntil.getTime()).toBe(createdAt.getTime() + 1)
    expect(config.lockAtLeastUntil.getTime()).toBe(createdAt.getTime())
  })

  it('allows lockAtLeastFor equal to lockAtMostFor, in different notations', () => {
    const config = lockConfiguration({ name: 'n', lockAtMostFor: 'PT1M', lockAtLeastFor: '60s', createdAt })
    expect(config.lockAtLeastUntil).toEqual(config.lockAtMostUntil)
  })

  it('keeps the name as given (no trimming)', () => {
    expect(lockConfiguration({ name: ' spaced name ', lockAtMostFor: 1 }).name).toBe(' spaced name ')
  })

  it('accepts names outside the BMP (surrogate pairs) and U+FFFD', () => {
    expect(lockConfiguration({ name: 'report-\u{1F512}', lockAtMostFor: 1 }).name).toBe('report-\u{1F512}')
    expect(lockConfiguration({ name: 'a\uFFFD', lockAtMostFor: 1 }).name).toBe('a\uFFFD')
  })

  it('accepts a deadline at the last instant of year 9999, the last every store can hold', () => {
    const last = Date.UTC(9999, 11, 31, 23, 59, 59, 999)
    const config = lockConfiguration({ name: 'n', lockAtMostFor: 1000, createdAt: new Date(last - 1000) })
    expect(config.lockAtMostUntil.toISOString()).toBe('9999-12-31T23:59:59.999Z')
  })

  describe('errors name the lock and the fix', () => {
    it.each([[''], ['   '], ['\t\n']])('blank name %j', (name) => {
      const error = errorOf(() => lockConfiguration({ name, lockAtMostFor: '1m' }))
      expect(error.message).toMatch(/blank/)
      expect(error.message).toContain('non-empty name')
    })

    it.each([[undefined], [null], [42]])('missing or non-string name %s', (name) => {
      const error = errorOf(() =>
        lockConfiguration({ name, lockAtMostFor: '1m' } as unknown as LockConfigurationOptions),
      )
      expect(error.message).toContain('non-empty name')
    })

    it.each([[undefined], [null]])('missing options %s', (options) => {
      const error = errorOf(() => lockConfiguration(options as unknown as LockConfigurationOptions))
      expect(error.message).toContain('lockAtMostFor')
    })

    it('missing lockAtMostFor', () => {
      const error = errorOf(() => lockConfiguration({ name: 'nightly' } as LockConfigurationOptions))
      expect(error.message).toContain('"nightly"')
      expect(error.message).toContain('lockAtMostFor is required')
      expect(error.message).toMatch(/e\.g\./)
    })

    it.each([
      ['lockAtMostFor', { lockAtMostFor: '10foo' }, '"10foo"'],
      ['lockAtMostFor', { lockAtMostFor: -1 }, '-1'],
      ['lockAtMostFor', { lockAtMostFor: '' }, '""'],
      ['lockAtMostFor', { lockAtMostFor: Number.NaN }, 'NaN'],
      ['lockAtLeastFor', { lockAtMostFor: '1m', lockAtLeastFor: '1h30m' }, '"1h30m"'],
      ['lockAtLeastFor', { lockAtMostFor: '1m', lockAtLeastFor: '-5s' }, '"-5s"'],
    ] as const)('bad %s %j', (field, durations, quoted) => {
      const error = errorOf(() => lockConfiguration({ name: 'nightly', ...(durations as { lockAtMostFor: Duration }) }))
      expect(error.message).toContain('"nightly"')
      expect(error.message).toContain(field)
      expect(error.message).toContain(quoted)
      // The fix: which notations are accepted.
      expect(error.message).toMatch(/PT15M|cannot be negative|finite number/)
    })

    it('lockAtLeastFor longer than lockAtMostFor, quoting the durations as given', () => {
      const error = errorOf(() => lockConfiguration({ name: 'nightly', lockAtMostFor: 'PT5M', lockAtLeastFor: '10m' }))
      expect(error.message).toContain('"nightly"')
      expect(error.message).toContain('lockAtLeastFor (10m)')
      expect(error.message).toContain('lockAtMostFor (PT5M)')
      expect(error.message).toMatch(/make lockAtMostFor at least as long as lockAtLeastFor/)
    })

    it('lockAtLeastFor longer than lockAtMostFor, given in milliseconds', () => {
      const error = errorOf(() => lockConfiguration({ name: 'nightly', lockAtMostFor: 1500, lockAtLeastFor: 2000 }))
      expect(error.message).toContain('1500ms')
      expect(error.message).toContain('2s')
    })

    it('by one millisecond', () => {
      expect(() => lockConfiguration({ name: 'n', lockAtMostFor: 0, lockAtLeastFor: 1 })).toThrow(
        LockConfigurationError,
      )
    })

    // UTF-8 stores turn a lone surrogate into U+FFFD, so "a\uD800" and "a\uFFFD" would share a record.
    it.each([['a\uD800'], ['\uDC00b'], ['x\uDBFF\uDBFF']])('name %j with a lone surrogate', (name) => {
      const error = errorOf(() => lockConfiguration({ name, lockAtMostFor: '1m' }))
      expect(error.message).toContain(JSON.stringify(name))
      expect(error.message).toContain('lone surrogate')
      expect(error.message).toContain('fix the string')
    })

    it('a deadline past the last date JavaScript can hold', () => {
      const error = errorOf(() =>
        lockConfiguration({ name: 'nightly', lockAtMostFor: 1001, createdAt: new Date(8.64e15 - 1000) }),
      )
      expect(error.message).toContain('"nightly"')
      expect(error.message).toContain('use a shorter lockAtMostFor')
      expect(() => lockConfiguration({ name: 'n', lockAtMostFor: Number.MAX_SAFE_INTEGER })).toThrow(
        LockConfigurationError,
      )
    })

    // Regression (hardening issue, defect 5): '3000000d' was accepted, and its ISO deadline
    // "+010240-…" sorted before "2026-…", so stores that compare strings granted the lock twice.
    it.each([['3000000d'], ['2920000d'], [`${Date.UTC(10000, 0, 1) - Date.UTC(2024, 0, 1)}`]])(
      'a deadline after year 9999 (lockAtMostFor %s)',
      (lockAtMostFor) => {
        const error = errorOf(() =>
          lockConfiguration({ name: 'nightly', lockAtMostFor: lockAtMostFor as Duration, createdAt }),
        )
        expect(error.message).toBe(
          'Lock "nightly": createdAt + lockAtMostFor is after 9999-12-31T23:59:59.999Z, the last time the stores can hold; use a shorter lockAtMostFor',
        )
      },
    )

    // Regression (hardening issue, defect 4): a lock that expires as it is taken excludes nobody.
    it.each([[0], ['0'], ['0s'], ['PT0S'], [0.0]])('lockAtMostFor %j', (lockAtMostFor) => {
      const error = errorOf(() => lockConfiguration({ name: 'nightly', lockAtMostFor: lockAtMostFor as Duration }))
      expect(error.message).toMatch(/^Lock "nightly": lockAtMostFor is 0, so the lock would expire as it is taken/)
      expect(error.message).toContain('e.g. "10m"')
    })

    it.each([[new Date(Number.NaN)], ['2024-01-01'], [1_700_000_000_000]])('invalid createdAt %s', (value) => {
      const error = errorOf(() => lockConfiguration({ name: 'nightly', lockAtMostFor: '1m', createdAt: value as Date }))
      expect(error.message).toContain('"nightly"')
      expect(error.message).toContain('createdAt must be a valid Date')
    })
  })
})

describe('isLockConfiguration', () => {
  it('tells configurations from options', () => {
    expect(isLockConfiguration(lockConfiguration({ name: 'n', lockAtMostFor: 1 }))).toBe(true)
    expect(isLockConfiguration({ name: 'n', lockAtMostFor: 1 })).toBe(false)
    expect(isLockConfiguration({ name: 'n', lockAtMostFor: 1, createdAt: new Date() })).toBe(false)
    expect(isLockConfiguration(null)).toBe(false)
    expect(isLockConfiguration(undefined)).toBe(false)
  })

  it('does not take an object that only looks like a configuration', () => {
    const real = lockConfiguration({ name: 'n', lockAtMostFor: 1000 })
    expect(isLockConfiguration({ ...real })).toBe(false)
    expect(isLockConfiguration(Object.freeze({ ...real, name: '', lockAtMostFor: -5 }))).toBe(false)
  })
})
