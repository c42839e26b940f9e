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
  /** Fault group: `holder-killed`, `store-restart`, `network-cut`, `clock-skew`, `outlives`, `soak`, `bad-input`, `secrets`, `slot-skew`, `slot-missed`, `slot-history`. */
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
  /** The slot proofs (docs/slots.md): what one store and mode ran. */
  slots?: SlotFigures
}

/** What a slot proof counted, from the tasks' own proof ledger. */
export interface SlotFigures {
  /** `plain` (the control: no slot), `slot`, or the catch-up policy of the missed-slots proof. */
  mode: string
  /** Slots the schedule fired (or, in the missed-slots proof, had). */
  slots: number
  /** Executions per node, by node name. */
  runsPerNode: Record<string, number>
  /** Executions beyond the first of each slot. */
  duplicates: number
  /** Slots that should have run and did not. */
  missing: number
}

/** Records `figure` for the final summary line (and prints it now, for the log). */
export function recordFigure(figure: Figure): void {
  const file = inject('faultFiguresFile')
  appendFileSync(file, `${JSON.stringify(figure)}\n`)
  if (figure.note) console.log(`[faults] ${figure.store} ${figure.group}: ${figure.note}`)
}
