import { setTimeout as sleep } from 'node:timers/promises'
import { debuglog } from 'node:util'
import type { CatchUpRuntime } from './catch-up.ts'
import { LockProviderError } from './errors.ts'
import type { LockExecution } from './diagnostics.ts'
import { configurationOfChecked, type LockConfiguration } from './lock-configuration.ts'
import type { LockInspector } from './lock-inspector.ts'
import type { SimpleLock } from './lock-provider.ts'
import { type DrainRequest, type DrainResult, OwedDrain, readTaskRecords } from './owed.ts'
import { closedReason, messageOf, newExecution } from './task.ts'

const debug = debuglog('shedlock')

// How often a node that owes slots tries the task's lock: from 250 ms, doubling up to 2 s (or a
// third of the lease, when shorter), so that a dead holder's lease is noticed soon after it
// lapses and a long run is not polled more than a statement every 2 s per waiting node.
const FIRST_POLL_MS = 250
const MAX_POLL_MS = 2_000
// How many times one drain reads the owed records again, for slots owed while it ran.
const MAX_PASSES = 20

/**
 * Runs a task's owed slots under its lock, just taken (`handle`, for `configuration`): reads the
 * owed records, drains them, releases the lock. Throws `LockProviderError` when the store fails;
 * the lock is released either way.
 */
export async function drainHeld<T>(
  runtime: CatchUpRuntime,
  inspector: LockInspector,
  request: DrainRequest<T>,
  handle: SimpleLock,
  execution: LockExecution,
  before?: () => Promise<void>,
): Promise<DrainResult> {
  const held = runtime.hold(request.configuration, handle, execution)
  const { active } = held
  const signal = request.signal
  const stopOnAbort = (): void => active.abort(signal?.reason)
  // Closed, or aborted by the caller, while the lock was taken: no owed slot starts.
  if (runtime.closed()) active.abort(closedReason())
  else if (signal?.aborted) stopOnAbort()
  else signal?.addEventListener('abort', stopOnAbort, { once: true })
  const drain = new OwedDrain(runtime, inspector, request, execution, runtime.ownerOf(handle))
  try {
    // Under the lock, before the owed records are read: what a catch-up finds missed is owed then.
    if (before && !active.signal.aborted) await before()
    // Until none is left: slots owed while this drain ran (fires that found the lock held, this
    // node's too) are run by it, not left to a waiter that may be gone by then.
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const { owed } = await readTaskRecords(inspector, request.configuration.name)
      const handled = drain.result.ran.length + drain.result.folded.length
      await drain.run(active, owed)
      const progress = drain.result.ran.length + drain.result.folded.length > handled
      if (owed.length === 0 || !progress || drain.result.stoppedBy !== undefined) break
    }
    return drain.result
  } catch (error) {
    // The store failed: what ran before it is still reported, with the failure.
    if (!(error instanceof LockProviderError)) throw error
    drain.result.failure = error
    return drain.result
  } finally {
    signal?.removeEventListener('abort', stopOnAbort)
    await held.done()
    await runtime.release(active, execution)
  }
}

/**
 * The nodes' memory of owed slots is the store's: this is only how this node gets to them soon.
 * One waiter per task name: a node that owes a slot of the task (its lock was held when the slot
 * came, or a catch-up found it missed while the lock was held) tries the lock in the background,
 * and once it takes it runs every owed slot of the task, its own and other nodes', then releases
 * it. A node that dies while it waits leaves its owed records to whichever node drains next.
 */
export class OwedWaiters {
  readonly #runtime: CatchUpRuntime
  readonly #waiting = new Map<string, Waiter>()

  constructor(runtime: CatchUpRuntime) {
    this.#runtime = runtime
  }

  /** Starts waiting for the lock of `request.configuration.name` to run its owed slots, unless a waiter already does. */
  wait<T>(request: DrainRequest<T>): void {
    const inspector = this.#runtime.inspector()
    if (inspector) this.retry(request.configuration.name, () => this.#tryDrain(inspector, request), request.signal)
  }

  /**
   * Calls `attempt` in the background, polling, until it resolves to true (it took the lock of
   * `name` and did its work), unless a waiter of `name` already does. A failure is retried.
   */
  retry(name: string, attempt: () => Promise<boolean>, signal?: AbortSignal): void {
    const existing = this.#waiting.get(name)
    if (existing) {
      // Its drain may have read the owed records already: it takes the lock once more after it.
      existing.again = true
      return
    }
    if (this.#runtime.closed()) return
    const waiter: Waiter = { stopped: false, again: false, attempting: undefined, done: Promise.resolve() }
    waiter.done = this.#poll(name, attempt, signal, waiter).finally(() => {
      if (this.#waiting.get(name) === waiter) this.#waiting.delete(name)
    })
    this.#waiting.set(name, waiter)
  }

  /**
   * Stops the waiter of `name`, for a caller about to do its work in the foreground (a catch-up
   * called again): resolves once an attempt it has under way has ended, so that the two never
   * contend for the lock.
   */
  async takeOver(name: string): Promise<void> {
    const waiter = this.#waiting.get(name)
    if (!waiter) return
    waiter.stopped = true
    this.#waiting.delete(name)
    await waiter.attempting?.catch(() => undefined)
  }

  async #poll(
    name: string,
    attempt: () => Promise<boolean>,
    signal: AbortSignal | undefined,
    waiter: Waiter,
  ): Promise<void> {
    const runtime = this.#runtime
    const cap = Math.max(FIRST_POLL_MS, Math.min(MAX_POLL_MS, runtime.leaseMs > 0 ? runtime.leaseMs / 3 : MAX_POLL_MS))
    let delay = FIRST_POLL_MS
    for (;;) {
      // Unref'd: a process that is otherwise done must not stay up for its owed slots, which the
      // store keeps for the next holder.
      await sleep(delay, undefined, { ref: false })
      if (waiter.stopped || runtime.closed() || signal?.aborted) return
      try {
        // Tracked whole, the lock's acquisition included: close() waits for it, so that nothing
        // reaches the store after the executor was closed (and the application closed its client).
        waiter.attempting = runtime.track(attempt())
        if (await waiter.attempting) {
          if (!waiter.again) return
          waiter.again = false
          delay = FIRST_POLL_MS
          continue
        }
      } catch (error) {
        debug('Lock "%s": owed slots not run yet, the store failed: %s', name, messageOf(error))
      }
      delay = Math.min(delay * 2, cap)
    }
  }

  // One attempt: false while another node holds the lock.
  async #tryDrain<T>(inspector: LockInspector, request: DrainRequest<T>): Promise<boolean> {
    const runtime = this.#runtime
    const configuration = fresh(request.configuration, runtime.clock.now())
    const execution = newExecution(runtime.providerName, false)
    const handle = await runtime.acquire(runtime.provider, runtime.taskLock(configuration), configuration, execution)
    if (!handle) return false
    const result = await drainHeld(runtime, inspector, { ...request, configuration }, handle, execution)
    if (result.failure) throw result.failure
    debug(
      'Lock "%s": ran %d owed slot(s), folded %d, left %d',
      configuration.name,
      result.ran.length,
      result.folded.length,
      result.notRun.length,
    )
    return true
  }
}

/** One background waiter: stopped by takeOver(), and the attempt it has under way. */
interface Waiter {
  stopped: boolean
  /** Asked for again while it ran: one more attempt once this one is done. */
  again: boolean
  attempting: Promise<boolean> | undefined
  done: Promise<void>
}

// The same lock, with its deadlines counted from now.
function fresh(configuration: LockConfiguration, now: number): LockConfiguration {
  return configurationOfChecked(configuration.name, now, configuration.lockAtMostFor, configuration.lockAtLeastFor)
}
