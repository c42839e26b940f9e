import type { RunRecord } from '../core/run-ledger.ts'

/**
 * The time window of the timeline: `'auto'` fits it to the tasks' period (see
 * {@link fittedWindowMs}); the others are fixed.
 */
export type DashboardWindow = 'auto' | 'hour' | 'day' | 'week'

/** The windows the page offers, in the order it lists them. */
export const WINDOWS: readonly DashboardWindow[] = ['auto', 'hour', 'day', 'week']

/** Each fixed window's length in milliseconds. */
export const WINDOW_MS: Readonly<Record<Exclude<DashboardWindow, 'auto'>, number>> = {
  hour: 3_600_000,
  day: 86_400_000,
  week: 604_800_000,
}

/** How many of the busiest task's latest runs the `'auto'` window aims to show. */
export const FIT_RUNS = 40
/** The `'auto'` window's bounds, in milliseconds: 1 hour and 1 day. */
export const FIT_MIN_MS = 3_600_000
export const FIT_MAX_MS = 86_400_000
// Rounded up to this, so that the window does not change at every refresh.
const FIT_STEP_MS = 600_000

/** The window named by `given` (a `?window=` value), or `undefined` for none or an unknown one. */
export function windowOf(given: string | null | undefined): DashboardWindow | undefined {
  return WINDOWS.find((w) => w === given)
}

/** How far back runs are read for `window`, in milliseconds. */
export function readSpanMs(window: DashboardWindow): number {
  return window === 'auto' ? FIT_MAX_MS : WINDOW_MS[window]
}

/** What the `'auto'` window is fitted to: each store's now and its tasks' runs (a `StoreSnapshot`). */
export interface FitInput {
  readonly now: Date
  readonly tasks: readonly { readonly runs: readonly RunRecord[] }[] | undefined
}

/** The length of `window` over `stores` in milliseconds: fitted for `'auto'`. */
export function windowMs(window: DashboardWindow, stores: readonly FitInput[]): number {
  return window === 'auto' ? fittedWindowMs(stores) : WINDOW_MS[window]
}

/**
 * The `'auto'` window: as long as the busiest task's last {@link FIT_RUNS} ledger entries take
 * (extrapolated from fewer, read over the last day), between {@link FIT_MIN_MS} and
 * {@link FIT_MAX_MS}, rounded up to 10 minutes. A day when no task has two entries.
 */
export function fittedWindowMs(stores: readonly FitInput[]): number {
  let span = Number.POSITIVE_INFINITY
  for (const store of stores)
    for (const task of store.tasks ?? []) span = Math.min(span, spanOf(task.runs, store.now.getTime()))
  const bounded = Math.min(FIT_MAX_MS, Math.max(FIT_MIN_MS, span))
  return Math.min(FIT_MAX_MS, Math.ceil(bounded / FIT_STEP_MS) * FIT_STEP_MS)
}

function spanOf(runs: readonly RunRecord[], now: number): number {
  const starts = runs.map((run) => run.startedAt.getTime()).sort((a, b) => b - a)
  if (starts.length >= FIT_RUNS) return now - starts[FIT_RUNS - 1]!
  if (starts.length < 2) return Number.POSITIVE_INFINITY
  return ((now - starts.at(-1)!) * FIT_RUNS) / starts.length
}

/** A window's length for people: `1 h`, `3 h 20 min`, `1 day`, `1 week`. */
export function windowText(ms: number): string {
  if (ms === WINDOW_MS.week) return '1 week'
  if (ms === WINDOW_MS.day) return '1 day'
  const hours = Math.floor(ms / 3_600_000)
  const minutes = Math.round((ms % 3_600_000) / 60_000)
  if (hours === 0) return `${minutes} min`
  return minutes === 0 ? `${hours} h` : `${hours} h ${minutes} min`
}
