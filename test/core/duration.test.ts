import { describe, expect, it } from 'vitest'
import { formatDuration, parseDuration } from '../../src/core/duration.ts'
import { LockConfigurationError, ShedLockError } from '../../src/core/errors.ts'

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

describe('parseDuration', () => {
  describe('numbers are milliseconds', () => {
    it.each([
      [0, 0],
      [1, 1],
      [1500, 1500],
      [0.1, 1],
      [0.5, 1],
      [1.0001, 2],
      [2.9, 3],
      [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
    ])('%s -> %s', (input, expected) => {
      expect(parseDuration(input)).toBe(expected)
    })
  })

  describe('<integer><unit>', () => {
    it.each([
      ['5ms', 5],
      ['1s', SECOND],
      ['30s', 30 * SECOND],
      ['10m', 10 * MINUTE],
      ['2h', 2 * HOUR],
      ['1d', DAY],
      ['0s', 0],
      ['007s', 7 * SECOND],
    ])('%s -> %s ms', (input, expected) => {
      expect(parseDuration(input)).toBe(expected)
    })

    it.each([
      ['5MS', 5],
      ['1S', SECOND],
      ['10M', 10 * MINUTE],
      ['2H', 2 * HOUR],
      ['1D', DAY],
      ['3Ms', 3],
    ])('units are case-insensitive: %s -> %s ms', (input, expected) => {
      expect(parseDuration(input)).toBe(expected)
    })

    it.each([
      ['1ns', 1],
      ['999999ns', 1],
      ['1000000ns', 1],
      ['1000001ns', 2],
      ['1500000ns', 2],
      ['0ns', 0],
      ['1us', 1],
      ['999us', 1],
      ['1000us', 1],
      ['1001us', 2],
      ['3000US', 3],
      ['5NS', 1],
    ])('ns and us round up to whole milliseconds: %s -> %s', (input, expected) => {
      expect(parseDuration(input)).toBe(expected)
    })

    it('exact multiples of ns and us are not pushed up by floating-point error', () => {
      for (let n = 1; n <= 5000; n++) {
        expect(parseDuration(`${n * 1000}us`)).toBe(n)
        expect(parseDuration(`${n * 1_000_000}ns`)).toBe(n)
      }
    })
  })

  it.each([
    ['0', 0],
    ['1500', 1500],
    ['86400000', DAY],
  ])('a bare integer string is milliseconds: %s', (input, expected) => {
    expect(parseDuration(input)).toBe(expected)
  })

  describe('ISO-8601', () => {
    it.each([
      ['PT15M', 15 * MINUTE],
      ['PT30S', 30 * SECOND],
      ['PT0.5S', 500],
      ['PT1.25S', 1250],
      ['PT0,5S', 500],
      ['PT0.0001S', 1],
      ['PT0.000000001S', 1],
      ['PT0S', 0],
      ['P1D', DAY],
      ['P1DT2H', DAY + 2 * HOUR],
      ['P2DT3H4M', 2 * DAY + 3 * HOUR + 4 * MINUTE],
      ['PT1H30M', HOUR + 30 * MINUTE],
      ['PT1H2M3.004S', HOUR + 2 * MINUTE + 3 * SECOND + 4],
      ['pt1m', MINUTE],
      ['p1dt1h', DAY + HOUR],
    ])('%s -> %s ms', (input, expected) => {
      expect(parseDuration(input)).toBe(expected)
    })

    it('fractions of a second round up to whole milliseconds, exactly for every millisecond', () => {
      for (let ms = 1; ms < 1000; ms++) {
        const digits = String(ms).padStart(3, '0')
        expect(parseDuration(`PT0.${digits}S`)).toBe(ms)
        expect(parseDuration(`PT0.${digits}000001S`)).toBe(ms + 1)
      }
    })
  })

  it.each([
    ['  30s  ', 30 * SECOND],
    ['\t1500\n', 1500],
    [' PT1M ', MINUTE],
  ])('trims whitespace: %j', (input, expected) => {
    expect(parseDuration(input)).toBe(expected)
  })

  describe('rejects invalid input with a LockConfigurationError quoting it', () => {
    it.each([
      ['-1', '"-1"'],
      ['-5s', '"-5s"'],
      ['-PT5S', '"-PT5S"'],
      ['', '""'],
      ['   ', '"   "'],
      ['1.5s', '"1.5s"'],
      ['1.5', '"1.5"'],
      ['1h30m', '"1h30m"'],
      ['10foo', '"10foo"'],
      ['10 s', '"10 s"'],
      ['s', '"s"'],
      ['1e3', '"1e3"'],
      ['+5s', '"+5s"'],
      ['P', '"P"'],
      ['PT', '"PT"'],
      ['P1DT', '"P1DT"'],
      ['PT1.5M', '"PT1.5M"'],
      ['P1W', '"P1W"'],
      ['PT5', '"PT5"'],
      ['99999999999999999999', '"99999999999999999999"'],
      ['999999999999d', '"999999999999d"'],
      ['P999999999999D', '"P999999999999D"'],
    ])('string %j', (input, quoted) => {
      let caught: unknown
      try {
        parseDuration(input)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(LockConfigurationError)
      expect(caught).toBeInstanceOf(ShedLockError)
      expect((caught as Error).message).toContain(quoted)
    })

    it.each([
      [-1, '-1'],
      [-0.5, '-0.5'],
      [Number.NaN, 'NaN'],
      [Number.POSITIVE_INFINITY, 'Infinity'],
      [Number.NEGATIVE_INFINITY, '-Infinity'],
      [1e300, '1e+300'],
      [Number.MAX_SAFE_INTEGER + 2, String(Number.MAX_SAFE_INTEGER + 2)],
    ])('number %s', (input, quoted) => {
      expect(() => parseDuration(input)).toThrow(LockConfigurationError)
      expect(() => parseDuration(input)).toThrow(quoted)
    })

    it.each([[null], [undefined], [true], [{}], [[1]], [10n], [new Date(0)]])('non-string, non-number %s', (input) => {
      expect(() => parseDuration(input as unknown as string)).toThrow(LockConfigurationError)
    })

    it('says what is accepted', () => {
      expect(() => parseDuration('10foo')).toThrow(/PT15M/)
      expect(() => parseDuration('-5s')).toThrow(/negative/)
      expect(() => parseDuration('')).toThrow(/empty/)
      expect(() => parseDuration(1e300)).toThrow(/too large/)
    })
  })
})

describe('parseDuration remembers what it parsed', () => {
  it('gives the same answer for a text again, past the bound of what it keeps, and refuses a bad text every time', () => {
    for (let round = 0; round < 2; round++) {
      for (let i = 1; i <= 600; i++) expect(parseDuration(`${i}s`)).toBe(i * SECOND)
      expect(parseDuration(' 10m ')).toBe(10 * MINUTE)
      expect(() => parseDuration('10 minutes')).toThrow(LockConfigurationError)
      expect(() => parseDuration('-5s')).toThrow('durations cannot be negative')
    }
  })
})

describe('formatDuration', () => {
  it.each([
    [0, '0ms'],
    [500, '500ms'],
    [1000, '1s'],
    [30_000, '30s'],
    [90_500, '90500ms'],
    [90_000, '90s'],
    [MINUTE, '1m'],
    [10 * MINUTE, '10m'],
    [2 * HOUR, '2h'],
    [DAY, '1d'],
    [DAY + HOUR, '25h'],
  ])('%s -> %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text)
    expect(parseDuration(text)).toBe(ms)
  })
})
