import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import type { LockProvider } from '../core/lock-provider.ts'
import type { RunLedger } from '../core/run-ledger.ts'

/** What the run ledger suite's groups share: how to add a case (budget in ms, 15 s by default), ledger, provider. */
export interface RunLedgerSuiteContext {
  add(name: string, run: () => Promise<void>, timeoutMs?: number): void
  /** The ledger under test. */
  readonly ledger: RunLedger
  /** Runs the ledger keeps per task. */
  readonly keep: number
  /** A new lock provider over the store, for the cases through an executor. */
  provider(): LockProvider | Promise<LockProvider>
}

/** Asserts that `a` is a Date within 1 ms of `b`; `what` names it in the message. */
export function assertSameTime(a: Date | undefined, b: Date, what: string): void {
  assert.ok(a instanceof Date, `${what} is not a Date`)
  assert.ok(Math.abs(a.getTime() - b.getTime()) <= 1, `${what} ${a.toISOString()} is not ${b.toISOString()}`)
}

/** A fresh task name, so that cases are independent and may share a store. */
export function taskName(): string {
  return `ledger-${randomUUID()}`
}
