/**
 * What happens to a slot whose fire time comes while the task's lock is held (a run of an
 * earlier slot, a catch-up, a holder that died and whose lease has not lapsed yet):
 * - `'all'`: it is owed, and runs once the lock frees, after the slots owed before it (the
 *   default: every fire time runs; Temporal's "buffer all");
 * - `'once'`: it is owed, but when the lock frees only the latest owed slot runs, and the older
 *   ones are recorded as skipped (Temporal's "buffer one", our catch-up's `'once'`);
 * - `'skip'`: it is recorded as skipped and never runs (Java ShedLock's behaviour).
 * See docs/slots.md.
 */
export type OverlapPolicy = 'skip' | 'once' | 'all'

/** The default {@link OverlapPolicy}: every fire time runs. */
export const DEFAULT_OVERLAP: OverlapPolicy = 'all'

/** Checks an overlap policy given by a caller. */
export function isOverlapPolicy(value: unknown): value is OverlapPolicy {
  return value === 'skip' || value === 'once' || value === 'all'
}
