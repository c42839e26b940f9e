import { debuglog } from 'node:util'
import { type CatchUpOptions, CatchUpError, type CatchUpResult, type CatchUpRuntime } from './catch-up.ts'
import type { LockExecution } from './diagnostics.ts'
import { LockProviderError } from './errors.ts'
import { configurationOfChecked, type LockConfiguration } from './lock-configuration.ts'
import type { LockInspector } from './lock-inspector.ts'
import type { SimpleLock } from './lock-provider.ts'
import { type DrainResult, oweSlot, readTaskRecords, type TaskRecords } from './owed.ts'
import { drainHeld, type OwedWaiters } from './owed-waiters.ts'
import { describePause, FOLDED_CAUSE, pauseOf, readHolder } from './pause.ts'
import { catchUpMarkerName } from './slots.ts'
import { type LockedTask, messageOf, newExecution } from './task.ts'

const debug = debuglog('shedlock')

// How many claims, or skipped records, are written at a time (a pool's worth).
const WRITES_AT_ONCE = 8

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

/**
 * One catch-up. Missed fire times become owed slots in the store first (claimed, then owed: two
 * nodes catching up together owe each slot once), and are then run like every owed slot, under
 * the task's lock, with the slots owed before (a run killed mid-catch-up, slots due while the lock
 * was held). The store, not this process, remembers them: a catch-up that dies, or finds the lock
 * held, leaves them owed, and the next holder of the lock runs them.
 */
export class CatchUpRun<T> {
  readonly #runtime: CatchUpRuntime
  readonly #waiters: OwedWaiters
  readonly #inspector: LockInspector
  readonly #task: LockedTask<T>
  readonly #configuration: LockConfiguration
  readonly #plan: Plan
  readonly #signal: AbortSignal | undefined
  readonly #execution: LockExecution
  #missed: Date[] = []

  constructor(
    runtime: CatchUpRuntime,
    waiters: OwedWaiters,
    inspector: LockInspector,
    task: LockedTask<T>,
    configuration: LockConfiguration,
    plan: Plan,
    signal: AbortSignal | undefined,
  ) {
    this.#runtime = runtime
    this.#waiters = waiters
    this.#inspector = inspector
    this.#task = task
    this.#configuration = configuration
    this.#plan = plan
    this.#signal = signal
    this.#execution = newExecution(runtime.providerName, false)
  }

  /**
   * The catch-up: under the task's lock, or, with the lock held elsewhere, `'held'` at once while
   * this node tries again in the background (a catch-up killed mid-way, a holder that died: its
   * lease lapses, and this node then runs what is owed and missed).
   */
  async run(): Promise<CatchUpResult> {
    // A retry this node left in the background is done by this call instead.
    await this.#waiters.takeOver(this.#configuration.name)
    this.#runtime.emit('onLockAttempt', this.#execution, this.#configuration)
    const result = await this.attempt()
    if (result) return result
    const { name } = this.#configuration
    this.#runtime.emit('onLockNotAcquired', this.#execution, this.#configuration)
    // A pause is not an outage: what fell due meanwhile is not owed, and polling would last as
    // long as the pause.
    const pause = pauseOf(await readHolder(() => this.#runtime.inspector(), name))
    if (pause) {
      debug('Lock "%s": %s; no catch-up', name, describePause(pause))
      this.#runtime.emit('onTaskPaused', this.#execution, this.#configuration, pause)
      return nothing('paused')
    }
    debug('Lock "%s": held elsewhere; this node catches up once it frees', name)
    this.#waiters.retry(name, this.#again)
    return nothing('held')
  }

  /** One attempt: `undefined` when the task's lock is held elsewhere. */
  async attempt(): Promise<CatchUpResult | undefined> {
    const { name } = this.#configuration
    let drained: DrainResult | undefined
    let records: TaskRecords | undefined
    let folded: Date[] = []
    try {
      drained = await this.#drain(async () => {
        records = await readTaskRecords(this.#inspector, name)
        folded = await this.#oweMissed(records)
      })
      if (drained === undefined) return undefined
      if (drained.failure) throw drained.failure
      if (records?.latestHeld === undefined && records?.owed.length === 0 && drained.ran.length === 0)
        return nothing('no-history')
      if (this.#missed.length === 0 && drained.ran.length === 0 && drained.notRun.length === 0)
        return nothing('nothing-missed')
      // Folded slots are recorded after the lock is released: they never hold it.
      await this.#recordSkipped(folded, drained.owner)
      return this.#result('ran', drained)
    } catch (error) {
      if (!(error instanceof LockProviderError)) throw error
      throw new CatchUpError(`Catch-up of lock "${name}" stopped: ${error.message}`, this.#result('ran', drained), {
        cause: error,
        lockName: name,
        provider: error.provider,
      })
    }
  }

  // A later attempt, from the background: a catch-up of its own, on a configuration made now.
  readonly #again = async (): Promise<boolean> => {
    const { name, lockAtMostFor } = this.#configuration
    const configuration = configurationOfChecked(name, this.#runtime.clock.now(), lockAtMostFor, 0)
    const run = new CatchUpRun(
      this.#runtime,
      this.#waiters,
      this.#inspector,
      this.#task,
      configuration,
      this.#plan,
      this.#signal,
    )
    const result = await run.attempt()
    if (result) debug('Lock "%s": caught up later: %s, ran %d', name, result.outcome, result.ran.length)
    return result !== undefined
  }

  #result(outcome: CatchUpResult['outcome'], drained?: DrainResult): CatchUpResult {
    const notRun = drained ? drained.notRun : outcome === 'held' ? this.#missed.slice(-this.#owedCount()) : []
    return {
      outcome,
      missed: this.#missed,
      ran: drained?.ran ?? [],
      failed: drained?.failed ?? [],
      notRun,
      ...(drained?.stoppedBy === undefined ? {} : { stoppedBy: drained.stoppedBy }),
    }
  }

  #owedCount(): number {
    return this.#plan.policy === 'once' ? Math.min(1, this.#missed.length) : this.#missed.length
  }

  /**
   * Finds the fire times after the task's latest held slot record, within the window, and owes
   * them: `'all'` each, `'once'` the latest (the older ones are returned, to be recorded as
   * skipped). Each is claimed when it runs: a slot a scheduler fires late meanwhile runs once.
   */
  async #oweMissed(records: TaskRecords): Promise<Date[]> {
    const latest = records.latestHeld
    if (latest === undefined) return []
    const now = this.#runtime.clock.now()
    const fires: Date[] = []
    for (const fire of this.#plan.fireTimes(new Date(Math.max(now - this.#plan.within, latest + 1)), new Date(now))) {
      if (fire instanceof Date && fire.getTime() > latest && fire.getTime() <= now) fires.push(fire)
    }
    fires.sort((a, b) => a.getTime() - b.getTime())
    this.#missed = fires
    for (const slot of fires) this.#runtime.emit('onSlotMissed', this.#execution, this.#configuration, slot)
    const toOwe = this.#plan.policy === 'once' ? fires.slice(-1) : fires
    const owed = await this.#owe(toOwe)
    // Folded into the latest, by the node that owes it only: recorded as skipped once.
    return this.#plan.policy === 'once' && owed === 1 ? fires.slice(0, -1) : []
  }

  /**
   * Owes each of `slots` (oldest first), a few at a time; resolves to how many were owed here (a
   * slot owed by another node already is that node's). Where the store fails, the owed records
   * of the failing batch are given back and it throws: the slots before it stay owed, and the rest
   * are still missed (no claim was taken), for a later catch-up.
   */
  async #owe(slots: readonly Date[]): Promise<number> {
    let owed = 0
    for (let i = 0; i < slots.length; i += WRITES_AT_ONCE) {
      const batch = slots.slice(i, i + WRITES_AT_ONCE)
      const settled = await Promise.allSettled(
        batch.map((slot) => oweSlot(this.#runtime, this.#configuration, slot, this.#plan.retention, this.#execution)),
      )
      const failed = settled.find((one) => one.status === 'rejected')
      if (failed) {
        const taken = settled.flatMap((one) => (one.status === 'fulfilled' && one.value ? one.value : []))
        await Promise.all(taken.map((handle) => this.#giveBack(handle)))
        throw failed.reason
      }
      owed += settled.filter((one) => one.status === 'fulfilled' && one.value).length
    }
    return owed
  }

  async #giveBack(handle: SimpleLock): Promise<void> {
    await handle
      .unlock()
      .catch((error: unknown) =>
        debug('Lock "%s": could not give back a record: %s', this.#configuration.name, messageOf(error)),
      )
  }

  /**
   * Takes the task's lock, then the marker (`<name>@catch-up`, what `shedlock list` shows of a
   * running catch-up), runs `owe` under the lock and then every owed slot of the task.
   * `undefined` when the lock is held elsewhere.
   */
  async #drain(owe: () => Promise<void>): Promise<DrainResult | undefined> {
    const runtime = this.#runtime
    const configuration = this.#configuration
    const request = {
      task: this.#task,
      configuration,
      policy: 'all' as const,
      retention: this.#plan.retention,
      signal: this.#signal,
    }
    const handle = await runtime.acquire(
      runtime.provider,
      runtime.taskLock(configuration),
      configuration,
      this.#execution,
    )
    if (!handle) return undefined
    // A label only: one left by a catch-up that died must not stop this one.
    const marker = await runtime
      .acquire(
        runtime.claimer,
        configurationOfChecked(
          catchUpMarkerName(configuration.name),
          runtime.clock.now(),
          Math.min(configuration.lockAtMostFor, runtime.leaseMs || configuration.lockAtMostFor),
          0,
        ),
        configuration,
        this.#execution,
      )
      .catch(() => undefined)
    try {
      return await drainHeld(runtime, this.#inspector, request, handle, this.#execution, owe)
    } finally {
      await marker
        ?.unlock()
        .catch((error: unknown) =>
          debug(
            'Lock "%s": could not release the catch-up marker (it expires by itself): %s',
            configuration.name,
            messageOf(error),
          ),
        )
    }
  }

  /** `'once'`: the missed slots folded into its one run, recorded as skipped, a few writes at a time. */
  async #recordSkipped(folded: readonly Date[], owner: string): Promise<void> {
    const { recorder, clock } = this.#runtime
    if (!recorder.ledger || folded.length === 0) return
    const at = new Date(clock.now())
    const record = (slot: Date) => recorder.skipped(this.#configuration, this.#execution, slot, owner, FOLDED_CAUSE, at)
    for (let i = 0; i < folded.length; i += WRITES_AT_ONCE) {
      await Promise.all(folded.slice(i, i + WRITES_AT_ONCE).map(record))
    }
  }
}
