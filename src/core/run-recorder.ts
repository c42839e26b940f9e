import { performance } from 'node:perf_hooks'
import { debuglog } from 'node:util'
import type { Clock } from './clock.ts'
import { beforeDeadline } from './deadline.ts'
import type { LockExecution } from './diagnostics.ts'
import type { Emit } from './executor-events.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import type { ActiveLock } from './lock-context.ts'
import { type RunLedger, type RunOutcome, type RunStart, runErrorOf } from './run-ledger.ts'
import { messageOf } from './task.ts'

const debug = debuglog('shedlock')

// How long the executor waits for one run-ledger write before it reports it as failed.
const LEDGER_TIMEOUT_MS = 5_000

/** One run's ledger entry: `end()` records how it ended. */
export interface RunRecording {
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

  constructor(ledger: RunLedger | undefined, clock: Clock, emit: Emit) {
    this.#ledger = ledger
    this.#clock = clock
    this.#emit = emit
  }

  /** The ledger, if the executor has one. */
  get ledger(): RunLedger | undefined {
    return this.#ledger
  }

  /**
   * Records a run's start now (not awaited before the task), with the fencing token of its lock
   * (`execution.fencingToken`, left out where the store hands out none), and its end when `end`
   * is called; `undefined` without a ledger.
   */
  start(
    configuration: LockConfiguration,
    execution: LockExecution,
    slot: Date | undefined,
    owner: string,
  ): RunRecording | undefined {
    const ledger = this.#ledger
    if (!ledger) return undefined
    const clock = this.#clock
    const startedAt = new Date(clock.now())
    const { fencingToken } = execution
    const started: RunStart =
      fencingToken === undefined
        ? { name: configuration.name, slot, node: owner, startedAt }
        : { name: configuration.name, slot, node: owner, startedAt, fencingToken }
    const run = ledger.start(started)
    run.catch(() => undefined)
    const startedMs = performance.now()
    return {
      end: (active, failure) => {
        const outcome: Exclude<RunOutcome, 'running'> = active.lost
          ? 'lock-lost'
          : failure === undefined
            ? 'ok'
            : 'failed'
        const durationMs = performance.now() - startedMs
        const error = failure === undefined ? undefined : runErrorOf(failure)
        return this.write(configuration, execution, async () =>
          (await run).finish({ finishedAt: new Date(clock.now()), outcome, durationMs, error }),
        )
      },
    }
  }

  /** Records `slot` as skipped (it ended without starting), in one write. */
  skipped(
    configuration: LockConfiguration,
    execution: LockExecution,
    slot: Date,
    owner: string,
    at: Date = new Date(this.#clock.now()),
  ): Promise<void> {
    const ledger = this.#ledger
    if (!ledger) return Promise.resolve()
    const { name } = configuration
    return this.write(configuration, execution, () =>
      ledger.record({ name, slot, node: owner, startedAt: at, finishedAt: at, outcome: 'skipped', durationMs: 0 }),
    )
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
