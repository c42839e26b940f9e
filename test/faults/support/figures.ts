import { appendFileSync } from 'node:fs'
import { inject } from 'vitest'

declare module 'vitest' {
  export interface ProvidedContext {
    /** JSON-lines file where the fault tests record what they measured; global-setup.ts sums it up. */
    faultFiguresFile: string
  }
}

/** One measured figure of the fault suite. */
export interface Figure {
  /** Store (or `core`, `cli`). */
  store: string
  /** Fault group: `holder-killed`, `store-restart`, `network-cut`, `clock-skew`, `outlives`, `soak`, `bad-input`, `secrets`. */
  group: string
  /** Faults injected: kills, restarts, network cuts, skewed clocks, outlived locks, failing password-bearing connections. */
  faults: number
  /** Hostile inputs tried: lock names, option values, durations, configurations. */
  inputs?: number
  /** Soak: executions checked in the ledgers. */
  executions?: number
  /** Soak: overlapping executions found (must be 0). */
  overlaps?: number
  /** Anything else worth printing, e.g. what a store kept across a restart. */
  note?: string
}

/** Records `figure` for the final summary line (and prints it now, for the log). */
export function recordFigure(figure: Figure): void {
  const file = inject('faultFiguresFile')
  appendFileSync(file, `${JSON.stringify(figure)}\n`)
  if (figure.note) console.log(`[faults] ${figure.store} ${figure.group}: ${figure.note}`)
}
