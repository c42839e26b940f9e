import type { Duration } from '../core/duration.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import { executorOutcomeCases, executorWriteCases } from './run-ledger-executor-cases.ts'
import { ledgerAbandonedCases, ledgerReadCases } from './run-ledger-read-cases.ts'
import { ledgerRecordCases } from './run-ledger-record-cases.ts'
import { keepCases, maxAgeCases } from './run-ledger-retention-cases.ts'
import type { RunLedgerSuiteContext } from './run-ledger-support.ts'

/** Options of {@link runLedgerSuite}. */
export interface RunLedgerSuiteOptions {
  /** The ledger under test, over a real store; it should keep at most `keep` runs per task. */
  ledger: RunLedger
  /** The `keep` the ledger was built with (runs kept per task). */
  keep: number
  /** A lock provider, for the end-to-end case through an executor. */
  provider: () => LockProvider | Promise<LockProvider>
  /**
   * A new ledger over the same store and runs as `ledger`, with the given `maxAge`: enables the case that a task that no longer runs loses its expired runs too.
   */
  withMaxAge?: (maxAge: Duration) => RunLedger
}

/** One case of {@link runLedgerSuite}; register it as `it(c.name, c.run, c.timeoutMs)`. */
export interface RunLedgerTestCase {
  readonly name: string
  readonly timeoutMs: number
  run(): Promise<void>
}

/**
 * The contract of a `RunLedger`, as test cases against a real store: what it keeps of a run
 * (slot, node, times, outcome, duration, error, fencing token), the order it reads runs back in,
 * health, the task list, how many runs it keeps, and how an executor writes it (a short run once,
 * a long one as `running` first).
 */
export function runLedgerSuite(options: RunLedgerSuiteOptions): RunLedgerTestCase[] {
  const cases: RunLedgerTestCase[] = []
  const suite: RunLedgerSuiteContext = {
    add: (name, run, timeoutMs = 15_000) => void cases.push({ name, timeoutMs, run }),
    ledger: options.ledger,
    keep: options.keep,
    provider: () => options.provider(),
  }
  // In the order the suite has always listed its cases, which interleaves the executor and retention groups.
  ledgerRecordCases(suite)
  ledgerReadCases(suite)
  ledgerAbandonedCases(suite)
  executorWriteCases(suite)
  keepCases(suite)
  executorOutcomeCases(suite)
  if (options.withMaxAge) maxAgeCases(suite, options.withMaxAge)
  return cases
}
