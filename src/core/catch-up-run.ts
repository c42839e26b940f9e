import { debuglog } from 'node:util'
import {
  type CatchUpOptions,
  CatchUpError,
  type CatchUpResult,
  type CatchUpRuntime,
  type HeldTaskLock,
} from './catch-up.ts'
import type { LockExecution } from './diagnostics.ts'
import { LockLostError, LockProviderError } from './errors.ts'
import { type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import { type ActiveLock, runWithActiveLock } from './lock-context.ts'
import type { LockInspector } from './lock-inspector.ts'
import { isExtensibleLock, isKeepAliveLock, type SimpleLock } from './lock-provider.ts'
import { catchUpMarkerName, parseSlotRecordName, slotRecordName } from './slots.ts'
import { type LockedTask, messageOf, newExecution, RunContext } from './task.ts'

const debug = debuglog('shedlock')

// Before each catch-up run the task's lock must have at least this share of lockAtMostFor left;
// otherwise it is extended to a full lockAtMostFor (or, on a store that cannot extend, the
// catch-up stops): a run never starts on a lock about to expire.
const FRESH_SHARE = 0.9
const MIN_SHARE_WITHOUT_EXTENSION = 0.5
// How many skipped records of a 'once' catch-up are written at a time (a pool's worth).
const SKIPPED_WRITES_AT_ONCE = 8

/** A catch-up result for a catch-up that ran nothing. */
export function nothing(outcome: CatchUpResult['outcome']): CatchUpResult {
  return { outcome, missed: [], ran: [], failed: [], notRun: [] }
}

/** What a catch-up was asked to do, validated. */
export interface Plan {
  readonly policy: 'once' | 'all'
  readonly within: number
  readonly retention: number
  readonly fireTimes: CatchUpOptions['fireTimes']
}

/** One catch-up: its locks, what it found missed and what it did about it. */
export class CatchUpRun<T> {
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
        debug(
          'Lock "%s": could not release the catch-up marker (it expires by itself): %s',
          this.#configuration.name,
          messageOf(error),
        ),
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
      debug(
        'Lock "%s": slot %s was claimed by another node meanwhile; it runs there',
        configuration.name,
        slot.toISOString(),
      )
      return true
    }
    const fresh = await this.#refresh(active)
    if (fresh !== undefined) {
      await claim
        .unlock()
        .catch((error: unknown) =>
          debug('Lock "%s": could not give back slot %s: %s', configuration.name, slot.toISOString(), messageOf(error)),
        )
      return this.#stop(slot, fresh)
    }
    await this.#runClaimed(active, slot)
    return true
  }

  /** One run of a claimed missed slot, under the catch-up's lock, recorded in the ledger; its error goes to `failed`. */
  async #runClaimed(active: ActiveLock, slot: Date): Promise<void> {
    const runtime = this.#runtime
    const current = active.configuration
    const record = runtime.recorder.start(current, this.#execution, slot, this.#owner, active.fencingToken)
    let failure: unknown
    try {
      const context = new RunContext(active, current, slot)
      await runWithActiveLock(active, () => runtime.runTask(this.#task, context, this.#execution), context)
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
    debug(
      'Lock "%s": catch-up stopped before slot %s: %s',
      this.#configuration.name,
      slot.toISOString(),
      messageOf(reason),
    )
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
      return new LockLostError(`Lock "${name}": the catch-up's lock could not be extended before its next run`, {
        cause: error,
      })
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
    const { recorder, clock } = this.#runtime
    if (!recorder.ledger || this.#skipped.length === 0) return
    const at = new Date(clock.now())
    const record = (slot: Date) => recorder.skipped(this.#configuration, this.#execution, slot, this.#owner, at)
    for (let i = 0; i < this.#skipped.length; i += SKIPPED_WRITES_AT_ONCE) {
      await Promise.all(this.#skipped.slice(i, i + SKIPPED_WRITES_AT_ONCE).map(record))
    }
  }
}
