import type { RunOutcome } from '../core/run-ledger.ts'

// A ledger reads rows that other versions, other tools or a hand may have written: what it does
// not recognise is read as the least it can claim, never thrown.
const OUTCOMES: ReadonlySet<unknown> = new Set<RunOutcome>(['running', 'ok', 'failed', 'lock-lost', 'skipped'])

/** A stored outcome as a run's: one the ledgers write, or `'running'` (read abandoned once its lock lapsed). */
export function storedOutcome(value: unknown): RunOutcome {
  return OUTCOMES.has(value) ? (value as RunOutcome) : 'running'
}

/**
 * A stored fencing token: decimal text (how every ledger writes it, as no store keeps a 64-bit
 * integer exactly), or a bigint or safe integer from a driver that converts; `undefined` otherwise.
 */
export function storedToken(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value)
  return typeof value === 'string' && /^-?\d{1,20}$/.test(value) ? BigInt(value) : undefined
}
