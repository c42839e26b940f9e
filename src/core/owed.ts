import { debuglog } from 'node:util'
import type { CatchUpRuntime } from './catch-up.ts'
import type { LockExecution } from './diagnostics.ts'
import { LockLostError, LockProviderError } from './errors.ts'
import { configurationOfChecked, type LockConfiguration } from './lock-configuration.ts'
import type { ActiveLock } from './active-lock.ts'
import { runWithActiveLock } from './lock-context.ts'
import type { LockInspector, LockRecord } from './lock-inspector.ts'
import { isExtensibleLock, isKeepAliveLock, type SimpleLock } from './lock-provider.ts'
import { FOLDED_CAUSE } from './pause.ts'
import { owedRecordName, parseOwedRecordName, parseSlotRecordName, slotRecordName } from './slots.ts'
import { type LockedTask, messageOf, RunContext } from './task.ts'

const debug = debuglog('shedlock')

// Before each owed run the task's lock must have at least this share of lockAtMostFor left, unless
// it is leased or kept alive (then it is renewed anyway); otherwise it is extended first, or, on a
// store that cannot extend, the drain stops with less than half left.
const FRESH_SHARE = 0.9
const MIN_SHARE_WITHOUT_EXTENSION = 0.5
// How many records are written, or removed, at a time (a pool's worth).
const WRITES_AT_ONCE = 8

/**
 * Records slot `slot` of `configuration`'s task as owed: its owed record, held for `retention`,
 * tells the next holder of the task's lock to run it. The slot's claim is taken when it runs (the
 * claim is what keeps every other node from running it too), so a node that owes a slot it had
 * claimed gives its claim back. Resolves once the record is in the store: to its handle when
 * written here, `undefined` when another node owed the same slot already (which is as good).
 */
export async function oweSlot(
  runtime: CatchUpRuntime,
  configuration: LockConfiguration,
  slot: Date,
  retention: number,
  execution: LockExecution,
): Promise<SimpleLock | undefined> {
  const owed = configurationOfChecked(owedRecordName(configuration.name, slot), runtime.clock.now(), retention, 0)
  return runtime.acquire(runtime.claimer, owed, configuration, execution)
}

/** A task's records in the store: its held slot records and its owed ones. */
export interface TaskRecords {
  /** The latest slot with a held record (epoch ms), `undefined` without one. */
  readonly latestHeld: number | undefined
  /** Held slot records, by slot (epoch ms). */
  readonly held: ReadonlySet<number>
  /** Owed records, oldest slot first. */
  readonly owed: readonly OwedSlot[]
}

/** One owed slot, with the record it was read from (its removal is checked against it). */
export interface OwedSlot {
  readonly slot: Date
  readonly record: LockRecord
}

/**
 * Reads the task's slot and owed records in one listing. Only held records count: a claim given
 * back (the store failed before its run) is free again, and expired ones are past the retention.
 */
export async function readTaskRecords(inspector: LockInspector, name: string): Promise<TaskRecords> {
  const { locks } = await inspector.list({ prefix: `${name}@` })
  const held = new Set<number>()
  const owed: OwedSlot[] = []
  // A loop, not Math.max(...): a task may have hundreds of thousands of records.
  let latest = Number.NEGATIVE_INFINITY
  for (const record of locks) {
    if (!record.held) continue
    const slot = parseSlotRecordName(record.name)
    if (slot?.name === name) {
      const at = slot.slot.getTime()
      held.add(at)
      if (at > latest) latest = at
      continue
    }
    const owedSlot = parseOwedRecordName(record.name)
    if (owedSlot?.name === name) owed.push({ slot: owedSlot.slot, record })
  }
  owed.sort((a, b) => a.slot.getTime() - b.slot.getTime())
  return { latestHeld: latest === Number.NEGATIVE_INFINITY ? undefined : latest, held, owed }
}

/** What one drain ran, and what it left. */
export interface DrainResult {
  readonly ran: Date[]
  readonly failed: { slot: Date; error: unknown }[]
  /** Owed slots it did not get to (they stay owed: the next holder of the lock runs them). */
  readonly notRun: Date[]
  /** Owed slots folded into a later one by the `'once'` policy: recorded as skipped. */
  readonly folded: Date[]
  /** Why it stopped before the end: the lock lost, the executor closed, the caller aborted. */
  stoppedBy?: unknown
  /** Who ran them, as the ledger names nodes. */
  readonly owner: string
  /** The store's failure that stopped it, if one did: what ran before it is above. */
  failure?: LockProviderError
}

/** What a drain runs: the task, its lock and how its owed slots run. */
export interface DrainRequest<T> {
  readonly task: LockedTask<T>
  /** The task's configuration (name, lockAtMostFor): the lock the drain holds was taken for it. */
  readonly configuration: LockConfiguration
  readonly policy: 'once' | 'all'
  /** How long the claims of the slots it runs are kept, in milliseconds. */
  readonly retention: number
  readonly signal?: AbortSignal | undefined
}

/**
 * Runs the owed slots of a task, oldest first, under its lock (`active`, held by this node). Each
 * owed record is removed (checked against the record read) and the slot claimed before it runs:
 * removed by another holder meanwhile, the slot is that holder's; claimed by another node (a
 * scheduler that fired it late, with the lock free), it ran there. A run counts once started, as a
 * slot run's does: a node that dies in its task leaves it abandoned, not owed.
 */
export class OwedDrain<T> {
  readonly #runtime: CatchUpRuntime
  readonly #inspector: LockInspector
  readonly #request: DrainRequest<T>
  readonly #execution: LockExecution
  readonly #owner: string
  readonly result: DrainResult

  constructor(
    runtime: CatchUpRuntime,
    inspector: LockInspector,
    request: DrainRequest<T>,
    execution: LockExecution,
    owner: string,
  ) {
    this.#runtime = runtime
    this.#inspector = inspector
    this.#request = request
    this.#execution = execution
    this.#owner = owner
    this.result = { ran: [], failed: [], notRun: [], folded: [], owner }
  }

  /** Drains `owed` (read under the lock) by the request's policy. Throws `LockProviderError` when the store fails. */
  async run(active: ActiveLock, owed: readonly OwedSlot[]): Promise<DrainResult> {
    const result = this.result
    let toRun = owed
    if (this.#request.policy === 'once' && owed.length > 1) {
      toRun = owed.slice(-1)
      await this.#fold(owed.slice(0, -1))
    }
    for (let i = 0; i < toRun.length; i++) {
      const stop = await this.#ready(active)
      if (stop !== undefined) {
        result.stoppedBy = stop
        result.notRun.push(...toRun.slice(i).map((o) => o.slot))
        debug('Lock "%s": owed slots left to the next holder: %s', this.#name, messageOf(stop))
        break
      }
      const { slot } = toRun[i]!
      if ((await this.#take(toRun[i]!)) && (await this.#claimTaken(slot))) await this.#runSlot(active, slot)
    }
    return result
  }

  get #name(): string {
    return this.#request.configuration.name
  }

  /** Removes the owed record; true when this node removed it (so the slot is its to run). */
  async #take(owed: OwedSlot): Promise<boolean> {
    try {
      return await this.#inspector.release(owed.record)
    } catch (error) {
      throw new LockProviderError(
        `Could not take owed slot ${owed.slot.toISOString()} of lock "${this.#name}": ${messageOf(error)}`,
        { cause: error, lockName: this.#name },
      )
    }
  }

  /**
   * Claims `slot`, whose owed record this drain just removed; where the store fails, the record
   * is written again (as far as the store lets it) before the failure is thrown, so that the slot
   * stays owed.
   */
  async #claimTaken(slot: Date): Promise<boolean> {
    try {
      return await this.#claim(slot)
    } catch (error) {
      const { configuration, retention } = this.#request
      await oweSlot(this.#runtime, configuration, slot, retention, this.#execution).catch(() => undefined)
      throw error
    }
  }

  /** Claims `slot` for its run; false when another node claimed it (it ran there). */
  async #claim(slot: Date): Promise<boolean> {
    const runtime = this.#runtime
    const { configuration, retention } = this.#request
    const claim = configurationOfChecked(slotRecordName(configuration.name, slot), runtime.clock.now(), retention, 0)
    const handle = await runtime.acquire(runtime.claimer, claim, configuration, this.#execution)
    if (!handle) debug('Lock "%s": owed slot %s was run elsewhere', configuration.name, slot.toISOString())
    return handle !== undefined
  }

  /** Older owed slots folded into the latest: removed, claimed (so that no late fire runs them), and recorded as skipped. */
  async #fold(folded: readonly OwedSlot[]): Promise<void> {
    const { recorder, clock } = this.#runtime
    const at = new Date(clock.now())
    for (let i = 0; i < folded.length; i += WRITES_AT_ONCE) {
      const batch = folded.slice(i, i + WRITES_AT_ONCE)
      const taken = await Promise.all(batch.map(async (owed) => (await this.#take(owed)) && this.#claim(owed.slot)))
      const mine = batch.filter((_, j) => taken[j]).map((owed) => owed.slot)
      this.result.folded.push(...mine)
      if (recorder.ledger) {
        const configuration = this.#request.configuration
        await Promise.all(
          mine.map((slot) => recorder.skipped(configuration, this.#execution, slot, this.#owner, FOLDED_CAUSE, at)),
        )
      }
    }
  }

  /** One run of an owed slot under the drain's lock, recorded in the ledger; its error goes to `failed`. */
  async #runSlot(active: ActiveLock, slot: Date): Promise<void> {
    const runtime = this.#runtime
    const current = active.configuration
    const record = runtime.recorder.start(current, this.#execution, slot, this.#owner, active.fencingToken)
    let failure: unknown
    try {
      if (record?.started) await record.started
      const context = new RunContext(active, current, slot)
      await runWithActiveLock(active, () => runtime.runTask(this.#request.task, context, this.#execution), context)
    } catch (error) {
      failure = error
      this.result.failed.push({ slot, error })
    } finally {
      this.result.ran.push(slot)
      runtime.emit('onSlotCaughtUp', this.#execution, current, slot)
      await record?.end(active, failure)
    }
  }

  /**
   * Why no run may start now (the lock lost, the executor closed, the caller aborted), after
   * making an unleased lock fresh; `undefined` when the next run may start.
   */
  async #ready(active: ActiveLock): Promise<unknown> {
    // close() aborts the signal of every lock it finds held, this one included.
    if (active.signal.aborted) return active.signal.reason
    const handle = active.handle
    if (!handle || isKeepAliveLock(handle) || active.leased) return undefined
    const { lockAtMostFor } = this.#request.configuration
    const left = active.configuration.lockAtMostUntil.getTime() - this.#runtime.clock.now()
    if (left >= lockAtMostFor * FRESH_SHARE) return undefined
    if (!isExtensibleLock(handle)) {
      if (left >= lockAtMostFor * MIN_SHARE_WITHOUT_EXTENSION) return undefined
      return new LockLostError(
        `Lock "${this.#name}": the lock has ${Math.max(0, left)} ms of its ${lockAtMostFor} ms left and its provider cannot extend it; the owed slots left are run by the next holder`,
      )
    }
    try {
      await active.extend(lockAtMostFor, 0)
    } catch (error) {
      if (error instanceof LockProviderError) throw error
      return new LockLostError(`Lock "${this.#name}": the lock could not be extended before its next owed run`, {
        cause: error,
      })
    }
    return active.signal.aborted ? active.signal.reason : undefined
  }
}
