import { expect } from 'vitest'

// Per test file (vitest isolates modules per file), and kept across the retries of a test.
const found = new Map<string, string>()

/**
 * Call where a test counts double runs (ticks that ran twice, runs that overlapped, a command that
 * ran on two processes), before asserting that there are none. CI retries a failed test once
 * (vitest.config.ts); this fails the retry of a test whose earlier attempt found a double run, so
 * that a retry can pass a stalled machine but never the very thing shedlock exists to prevent.
 */
export function noDoubleRunInAnyAttempt(what: string, count: number): void {
  const test = expect.getState().currentTestName ?? '(a test without a name)'
  const earlier = found.get(test)
  if (count > 0 && earlier === undefined) found.set(test, `${count} ${what}`)
  if (earlier !== undefined) throw new Error(`an earlier attempt of this test found ${earlier}; a retry cannot pass it`)
}
