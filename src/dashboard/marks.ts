import type { RunRecord } from '../core/run-ledger.ts'
import { timeText } from './escape.ts'

/**
 * What a mark of the timeline stands for, read from the run ledger:
 * - `ok`, `failed`, `lock-lost`, `running`: a run, as the ledger recorded it;
 * - `abandoned`: a run whose node stopped before it recorded its end (its lock lapsed);
 * - `caught-up`: a slot run that started more than {@link LATE_MS} after its slot: a catch-up ran
 *   it after every node missed it (it ended `ok`, `failed` or `lock-lost`: see `outcome`);
 * - `skipped`: a slot not run because the task's lock was held at its fire time (`overlap:
 *   'skip'`, a long run of an earlier slot, or a pause); its tooltip names what held it where the
 *   history knows;
 * - `missed`: a slot not run on its own: the `'once'` policy folded it into a later slot's run,
 *   after every node missed it (a catch-up) or after it was owed while the lock was held
 *   (`overlap: 'once'`).
 */
export type MarkKind = 'ok' | 'failed' | 'lock-lost' | 'running' | 'abandoned' | 'caught-up' | 'skipped' | 'missed'

/**
 * A slot run that starts later than this after its slot was run by a catch-up, not by a scheduler
 * firing on time: schedulers fire within a second or two, a catch-up when a node starts.
 */
export const LATE_MS = 60_000

/** One mark: a run or a slot, on the lane of its node. */
export interface Mark {
  readonly kind: MarkKind
  readonly run: RunRecord
  /** Why, in words, for the tooltip and the tasks table. */
  readonly why: string
}

/**
 * The kind of mark a ledger entry makes. A skipped slot says why in its `error` where its executor
 * recorded it (`Folded`, `LockHeld`, `Paused`); for the others, `runs` (the task's other entries,
 * any order) tell: a run of a later slot that was due when the skip was written took its place (a
 * `'once'` fold), and a run in progress at that time held the lock. Without either, a skip
 * recorded more than {@link LATE_MS} late is taken for a fold.
 */
export function markOf(run: RunRecord, runs: readonly RunRecord[] = []): Mark {
  const late = run.slot !== undefined && run.startedAt.getTime() - run.slot.getTime() > LATE_MS
  if (run.outcome === 'skipped') return skippedMark(run, runs, late)
  if (late && run.outcome !== 'running')
    return {
      kind: 'caught-up',
      run,
      why: `caught up: missed at its fire time, run later by a catch-up (${run.outcome})`,
    }
  const why = {
    ok: 'ran, ok',
    failed: 'ran, failed',
    'lock-lost': 'ran, lock lost: another node may have run it too',
    running: 'running',
    abandoned: 'abandoned: its node stopped before the run ended, and its lock lapsed',
  }[run.outcome]
  return { kind: run.outcome, run, why }
}

function skippedMark(skip: RunRecord, runs: readonly RunRecord[], late: boolean): Mark {
  // Executors record why they skipped a slot (the `error` of a skipped entry); older entries,
  // and other writers, leave it out, and the other runs tell.
  const cause = skip.error?.type
  if (cause === 'Paused') return { kind: 'skipped', run: skip, why: `skipped: ${skip.error!.message}` }
  const into = cause === 'LockHeld' ? undefined : foldedInto(skip, runs)
  if (into || cause === 'Folded') {
    const holder = into && skip.slot && holderAt(skip.slot.getTime(), runs, into)
    const run = into ? `the run of slot ${timeText(into.slot!)}` : "a later slot's run"
    const why = holder
      ? `folded: owed while the lock was held by ${runText(holder)}, then folded into ${run} (overlap 'once')`
      : `missed: not run at its fire time; the 'once' policy folded it into ${run}`
    return { kind: 'missed', run: skip, why }
  }
  const holder = holderAt(skip.startedAt.getTime(), runs)
  if (holder) return { kind: 'skipped', run: skip, why: `skipped: the lock was held by ${runText(holder)}` }
  if (cause === 'LockHeld') return { kind: 'skipped', run: skip, why: `skipped: ${skip.error!.message}` }
  if (late)
    return {
      kind: 'missed',
      run: skip,
      why: "missed: not run at its fire time; the 'once' policy folded it into a later slot's run (not in the history read)",
    }
  return {
    kind: 'skipped',
    run: skip,
    why: "skipped: not run at its fire time: its lock was held, or the 'once' policy folded it into a later slot's run (the history read shows neither run)",
  }
}

/** The run that took the place of `skip`: of a later slot, already due when the skip was written. */
function foldedInto(skip: RunRecord, runs: readonly RunRecord[]): RunRecord | undefined {
  if (skip.slot === undefined) return undefined
  const after = skip.slot.getTime()
  const written = skip.startedAt.getTime()
  let best: RunRecord | undefined
  for (const run of runs) {
    if (run.outcome === 'skipped' || run.slot === undefined) continue
    const slot = run.slot.getTime()
    if (slot > after && slot <= written && (best === undefined || slot < best.slot!.getTime())) best = run
  }
  return best
}

/** The latest run (not `except`) started at or before `at` and not ended before it: it held the lock then. */
function holderAt(at: number, runs: readonly RunRecord[], except?: RunRecord): RunRecord | undefined {
  let best: RunRecord | undefined
  for (const run of runs) {
    if (run === except || run.outcome === 'skipped') continue
    const start = run.startedAt.getTime()
    const end =
      run.finishedAt?.getTime() ??
      (run.outcome === 'running' || run.outcome === 'abandoned'
        ? Number.POSITIVE_INFINITY
        : start + (run.durationMs ?? 0))
    if (start <= at && end >= at && (best === undefined || start > best.startedAt.getTime())) best = run
  }
  return best
}

function runText(run: RunRecord): string {
  const slot = run.slot ? ` of slot ${timeText(run.slot)}` : ''
  return `${run.node}'s run${slot} (started ${timeText(run.startedAt)}, ${run.outcome})`
}
