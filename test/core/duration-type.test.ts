import { describe, expect, it } from 'vitest'
import { type Duration, parseDuration } from '../../src/core/duration.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'

// Compile-time checks: `npm run typecheck` (part of npm test) fails if a line marked with an
// expected error compiles, or an unmarked one does not.
describe('the Duration type', () => {
  it('takes what parseDuration() reads, and catches typos at compile time', () => {
    const good: Duration[] = [
      1500,
      '1500',
      '30s',
      '10m',
      '2h',
      '1d',
      '500ms',
      '10MS',
      '5us',
      '5µs',
      '100ns',
      'PT15M',
      'P1DT2H',
      'pt0.5s',
    ]
    expect(good.map((d) => parseDuration(d))).toEqual([
      1500, 1500, 30_000, 600_000, 7_200_000, 86_400_000, 500, 10, 1, 1, 1, 900_000, 93_600_000, 500,
    ])

    // @ts-expect-error a space and a word are not a duration
    const words: Duration = '10 minutes'
    // @ts-expect-error no week unit
    const week: Duration = '1w'
    // @ts-expect-error a plain string needs parseDuration(), which returns milliseconds
    const plain: Duration = String('10m')
    for (const bad of [words, week]) expect(() => parseDuration(bad)).toThrow()
    expect(parseDuration(plain)).toBe(600_000)

    const widened = { name: 'report', lockAtMostFor: String('10m') }
    // @ts-expect-error options built as a widened object need `satisfies` or a type annotation
    expect(() => lockConfiguration(widened)).not.toThrow()
    const annotated = { name: 'report', lockAtMostFor: '10m' } satisfies Parameters<typeof lockConfiguration>[0]
    expect(lockConfiguration(annotated).lockAtMostFor).toBe(600_000)
  })

  it('lets through what only run time can refuse (documented): fractions and negative numbers', () => {
    const fraction: Duration = '1.5s'
    const negative: Duration = '-5s'
    expect(() => parseDuration(fraction)).toThrow(/Invalid duration "1.5s"/)
    expect(() => parseDuration(negative)).toThrow(/cannot be negative/)
  })
})
