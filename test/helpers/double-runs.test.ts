import { describe, expect, it } from 'vitest'
import { noDoubleRunInAnyAttempt } from './double-runs.ts'

// A retry runs the same test function again, under the same name, in the same module: two calls
// in one test stand for two attempts.
describe('noDoubleRunInAnyAttempt', () => {
  it('lets every attempt of a test that found no double run go on', () => {
    noDoubleRunInAnyAttempt('duplicates', 0)
    noDoubleRunInAnyAttempt('duplicates', 0)
  })

  it('fails the next attempt of a test whose earlier attempt found a double run, even if the next finds none', () => {
    noDoubleRunInAnyAttempt('ticks that ran twice', 2)
    expect(() => noDoubleRunInAnyAttempt('ticks that ran twice', 0)).toThrow(
      'an earlier attempt of this test found 2 ticks that ran twice; a retry cannot pass it',
    )
  })

  it('keeps tests apart: an earlier test that found a double run does not fail this one', () => {
    noDoubleRunInAnyAttempt('ticks that ran twice', 0)
  })
})
