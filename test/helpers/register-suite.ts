import { it } from 'vitest'
import type { LockInspectorTestCase, LockProviderTestCase, RunLedgerTestCase } from '../../src/testing/index.ts'

/** Registers the conformance cases with vitest, skipped ones visibly. */
export function registerSuite(cases: LockProviderTestCase[]): void {
  for (const c of cases) {
    if (c.skip) it.skip(`${c.name} (${c.skip})`, () => {})
    else it(c.name, c.run, c.timeoutMs)
  }
}

/** Registers the inspector contract's cases with vitest. */
export function registerInspectorSuite(cases: LockInspectorTestCase[]): void {
  for (const c of cases) it(`inspector ${c.name}`, c.run, c.timeoutMs)
}

/** Registers the run ledger contract's cases with vitest. */
export function registerRunLedgerSuite(cases: RunLedgerTestCase[]): void {
  for (const c of cases) it(`run ledger ${c.name}`, c.run, c.timeoutMs)
}
