import fc from 'fast-check'
import { LockConfigurationError, lockConfiguration, parseDuration } from 'shedlock'
import { describe, expect, it } from 'vitest'
import { recordFigure } from '../support/figures.ts'

const RUNS = 2_000

/** Strings near the duration grammar: digits, units, ISO designators, signs, spaces, junk. */
const durationLike = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc
    .array(
      fc.constantFrom(
        '0',
        '1',
        '9',
        '15',
        '999999999999999999999',
        '.',
        ',',
        '-',
        '+',
        ' ',
        'ms',
        's',
        'm',
        'h',
        'd',
        'us',
        'µs',
        'ns',
        'P',
        'T',
        'H',
        'M',
        'S',
        'D',
        'W',
        'Y',
        'e',
        'E',
        'Infinity',
        'NaN',
        '0x',
        '_',
        '\0',
      ),
      { maxLength: 8 },
    )
    .map((parts) => parts.join('')),
)
const anyDuration = fc.oneof(
  durationLike,
  fc.double(),
  fc.integer(),
  fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, Number.MAX_SAFE_INTEGER - 1, '100000000d', -0, Number.EPSILON),
)

describe('bad input: durations and lock configurations, property-based', () => {
  it(`parseDuration: ${RUNS} hostile inputs each give whole, safe, non-negative milliseconds or a LockConfigurationError quoting the input`, () => {
    let parsed = 0
    let rejected = 0
    fc.assert(
      fc.property(anyDuration, (input) => {
        let ms: number
        try {
          ms = parseDuration(input)
        } catch (error) {
          expect(error).toBeInstanceOf(LockConfigurationError)
          expect((error as Error).message).toContain(typeof input === 'string' ? JSON.stringify(input) : String(input))
          rejected++
          return
        }
        parsed++
        expect(Number.isSafeInteger(ms) && ms >= 0 && !Object.is(ms, -0), `${JSON.stringify(input)} -> ${ms}`).toBe(
          true,
        )
      }),
      { numRuns: RUNS },
    )
    recordFigure({
      store: 'core',
      group: 'bad-input',
      faults: 0,
      inputs: RUNS,
      note: `parseDuration: ${parsed} parsed, ${rejected} rejected (LockConfigurationError), nothing else`,
    })
  })

  it('parseDuration: every documented form parses to what it says', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (n) => {
        expect(parseDuration(n)).toBe(n)
        expect(parseDuration(String(n))).toBe(n)
        expect(parseDuration(`${n}ms`)).toBe(n)
        expect(parseDuration(`${n}s`)).toBe(n * 1000)
        expect(parseDuration(`${n}m`)).toBe(n * 60_000)
        expect(parseDuration(`PT${n}S`)).toBe(n * 1000)
        expect(parseDuration(`PT${n}M`)).toBe(n * 60_000)
        expect(parseDuration(n + 0.25)).toBe(n + 1)
      }),
      { numRuns: 500 },
    )
  })

  it(`lockConfiguration: ${RUNS} hostile option objects each give a consistent frozen configuration or a LockConfigurationError naming the lock`, () => {
    const name = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 30 }),
      fc.constantFrom('', ' ', '\t\n', 'report'),
      fc.anything(),
    )
    const createdAt = fc.oneof(fc.constant(undefined), fc.date({ noInvalidDate: false }), fc.anything())
    let valid = 0
    let rejected = 0
    fc.assert(
      fc.property(
        name,
        anyDuration,
        fc.oneof(fc.constant(undefined), anyDuration),
        createdAt,
        (n, lockAtMostFor, lockAtLeastFor, at) => {
          let configuration: ReturnType<typeof lockConfiguration>
          try {
            configuration = lockConfiguration({ name: n, lockAtMostFor, lockAtLeastFor, createdAt: at } as never)
          } catch (error) {
            expect(error, String(error)).toBeInstanceOf(LockConfigurationError)
            // A usable name appears in the message, so that the log line says which lock is wrong.
            if (typeof n === 'string' && n.trim() !== '' && !/\p{Cs}/u.test(n))
              expect((error as Error).message).toContain(n)
            rejected++
            return
          }
          valid++
          expect(Object.isFrozen(configuration)).toBe(true)
          expect(typeof configuration.name === 'string' && configuration.name.trim() !== '').toBe(true)
          expect(configuration.lockAtLeastFor).toBeLessThanOrEqual(configuration.lockAtMostFor)
          expect(configuration.lockAtMostUntil.getTime() - configuration.createdAt.getTime()).toBe(
            configuration.lockAtMostFor,
          )
          expect(configuration.lockAtLeastUntil.getTime() - configuration.createdAt.getTime()).toBe(
            configuration.lockAtLeastFor,
          )
        },
      ),
      { numRuns: RUNS },
    )
    expect(valid, 'some random configurations must be valid, or the property proves nothing').toBeGreaterThan(0)
    recordFigure({
      store: 'core',
      group: 'bad-input',
      faults: 0,
      inputs: RUNS,
      note: `lockConfiguration: ${valid} valid, ${rejected} rejected (LockConfigurationError naming the lock)`,
    })
  })
})
