import { it } from 'vitest'
import type { LockProviderTestCase } from '../../src/testing/index.ts'

/** Registers the conformance cases with vitest, skipped ones visibly. */
export function registerSuite(cases: LockProviderTestCase[]): void {
  for (const c of cases) {
    if (c.skip) it.skip(`${c.name} (${c.skip})`, () => {})
    else it(c.name, c.run, c.timeoutMs)
  }
}
