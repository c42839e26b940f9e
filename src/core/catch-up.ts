import { debuglog } from 'node:util'
import type { Clock } from './clock.ts'
import type { LockExecution } from './diagnostics.ts'
import { type Duration, parseDuration } from './duration.ts'
import { LockConfigurationError, LockLostError, LockProviderError, type LockProviderErrorOptions } from './errors.ts'
import type { Emit } from './executor-events.ts'
import { type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import { type ActiveLock, runWithActiveLock } from './lock-context.ts'
import type { LockInspector } from './lock-inspector.ts'
import { isExtensibleLock, isKeepAliveLock, type LockProvider, type SimpleLock } from './lock-provider.ts'
import type { RunLedger } from './run-ledger.ts'
import { catchUpMarkerName, parseSlotRecordName, slotRecordName } from './slots.ts'
import { callerSignal, type LockedTask, type LockRequest, messageOf, newExecution, RunContext, type TaskContext, type TaskResult } from './task.ts'

const debug = debuglog('shedlock')

/**
 * What to do about slots every node missed (all were down at their fire time: a deploy, an outage):
 * - `'skip'`: nothing (the default of the integrations);
 * - `'once'`: one run for all of them (for the latest; the others are recorded as skipped);
 * - `'all'`: each of them, oldest first.
 * Catch-up runs are slot runs too: each slot runs at most once across nodes.
 */
export type CatchUpPolicy = 'skip' | 'once' | 'all'

/** Options of `LockingTaskExecutor.catchUp()`. */
export interface CatchUpOptions {
  policy: CatchUpPolicy
  /** How far back a missed slot still counts, in milliseconds or a duration string; at most the slot retention. */
  within: Duration
  /**
   * The schedule's fire times between `from` and `to` (both included), oldest first: what the
   * scheduler would have fired. The integrations ask the scheduler itself (croner's `enumerate()`,
   * cron's `CronTime`, node-cron's `match()`).
   */
  fireTimes: (from: Date, to: Date) => Iterable<Date>
}

/** What `LockingTaskExecutor.catchUp()` did. */
export interface CatchUpResult {
  /**
   * - `'ran'`: missed slots were found and handled (see `ran`, `failed` and `notRun`);
   * - `'nothing-missed'`: the task's latest slot is its schedule's latest fire time;
   * - `'no-history'`: no slot record of the task within the retention: a new task, or one stopped
   *   longer than the retention, has nothing to catch up;
   * - `'held'`: another node holds the lock (it runs, or catches up, right now);
   * - `'skipped'`: the policy is `'skip'`, or the executor is closed.
   */
  readonly outcome: 'ran' | 'nothing-missed' | 'no-history' | 'held' | 'skipped'
  /** The slots this node found missed, oldest first. */
  readonly missed: readonly Date[]
  /** The slots run by this catch-up, oldest first. */
  readonly ran: readonly Date[]
  /** The catch-up runs whose task failed, with the error (each recorded in the run ledger). */
  readonly failed: readonly { readonly slot: Date; readonly error: unknown }[]
  /**
   * Missed slots this catch-up meant to run and did not, because it stopped first (`stoppedBy`
   * says why); they are not claimed, so a later catch-up may still run them. Empty when it
   * handled every missed slot.
   */
  readonly notRun: readonly Date[]
  /**
   * Why the catch-up stopped before handling every missed slot: an `ExecutorClosedError` (a
   * shutdown), a `LockLostError` (its lock expired, or could not be extended in time), or the
   * caller's signal's reason. `undefined` when it handled them all. A store failure rejects
   * instead, with a {@link CatchUpError}.
   */
  readonly stoppedBy?: unknown
}

/**
 * A catch-up the store failed in the middle of: the `LockProviderError` of the failure, with what
 * the catch-up did before it in `result` (the slots it ran, those that failed, and those it did not
 * run: given back, so that a later catch-up can run them).
 */
export class CatchUpError extends LockProviderError {
  override name = 'CatchUpError'
  /** What the catch-up did before the store failed. */
  readonly result: CatchUpResult

  constructor(message: string, result: CatchUpResult, options: LockProviderErrorOptions = {}) {
    super(message, options)
    this.result = result
  }
}

/** A task lock held by a catch-up, registered with the executor (close() aborts it) until `done()`. */
export interface HeldTaskLock {
  readonly active: ActiveLock
  /** The task ended: unregisters the lock; resolves once runs joined to it (re-entrant calls) settled. */
  done(): Promise<void>
}

/** One run's ledger entry: `end()` records how it ended. */
export interface RunRecording {
  end(active: ActiveLock, failure: unknown): Promise<void>
}

/** What a catch-up needs of its executor: the same lock, run, release and recording steps as every run. */
export interface CatchUpRuntime {
  /** Takes task locks (a keep-alive wrapper, when the caller gave one). */
  readonly provider: LockProvider
  /** Takes slot claims: the provider without a keep-alive wrapper, as claims must expire by themselves. */
  readonly claimer: LockProvider
  readonly providerName: string | undefined
  readonly clock: Clock
  readonly runLedger: RunLedger | undefined
  /** The executor's slot retention, in milliseconds. */
  readonly defaultRetention: number
  readonly emit: Emit
  /** True once the executor was closed. */
  closed(): boolean
  /** The claimer's inspector, made once. */
  inspector(): LockInspector | undefined
  /** `call`, tracked: close() waits for it. */
  track<T>(call: Promise<T>): Promise<T>
  /** Asks `from` for `lock`; a store failure is reported as the failure of `configuration` and thrown as a `LockProviderError`. */
  acquire(from: LockProvider, lock: LockConfiguration, configuration: LockConfiguration, execution: LockExecution): Promise<SimpleLock | undefined>
  /** Watches a task lock just taken (lock loss, close()) until `done()`. */
  hold(configuration: LockConfiguration, handle: SimpleLock, execution: LockExecution): HeldTaskLock
  /** Releases a task lock, bounded in time; a failure is reported, never thrown. */
  release(active: ActiveLock, execution: LockExecution): Promise<void>
  runTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): Promise<TaskResult<T>>
  /** Starts the ledger entry of a run, or `undefined` without a ledger. */
  recordRun(configuration: LockConfiguration, execution: LockExecution, slot: Date | undefined, owner: string): RunRecording | undefined
  /** Writes a ledger record, bounded; a failure is reported, never thrown. */
  ledgerWrite(configuration: LockConfiguration, execution: LockExecution, write: () => Promise<unknown>): Promise<void>
  /** Who holds `handle`, as the ledger names nodes. */
  ownerOf(handle: SimpleLock): string
}

// Before each catch-up run the task's lock must have at least this share of lockAtMostFor left;
// otherwise it is extended to a full lockAtMostFor (or, on a store that cannot extend, the
// catch-up stops): a run never starts on a lock about to expire.
const FRESH_SHARE = 0.9
const MIN_SHARE_WITHOUT_EXTENSION = 0.5
// How many skipped records of a 'once' catch-up are written at a time (a pool's worth).
const SKIPPED_WRITES_AT_ONCE = 8

/** Checks the options; resolves what a catch-up runs with. Throws `LockConfigurationError` on bad input. */
function validated<T>(runtime: CatchUpRuntime, task: LockedTask<T>, request: LockRequest, options: CatchUpOptions) {
  if (typeof task !== 'function') throw new LockConfigurationError(`catchUp() needs a task function as its first argument, got ${typeof task}`)
  // Its lockAtLeastFor is dropped: slot claims keep late fires of a slot from running it again, and
  // a lock kept after the catch-up would make the slots fired during it wait for nothing.
  const configuration = lockConfiguration({ ...request, lockAtLeastFor: 0, createdAt: request?.createdAt ?? new Date(runtime.clock.now()) })
  const { name } = configuration
  const policy = options?.policy
  if (policy !== 'skip' && policy !== 'once' && policy !== 'all') {
    throw new LockConfigurationError(`Lock "${name}": catchUp policy must be 'skip', 'once' or 'all', got ${JSON.stringify(policy)}`)
  }
  if (typeof options.fireTimes !== 'function') throw new LockConfigurationError(`Lock "${name}": catchUp needs fireTimes(from, to), the schedule's fire times`)
  const within = parseDuration(options.within)
  const retention = request.slotRetention === undefined ? runtime.defaultRetention : parseDuration(request.slotRetention)
  if (within > retention) {
    throw new LockConfigurationError(
      `Lock "${name}": catchUp within (${within}ms) is longer than the slot retention (${retention}ms), so missed slots could not be told from run ones; raise slotRetention or shorten within`,
    )
  }
  return { configuration, policy, within, retention, signal: callerSignal(request.signal) }
}

/**
 * Runs the slots of `request.name` that every node missed, by `options.policy` (see
 * `LockingTaskExecutor.catchUp()` and docs/slots.md). In order:
 *
 * 1. the catch-up marker `<name>@catch-up`, then the task's lock: two catch-ups never run at once,
 *    and a node whose scheduler fires a slot meanwhile finds the marker and waits for the catch-up
 *    to end instead of recording its slot as skipped;
 * 2. the task's slot records that are held (a claim given back is not a run), and from the latest
 *    of them the missed fire times;
 * 3. each slot to run is claimed just before its run, with the lock made fresh first, so that
 *    neither many slots nor long runs eat the lock's lifetime: `'all'` claims each missed slot in
 *    turn, `'once'` only the latest (the older ones are recorded as skipped);
 * 4. the task's lock, then the marker, are released; the skipped records are written last.
 */
export async function catchUp<T>(runtime: CatchUpRuntime, task: LockedTask<T>, request: LockRequest, options: CatchUpOptions): Promise<CatchUpResult> {
  const { configuration, policy, within, retention, signal } = validated(runtime, task, request, options)
  if (policy === 'skip' || runtime.closed()) return nothing('skipped')
  const inspector = runtime.inspector()
  if (!inspector) {
    throw new LockConfigurationError(
      `Lock "${configuration.name}": catching up needs a provider with an inspector (to read the task's slot records); ${runtime.providerName ?? 'this provider'} has none`,
    )
  }
  signal?.throwIfAborted()
  const run = new CatchUpRun(runtime, inspector, task, configuration, { policy, within, retention, fireTimes: options.fireTimes }, signal)
  return runtime.track(run.run())
}

function nothing(outcome: CatchUpResult['outcome']): CatchUpResult {
  return { outcome, missed: [], ran: [], failed: [], notRun: [] }
}

interface Plan {
  readonly policy: 'once' | 'all'
  readonly within: number
  readonly retention: number
  readonly fireTimes: CatchUpOptions['fireTimes']
}

/** One catch-up: its locks, what it found missed and what it did about it. */
class CatchUpRun<T> {
  readonly #runtime: CatchUpRuntime
  readonly #inspector: LockInspector
  readonly #task: LockedTask<T>
  readonly #configuration: LockConfiguration
  readonly #plan: Plan
  readonly #signal: AbortSignal | undefined
  readonly #execution: LockExecution
  #marker: SimpleLock | undefined
  #owner = ''
  readonly #missed: Date[] = []
  readonly #ran: Date[] = []
  readonly #failed: { slot: Date; error: unknown }[] = []
  readonly #notRun: Date[] = []
  #stoppedBy: unknown
  #skipped: Date[] = []

  constructor(
    runtime: CatchUpRuntime,
    inspector: LockInspector,
    task: LockedTask<T>,
    configuration: LockConfiguration,
    plan: Plan,
    signal: AbortSignal | undefined,
  ) {
    this.#runtime = runtime
    this.#inspector = inspector
    this.#task = task
    this.#configuration = configuration
    this.#plan = plan
    this.#signal = signal
    this.#execution = newExecution(runtime.providerName, false)
  }

  async run(): Promise<CatchUpResult> {
    const runtime = this.#runtime
    const configuration = this.#configuration
    runtime.emit('onLockAttempt', this.#execution, configuration)
    const held = await this.#lock()
    if (!held) return nothing('held')
    const { active } = held
    let outcome: CatchUpResult['outcome'] = 'ran'
    let failure: unknown
    try {
      // Closed, or aborted by the caller, while the locks were being taken: nothing starts.
      this.#signal?.throwIfAborted()
      if (runtime.closed()) return nothing('skipped')
      const stopOnAbort = (): void => active.abort(this.#signal?.reason)
      this.#signal?.addEventListener('abort', stopOnAbort, { once: true })
      try {
        outcome = await this.#catchUp(active)
      } finally {
        this.#signal?.removeEventListener('abort', stopOnAbort)
      }
    } catch (error) {
      failure = error
    } finally {
      await held.done()
      await runtime.release(active, this.#execution)
      await this.#releaseMarker()
    }
    await this.#recordSkipped()
    const result: CatchUpResult = {
      outcome,
      missed: this.#missed,
      ran: this.#ran,
      failed: this.#failed,
      notRun: this.#notRun,
      ...(this.#stoppedBy === undefined ? {} : { stoppedBy: this.#stoppedBy }),
    }
    if (failure === undefined) return result
    if (failure instanceof LockProviderError) {
      throw new CatchUpError(`Catch-up of lock "${configuration.name}" stopped: ${failure.message}`, result, {
        cause: failure,
        lockName: configuration.name,
        provider: failure.provider,
      })
    }
    throw failure
  }

  /** The marker, then the task's lock; `undefined` (and nothing held) when another node has either. */
  async #lock(): Promise<HeldTaskLock | undefined> {
    const runtime = this.#runtime
    const configuration = this.#configuration
    const marker = lockConfiguration({
      name: catchUpMarkerName(configuration.name),
      lockAtMostFor: configuration.lockAtMostFor,
      createdAt: configuration.createdAt,
    })
    this.#marker = await runtime.acquire(runtime.provider, marker, configuration, this.#execution)
    let handle: SimpleLock | undefined
    try {
      if (this.#marker) handle = await runtime.acquire(runtime.provider, configuration, configuration, this.#execution)
    } finally {
      if (!handle) await this.#releaseMarker()
    }
    if (!handle) {
      debug('Lock "%s": another node holds it or catches up; this catch-up runs nothing', configuration.name)
      runtime.emit('onLockNotAcquired', this.#execution, configuration)
      return undefined
    }
    this.#owner = runtime.ownerOf(handle)
    return runtime.hold(configuration, handle, this.#execution)
  }

  async #releaseMarker(): Promise<void> {
    const marker = this.#marker
    this.#marker = undefined
    await marker
      ?.unlock()
      .catch((error: unknown) =>
        debug('Lock "%s": could not release the catch-up marker (it expires by itself): %s', this.#configuration.name, messageOf(error)),
      )
  }

  async #catchUp(active: ActiveLock): Promise<CatchUpResult['outcome']> {
    const found = await this.#findMissed()
    if (found !== 'ran') return found
    const missed = this.#missed
    for (const slot of missed) this.#runtime.emit('onSlotMissed', this.#execution, this.#configuration, slot)
    if (this.#plan.policy === 'once') {
      // Its one run stands for every missed slot; the older ones need no claim, as a later
      // catch-up only looks after the latest record.
      if (await this.#runSlot(active, missed.at(-1)!)) this.#skipped = missed.slice(0, -1)
      else this.#notRun.unshift(...missed.slice(0, -1))
      return 'ran'
    }
    for (let i = 0; i < missed.length; i++) {
      let goOn: boolean
      try {
        goOn = await this.#runSlot(active, missed[i]!)
      } catch (error) {
        this.#notRun.push(...missed.slice(i + 1))
        throw error
      }
      if (!goOn) {
        this.#notRun.push(...missed.slice(i + 1))
        break
      }
    }
    return 'ran'
  }

  /** Reads the task's held slot records; fills `#missed` with the fire times after the latest. */
  async #findMissed(): Promise<CatchUpResult['outcome']> {
    const { name } = this.#configuration
    const { locks } = await this.#inspector.list({ prefix: `${name}@` })
    // Only held records count: a claim given back (the store failed, or the executor closed,
    // before its run) is free again, and expired ones are past the retention. A loop, not
    // Math.max(...): a task may have hundreds of thousands of records.
    let latest = Number.NEGATIVE_INFINITY
    for (const record of locks) {
      if (!record.held) continue
      const parsed = parseSlotRecordName(record.name)
      if (parsed && parsed.name === name && parsed.slot.getTime() > latest) latest = parsed.slot.getTime()
    }
    if (latest === Number.NEGATIVE_INFINITY) return 'no-history'
    const now = this.#runtime.clock.now()
    const fires: Date[] = []
    for (const fire of this.#plan.fireTimes(new Date(Math.max(now - this.#plan.within, latest + 1)), new Date(now))) {
      if (fire instanceof Date && fire.getTime() > latest && fire.getTime() <= now) fires.push(fire)
    }
    fires.sort((a, b) => a.getTime() - b.getTime())
    this.#missed.push(...fires)
    return fires.length === 0 ? 'nothing-missed' : 'ran'
  }

  /**
   * Claims `slot` and runs it, on a lock made fresh first. False when the catch-up must stop (the
   * lock is lost or about to be, the executor closed, the caller aborted): `slot` is then in
   * `notRun`, unclaimed. A slot another node claimed meanwhile is its (it runs it once this
   * catch-up ends): true, not run here.
   */
  async #runSlot(active: ActiveLock, slot: Date): Promise<boolean> {
    const stop = this.#stopReason(active)
    if (stop !== undefined) return this.#stop(slot, stop)
    const runtime = this.#runtime
    const configuration = this.#configuration
    const claimConfiguration = lockConfiguration({
      name: slotRecordName(configuration.name, slot),
      lockAtMostFor: this.#plan.retention,
      createdAt: new Date(runtime.clock.now()),
    })
    let claim: SimpleLock | undefined
    try {
      claim = await runtime.acquire(runtime.claimer, claimConfiguration, configuration, this.#execution)
    } catch (error) {
      this.#notRun.push(slot)
      throw error
    }
    if (!claim) {
      debug('Lock "%s": slot %s was claimed by another node meanwhile; it runs there', configuration.name, slot.toISOString())
      return true
    }
    const fresh = await this.#refresh(active)
    if (fresh !== undefined) {
      await claim
        .unlock()
        .catch((error: unknown) => debug('Lock "%s": could not give back slot %s: %s', configuration.name, slot.toISOString(), messageOf(error)))
      return this.#stop(slot, fresh)
    }
    await this.#runClaimed(active, slot)
    return true
  }

  /** One run of a claimed missed slot, under the catch-up's lock, recorded in the ledger; its error goes to `failed`. */
  async #runClaimed(active: ActiveLock, slot: Date): Promise<void> {
    const runtime = this.#runtime
    const current = active.configuration
    const record = runtime.recordRun(current, this.#execution, slot, this.#owner)
    let failure: unknown
    try {
      await runWithActiveLock(active, () => runtime.runTask(this.#task, new RunContext(active, current, slot), this.#execution))
    } catch (error) {
      failure = error
      this.#failed.push({ slot, error })
    } finally {
      this.#ran.push(slot)
      runtime.emit('onSlotCaughtUp', this.#execution, current, slot)
      await record?.end(active, failure)
    }
  }

  #stop(slot: Date, reason: unknown): false {
    this.#notRun.push(slot)
    this.#stoppedBy = reason
    debug('Lock "%s": catch-up stopped before slot %s: %s', this.#configuration.name, slot.toISOString(), messageOf(reason))
    return false
  }

  /** Why no run may start now (the lock lost, the executor closed, the caller aborted), or `undefined`. */
  #stopReason(active: ActiveLock): unknown {
    if (active.signal.aborted) return active.signal.reason
    return undefined
  }

  /**
   * Makes the lock fresh for a run: extended to a full lockAtMostFor (the marker too) unless most of
   * it is left. Returns why it cannot be, or `undefined`.
   */
  async #refresh(active: ActiveLock): Promise<unknown> {
    const stop = this.#stopReason(active)
    if (stop !== undefined) return stop
    const { lockAtMostFor, name } = this.#configuration
    const handle = active.handle
    if (!handle || isKeepAliveLock(handle)) return undefined
    const left = active.configuration.lockAtMostUntil.getTime() - this.#runtime.clock.now()
    if (left >= lockAtMostFor * FRESH_SHARE) return undefined
    if (!isExtensibleLock(handle)) {
      if (left >= lockAtMostFor * MIN_SHARE_WITHOUT_EXTENSION) return undefined
      return new LockLostError(
        `Lock "${name}": the catch-up's lock has ${Math.max(0, left)} ms of its ${lockAtMostFor} ms left and its provider cannot extend it; the remaining missed slots are left to a later catch-up`,
      )
    }
    try {
      await active.extend(lockAtMostFor, 0)
      await this.#extendMarker()
    } catch (error) {
      if (error instanceof LockProviderError) throw error
      return new LockLostError(`Lock "${name}": the catch-up's lock could not be extended before its next run`, { cause: error })
    }
    return this.#stopReason(active)
  }

  async #extendMarker(): Promise<void> {
    const marker = this.#marker
    if (!marker || isKeepAliveLock(marker) || !isExtensibleLock(marker)) return
    this.#marker = undefined
    const extended = await marker.extend(this.#configuration.lockAtMostFor, 0)
    if (!extended) throw new LockLostError(`Lock "${this.#configuration.name}": the catch-up marker expired`)
    this.#marker = extended
  }

  /**
   * `'once'`: the missed slots folded into its one run, recorded as skipped after the locks are
   * released, a few writes at a time: thousands of them one by one took seconds on PostgreSQL.
   */
  async #recordSkipped(): Promise<void> {
    const { runLedger, clock } = this.#runtime
    if (!runLedger || this.#skipped.length === 0) return
    const { name } = this.#configuration
    const at = new Date(clock.now())
    const record = (slot: Date) =>
      this.#runtime.ledgerWrite(this.#configuration, this.#execution, () =>
        runLedger.record({ name, slot, node: this.#owner, startedAt: at, finishedAt: at, outcome: 'skipped', durationMs: 0 }),
      )
    for (let i = 0; i < this.#skipped.length; i += SKIPPED_WRITES_AT_ONCE) {
      await Promise.all(this.#skipped.slice(i, i + SKIPPED_WRITES_AT_ONCE).map(record))
    }
  }
}
