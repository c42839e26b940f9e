import { performance } from 'node:perf_hooks'
import { debuglog } from 'node:util'
import type { Clock } from './clock.ts'
import { beforeDeadline } from './deadline.ts'
import type { LockExecution } from './diagnostics.ts'
import type { Emit } from './executor-events.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import type { ActiveLock } from './active-lock.ts'
import { type RunEnd, type RunError, type RunHandle, type RunLedger, type RunStart, runErrorOf } from './run-ledger.ts'
import { messageOf } from './task.ts'

const debug = debuglog('shedlock')
const noop = (): void => undefined

// How long the executor waits for one run-ledger write before it reports it as failed.
const LEDGER_TIMEOUT_MS = 5_000
// setTimeout's longest delay; a longer recordRunningAfter would fire at once.
const MAX_TIMER_MS = 2 ** 31 - 1

/** The default of the executor's `recordRunningAfter`, in milliseconds. */
export const DEFAULT_RECORD_RUNNING_AFTER_MS = 1_000

/** One run's ledger entry: `end()` records how it ended. */
export interface RunRecording {
  /**
   * With `recordRunningAfter` 0: settles once the run's start is in the ledger, or its write
   * failed or passed its time (never rejects). The task starts after it, so that a process
   * killed at any point of the run leaves its row. `undefined` otherwise.
   */
  readonly started: Promise<void> | undefined
  end(active: ActiveLock, failure: unknown): Promise<void>
}

/**
 * Writes an executor's runs to its run ledger. A slow or failing ledger never delays or fails a
 * run: every write is bounded, and a failure goes to the listener's `onRunLedgerFailed`.
 */
export class RunRecorder {
  readonly #ledger: RunLedger | undefined
  readonly #clock: Clock
  readonly #emit: Emit
  readonly #recordRunningAfter: number
  // Per task name, the latest `nextFireAt` a call gave: read when a run of the task is written.
  readonly #nextFire = new Map<string, () => Date | null | undefined>()

  /** `recordRunningAfter`: milliseconds, 0 to write every run's start when it starts. */
  constructor(
    ledger: RunLedger | undefined,
    clock: Clock,
    emit: Emit,
    recordRunningAfter: number = DEFAULT_RECORD_RUNNING_AFTER_MS,
  ) {
    this.#ledger = ledger
    this.#clock = clock
    this.#emit = emit
    this.#recordRunningAfter = Math.min(recordRunningAfter, MAX_TIMER_MS)
  }

  /** The ledger, if the executor has one. */
  get ledger(): RunLedger | undefined {
    return this.#ledger
  }

  /**
   * Remembers where `name`'s next fire time comes from (`ExecutionOptions.nextFireAt`), for the
   * runs of the task written from now on, this call's and the catch-up's alike.
   */
  expectNext(name: string, nextFireAt: () => Date | null | undefined): void {
    if (this.#ledger) this.#nextFire.set(name, nextFireAt)
  }

  /** `name`'s next fire time, as its scheduler gives it now; `undefined` when unknown, or when the scheduler throws or gives no date. */
  #nextFireOf(name: string): Date | undefined {
    const next = this.#nextFire.get(name)
    if (next === undefined) return undefined
    try {
      const date = next()
      return date instanceof Date && !Number.isNaN(date.getTime()) ? date : undefined
    } catch (error) {
      debug('Lock "%s": nextFireAt threw, the run is recorded without its next fire time: %s', name, messageOf(error))
      return undefined
    }
  }

  /**
   * Records a run: a run that ends within `recordRunningAfter` in one write, with its outcome; a
   * longer one as `running` at that moment, and its end later. `undefined` without a ledger.
   */
  start(
    configuration: LockConfiguration,
    execution: LockExecution,
    slot: Date | undefined,
    owner: string,
    fencingToken: bigint | undefined,
    triggeredBy?: string,
  ): RunRecording | undefined {
    const ledger = this.#ledger
    if (!ledger) return undefined
    const clock = this.#clock
    const started: Mutable<RunStart> = { name: configuration.name, slot, node: owner, startedAt: new Date(clock.now()) }
    // No such key without a token (what ledgers of other stores have always been given).
    if (fencingToken !== undefined) started.fencingToken = fencingToken
    if (triggeredBy !== undefined) started.triggeredBy = triggeredBy
    // The 'running' row is what `shedlock status` and the dashboard show of a long run; a short
    // run is written once, at its end: one statement per run instead of two.
    let run: Promise<RunHandle> | undefined
    const open = (): Promise<RunHandle> => {
      const next = this.#nextFireOf(started.name)
      if (next !== undefined) started.nextFireAt = next
      // A ledger that throws instead of rejecting must not throw out of a timer.
      run = new Promise((resolve) => resolve(ledger.start(started)))
      run.catch(noop) // reported by end(), which awaits it
      return run
    }
    const after = this.#recordRunningAfter
    let timer: ReturnType<typeof setTimeout> | undefined
    let written: Promise<void> | undefined
    if (after === 0) {
      // Its failure is end()'s to report; here only how long the task waits is bounded.
      const late = (): Error => new Error('the start write passed its time')
      written = beforeDeadline(open(), clock.now() + LEDGER_TIMEOUT_MS, clock, late).then(noop, noop)
    } else {
      timer = setTimeout(open, after)
      // Workers and Deno hand out numbers, without unref().
      ;(timer as { unref?: () => unknown }).unref?.()
    }
    const startedAt = performance.now()
    return {
      started: written,
      end: (active, failure) => {
        clearTimeout(timer)
        const end: Mutable<RunEnd> = {
          finishedAt: new Date(clock.now()),
          outcome: active.lost ? 'lock-lost' : failure === undefined ? 'ok' : 'failed',
          durationMs: performance.now() - startedAt,
          error: failure === undefined ? undefined : runErrorOf(failure),
        }
        // Read at the end, not the start: fire times a long run let pass are behind it by now.
        const next = this.#nextFireOf(started.name)
        if (next !== undefined) end.nextFireAt = next
        const opened = run
        return this.write(configuration, execution, async () =>
          opened ? (await opened).finish(end) : recordWhole(ledger, wholeRun(started, end)),
        )
      },
    }
  }

  /**
   * Records `slot` as skipped (it ended without starting), in one write; `cause` says why, where
   * it is not the plain "the lock was held" (a pause, a fold into a later slot's run).
   */
  skipped(
    configuration: LockConfiguration,
    execution: LockExecution,
    slot: Date,
    owner: string,
    cause?: RunError,
    at: Date = new Date(this.#clock.now()),
  ): Promise<void> {
    const ledger = this.#ledger
    if (!ledger) return Promise.resolve()
    const { name } = configuration
    const run: Mutable<RunStart & RunEnd> = {
      name,
      slot,
      node: owner,
      startedAt: at,
      finishedAt: at,
      outcome: 'skipped',
      durationMs: 0,
      error: cause,
    }
    const next = this.#nextFireOf(name)
    if (next !== undefined) run.nextFireAt = next
    return this.write(configuration, execution, () => recordWhole(ledger, run))
  }

  /** Runs one ledger write, bounded; a failure is reported and swallowed: history never fails a run. */
  async write(
    configuration: LockConfiguration,
    execution: LockExecution,
    write: () => Promise<unknown>,
  ): Promise<void> {
    const ledger = this.#ledger
    if (!ledger) return
    try {
      await beforeDeadline(
        write(),
        this.#clock.now() + LEDGER_TIMEOUT_MS,
        this.#clock,
        () => new Error(`the run ledger (${ledger.name}) did not answer within ${LEDGER_TIMEOUT_MS} ms`),
      )
    } catch (error) {
      debug('Lock "%s": could not write the run ledger: %s', configuration.name, messageOf(error))
      this.#emit('onRunLedgerFailed', execution, configuration, error)
    }
  }
}

/**
 * Records a whole run in one write, through the ledger's `record()`; a ledger without one (plain
 * JavaScript, written against an older typing) gets its start and its end, two writes.
 */
function recordWhole(ledger: RunLedger, run: RunStart & RunEnd): Promise<void> {
  const { record } = ledger as Partial<RunLedger>
  if (typeof record === 'function') return record.call(ledger, run)
  return ledger.start(run).then((handle) => handle.finish(run))
}

// The run as one object, written out: the spread of the two (objects of two shapes) was 3.8 % of
// a profile of slot runs, and the ledger's serialisation of its result slower.
function wholeRun(started: RunStart, end: RunEnd): RunStart & RunEnd {
  const run: Mutable<RunStart & RunEnd> = {
    name: started.name,
    slot: started.slot,
    node: started.node,
    startedAt: started.startedAt,
    finishedAt: end.finishedAt,
    outcome: end.outcome,
    durationMs: end.durationMs,
    error: end.error,
  }
  if (started.fencingToken !== undefined) run.fencingToken = started.fencingToken
  if (started.triggeredBy !== undefined) run.triggeredBy = started.triggeredBy
  if (end.nextFireAt !== undefined) run.nextFireAt = end.nextFireAt
  return run
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }
