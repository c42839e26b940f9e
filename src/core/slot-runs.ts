import { debuglog } from 'node:util'
import type { LockExecution } from './diagnostics.ts'
import { configurationOfChecked, type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import { type LockPair, lockPairOf, type SimpleLock } from './lock-provider.ts'
import { oweSlot } from './owed.ts'
import type { OverlapPolicy } from './overlap.ts'
import type { OwedWaiters } from './owed-waiters.ts'
import { describePause, heldCause, pauseCause, pauseOf, readHolder, type TaskPause } from './pause.ts'
import { closedBeforeStart, type RunSteps, type SlotClaim } from './run-steps.ts'
import { catchUpMarkerName } from './slots.ts'
import { type LockedTask, messageOf, newExecution, type TaskResult } from './task.ts'

const debug = debuglog('shedlock')

// How often a slot waiting for a catch-up to end tries the task's lock again: a few statements a
// second per waiting node, only while a catch-up runs.
const CATCH_UP_POLL_MS = 250
// How often, at most, a task's expired slot records are removed.
const SWEEP_INTERVAL_MS = 10 * 60_000

/** The slot of one slot run, validated. */
export interface SlotRequest {
  /** The scheduled fire time. */
  readonly slot: Date
  /** Its record's name, `<name>@<slot>`. */
  readonly recordName: string
  /** How long its record is kept, in milliseconds. */
  readonly retention: number
  /** What happens to it when the task's lock is held. */
  readonly overlap: OverlapPolicy
}

/**
 * Slot runs: the slot's record is claimed first, so that exactly one node decides the slot (runs
 * it, owes it, or records it as skipped when the lock is held), whatever the nodes' clocks. See
 * docs/slots.md.
 */
export class SlotRuns {
  readonly #steps: RunSteps
  readonly #waiters: OwedWaiters
  // When each task's expired slot records were last removed (epoch ms, this process's clock).
  readonly #swept = new Map<string, number>()
  // The provider's paired acquisition: the slot's record and the task's lock in one round trip.
  // Not through a wrapper (keep-alive), whose task locks must be its own.
  readonly #pair: LockPair | undefined

  constructor(steps: RunSteps, waiters: OwedWaiters) {
    this.#steps = steps
    this.#waiters = waiters
    this.#pair = steps.provider === steps.claimer ? lockPairOf(steps.provider) : undefined
  }

  /** Runs `task` for `request.slot`, unless some node claimed the slot already (`'slot-done'`). */
  async run<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    signal: AbortSignal | undefined,
    request: SlotRequest,
  ): Promise<TaskResult<T>> {
    const steps = this.#steps
    const { slot } = request
    const execution = newExecution(steps.providerName, false)
    steps.emit('onLockAttempt', execution, configuration)
    // recordName is the checked lock name with its slot's stamp.
    const claim = configurationOfChecked(request.recordName, steps.clock.now(), request.retention, 0)
    // Once the slot is run (or skipped), the claim is never released: its record stays until the
    // retention ends, and tells every later attempt that the slot is done; a slot owed is given
    // back, for the node that runs it to claim. With a paired acquisition, the task's lock is
    // asked for in the same round trip, once the claim is taken.
    let handle: SimpleLock | undefined
    let first: FirstAttempt | undefined
    if (this.#pair) {
      const [claimed, locked] = await steps.acquirePair(this.#pair, claim, steps.taskLock(configuration), execution)
      handle = claimed
      first = { handle: locked }
    } else {
      handle = await steps.acquire(steps.claimer, claim, configuration, execution)
    }
    if (!handle) {
      debug(
        'Lock "%s": slot %s ran or was skipped on some node already; the task is skipped',
        configuration.name,
        slot.toISOString(),
      )
      steps.emit('onSlotDone', execution, configuration, slot)
      return { executed: false, reason: 'slot-done' }
    }
    steps.emit('onSlotClaimed', execution, configuration, slot)
    const claimed: SlotClaim = { slot, execution, owner: steps.ownerOf(handle), decided: false }
    try {
      // The paired acquisition's task lock, when it was taken: no further attempt to make.
      if (!first?.handle && request.overlap !== 'skip') {
        const taskHandle = first
          ? undefined
          : await steps.acquire(steps.provider, steps.taskLock(configuration), configuration, execution)
        if (taskHandle) return await steps.runLocked(task, configuration, taskHandle, execution, { signal, claimed })
        if (steps.closed()) return closedBeforeStart(configuration)
        return await this.#owe(task, configuration, request, claimed, handle)
      }
      const locked = first?.handle
        ? { configuration, handle: first.handle }
        : await this.#lockForSlot(configuration, execution, signal, first)
      if (locked === 'closed') return closedBeforeStart(configuration)
      if (!locked) {
        const holder = await readHolder(() => steps.inspector(), configuration.name)
        const pause = pauseOf(holder)
        return await (pause
          ? this.#paused(configuration, claimed, pause)
          : this.#skip(configuration, claimed, holder?.held ? holder.lockedBy : undefined))
      }
      return await steps.runLocked(task, locked.configuration, locked.handle, execution, { signal, claimed })
    } finally {
      // After the run, not at the fire time, when every job of the tick asks the store at once.
      this.#sweep(configuration)
      // Not decided (the store failed, or the executor closed, before the task could start): the
      // slot did not run, so another node or a catch-up may take it.
      if (!claimed.decided)
        await handle
          .unlock()
          .catch((error: unknown) =>
            debug(
              'Lock "%s": could not give back slot %s: %s',
              configuration.name,
              slot.toISOString(),
              messageOf(error),
            ),
          )
    }
  }

  /**
   * The task's lock for a claimed slot. Held by a catch-up (its marker is held), the slot waits
   * for the catch-up to end, polling, instead of being skipped: the catch-up passes over a slot
   * claimed here, so skipping it would leave it never run. Held by anything else (a long run of an
   * earlier slot): `undefined`, the slot is skipped. `'closed'` when the executor closed while it
   * waited. `first`: the first attempt's answer, when the paired acquisition made it.
   */
  async #lockForSlot(
    configuration: LockConfiguration,
    execution: LockExecution,
    signal: AbortSignal | undefined,
    first: FirstAttempt | undefined,
  ): Promise<{ configuration: LockConfiguration; handle: SimpleLock } | 'closed' | undefined> {
    const steps = this.#steps
    let current = configuration
    let attempt = first
    // One more attempt after the marker is found free: the catch-up may have released both
    // between this node's attempt and its look at the marker.
    let lastChance = false
    for (;;) {
      const handle = attempt
        ? attempt.handle
        : await steps.acquire(steps.provider, steps.taskLock(current), current, execution)
      attempt = undefined
      if (handle) return { configuration: current, handle }
      if (steps.closed()) return 'closed'
      signal?.throwIfAborted()
      if (await this.#catchUpRunning(current.name)) {
        lastChance = false
        debug('Lock "%s": a catch-up holds it; the slot waits for it to end', current.name)
        await sleep(CATCH_UP_POLL_MS)
        if (steps.closed()) return 'closed'
        signal?.throwIfAborted()
      } else if (lastChance) {
        return undefined
      } else {
        lastChance = true
      }
      // A fresh configuration: the first one's deadlines count from before the wait.
      current = lockConfiguration({
        name: configuration.name,
        lockAtMostFor: configuration.lockAtMostFor,
        lockAtLeastFor: configuration.lockAtLeastFor,
        createdAt: new Date(steps.clock.now()),
      })
    }
  }

  /** True when a catch-up of `name` runs: its marker record is held. A failed look counts as no. */
  async #catchUpRunning(name: string): Promise<boolean> {
    try {
      const marker = await this.#steps.inspector()?.get(catchUpMarkerName(name))
      return marker?.held === true
    } catch (error) {
      debug('Lock "%s": could not look for a running catch-up: %s', name, messageOf(error))
      return false
    }
  }

  /**
   * The slot could not run now: the lock is held (a run of an earlier slot, a catch-up, a holder
   * that died and whose lease has not lapsed). It is owed: the claim is given back, then the owed
   * record written, and this node waits for the lock in the background to run it, with every other
   * owed slot of the task. The node that runs it claims it then: a drain that reads the owed record
   * at once must find the slot unclaimed, and a late fire meanwhile finds the lock held and owes it
   * too (or, the lock free, runs it, and the drain then finds it claimed).
   */
  async #owe<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    request: SlotRequest,
    claimed: SlotClaim,
    claim: SimpleLock,
  ): Promise<TaskResult<never>> {
    const steps = this.#steps
    const { execution, slot } = claimed
    claimed.decided = true
    // The holder is read while the claim is given back and the slot owed, not before: a read
    // first would widen the one window where a node killed loses the slot (claimed, not owed).
    const holder = readHolder(() => steps.inspector(), configuration.name)
    try {
      await claim.unlock()
    } catch (error) {
      claimed.decided = false
      throw error
    }
    const owed = await oweSlot(steps, configuration, slot, request.retention, execution)
    const pause = pauseOf(await holder)
    if (pause) return await this.#unowe(configuration, request, claimed, owed, pause)
    debug(
      'Lock "%s": held elsewhere; slot %s is owed and runs once the lock frees',
      configuration.name,
      slot.toISOString(),
    )
    steps.emit('onLockNotAcquired', execution, configuration)
    steps.emit('onSlotOwed', execution, configuration, slot)
    const policy = request.overlap === 'once' ? 'once' : 'all'
    this.#waiters.wait({ task, configuration, policy, retention: request.retention })
    return { executed: false, reason: 'owed' }
  }

  /**
   * Owed, then found paused: the slot is claimed again (no other node runs it), its owed record
   * given back (a pause is not an outage), and it is recorded as skipped. A node killed in
   * between leaves the slot owed, to run after the resume: never lost.
   */
  async #unowe(
    configuration: LockConfiguration,
    request: SlotRequest,
    claimed: SlotClaim,
    owed: SimpleLock | undefined,
    pause: TaskPause,
  ): Promise<TaskResult<never>> {
    const steps = this.#steps
    const claim = configurationOfChecked(request.recordName, steps.clock.now(), request.retention, 0)
    const again = await steps.acquire(steps.claimer, claim, configuration, claimed.execution)
    if (!again) return { executed: false, reason: 'slot-done' }
    await owed?.unlock()
    return this.#paused(configuration, { ...claimed, owner: steps.ownerOf(again) }, pause)
  }

  /**
   * The task is paused: the slot keeps its claim (no other node runs it) and is recorded as
   * skipped, with the pause as its cause; it is not owed, as a pause is not an outage.
   */
  async #paused(configuration: LockConfiguration, claimed: SlotClaim, pause: TaskPause): Promise<TaskResult<never>> {
    const steps = this.#steps
    const { execution, slot } = claimed
    debug('Lock "%s": %s; slot %s is skipped, not owed', configuration.name, describePause(pause), slot.toISOString())
    claimed.decided = true
    steps.emit('onLockNotAcquired', execution, configuration)
    steps.emit('onTaskPaused', execution, configuration, pause)
    steps.emit('onSlotSkipped', execution, configuration, slot)
    await steps.recorder.skipped(configuration, execution, slot, claimed.owner, pauseCause(pause))
    return { executed: false, reason: 'paused' }
  }

  /**
   * The slot could not run: the lock is held by a run of an earlier slot. Recorded as skipped,
   * once, with its holder (`lockedBy`) when the read after the attempt found it.
   */
  async #skip(configuration: LockConfiguration, claimed: SlotClaim, lockedBy?: string): Promise<TaskResult<never>> {
    const steps = this.#steps
    const { execution } = claimed
    debug('Lock "%s" not acquired: another node holds it; the task is skipped', configuration.name)
    steps.emit('onLockNotAcquired', execution, configuration)
    claimed.decided = true
    steps.emit('onSlotSkipped', execution, configuration, claimed.slot)
    const cause = lockedBy === undefined ? undefined : heldCause(lockedBy)
    await steps.recorder.skipped(configuration, execution, claimed.slot, claimed.owner, cause)
    return { executed: false, reason: 'held' }
  }

  /**
   * Removes the task's expired slot records, at most once per SWEEP_INTERVAL_MS and name, in the
   * background: on stores that keep records (SQL, MongoDB, DynamoDB, ZooKeeper, NATS) they would
   * otherwise pile up, one per slot. A failure only delays the next sweep.
   */
  #sweep(configuration: LockConfiguration): void {
    const { name } = configuration
    const now = this.#steps.clock.now()
    if (now - (this.#swept.get(name) ?? Number.NEGATIVE_INFINITY) < SWEEP_INTERVAL_MS) return
    this.#swept.set(name, now)
    // A sweep is housekeeping: whatever it throws (a client without the calls an inspector
    // needs, a store failure), the slot run goes on.
    Promise.resolve()
      .then(() => this.#steps.inspector()?.removeExpired({ prefix: `${name}@` }))
      .then(
        (removed) => debug('Lock "%s": removed %d expired slot records', name, removed ?? 0),
        (error: unknown) => debug('Lock "%s": could not remove expired slot records: %s', name, messageOf(error)),
      )
  }
}

/** The answer of a lock attempt already made: the handle, or `undefined` when the lock was held. */
interface FirstAttempt {
  readonly handle: SimpleLock | undefined
}

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
