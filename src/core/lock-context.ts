import { AsyncLocalStorage } from 'node:async_hooks'
import { type Clock, systemClock } from './clock.ts'
import { atDeadline, type CancelDeadline } from './deadline.ts'
import type { Duration } from './duration.ts'
import { LockCannotBeExtendedError, LockLostError, NoActiveLockError, NotLockedError } from './errors.ts'
import { type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import { isExtensibleLock, isKeepAliveLock, type SimpleLock } from './lock-provider.ts'

/** Callbacks of one {@link ActiveLock}, set by the executor to report to its listener. */
export interface ActiveLockEvents {
  onExtended?(configuration: LockConfiguration): void
  onLost?(configuration: LockConfiguration, reason: LockLostError): void
}

/**
 * The lock of one running task: its current handle, its abort signal and the watchdog that
 * aborts the signal at `lockAtMostUntil`. Internal; the public view is `assertLocked()` and
 * `extendActiveLock()`.
 */
export class ActiveLock {
  #configuration: LockConfiguration
  #handle: SimpleLock | undefined
  // The acquisition's token: kept after a failed extension spent the handle.
  readonly #fencingToken: bigint | undefined
  // Made when something asks for the signal: most tasks never do, and an AbortSignal costs more
  // to create (about 2 µs on Node 20) than the rest of an execution's bookkeeping.
  #controller: AbortController | undefined
  #aborted = false
  readonly #clock: Clock
  readonly #events: ActiveLockEvents
  readonly #simulated: boolean
  #cancelWatchdog: CancelDeadline | undefined
  #finished = false
  #lost = false
  // The last extension asked for, so that the next one waits for it; none until one is asked.
  #tail: Promise<unknown> | undefined
  // Re-entrant runs joined to this lock that have not settled: the lock is released after them.
  // Made by the first join: most locks have none.
  #joined: Set<Promise<unknown>> | undefined

  constructor(
    configuration: LockConfiguration,
    handle: SimpleLock | undefined,
    options: { clock?: Clock; events?: ActiveLockEvents; simulated?: boolean; fencingToken?: bigint } = {},
  ) {
    this.#configuration = configuration
    this.#handle = handle
    // A simulated lock (runLocked() of shedlock/testing) has no handle: its token is given.
    this.#fencingToken = handle ? handle.fencingToken : options.fencingToken
    this.#clock = options.clock ?? systemClock
    this.#events = options.events ?? {}
    this.#simulated = options.simulated ?? false
    if (handle && isKeepAliveLock(handle)) {
      // A keep-alive lock knows better than lockAtMostUntil when it is lost.
      handle.onExtended = (next) => {
        this.#configuration = next
        this.#events.onExtended?.(next)
      }
      const { signal } = handle
      if (signal.aborted) this.#lose(signal.reason)
      else signal.addEventListener('abort', () => this.#lose(signal.reason), { once: true })
    } else if (!this.#simulated) {
      this.#arm(configuration.lockAtMostUntil.getTime())
    }
  }

  get name(): string {
    return this.#configuration.name
  }

  get configuration(): LockConfiguration {
    return this.#configuration
  }

  /** The fencing token of the acquisition this lock runs under (see `SimpleLock.fencingToken`). */
  get fencingToken(): bigint | undefined {
    return this.#fencingToken
  }

  get signal(): AbortSignal {
    this.#controller ??= new AbortController()
    return this.#controller.signal
  }

  /** True once the task ended: work it left behind (timers, stray promises) no longer holds the lock. */
  get finished(): boolean {
    return this.#finished
  }

  /** True once the lock could no longer be trusted while its task ran (its signal aborted with a `LockLostError`). */
  get lost(): boolean {
    return this.#lost
  }

  /**
   * True while a same-name call may run under this lock instead of taking its own: the lock is
   * held (its task, or a run joined to it, still runs) and has not been lost.
   */
  get joinable(): boolean {
    return !this.#finished && !this.#aborted
  }

  /**
   * Runs a re-entrant (same-name) task under this lock. The lock is not released before `run`
   * settles, even when its caller did not await it and the outer task returned long before.
   */
  join<T>(run: () => Promise<T>): Promise<T> {
    const running = run()
    const tracked = running.then(
      () => undefined,
      () => undefined,
    )
    this.#joined ??= new Set()
    const joined = this.#joined
    joined.add(tracked)
    void tracked.then(() => joined.delete(tracked))
    return running
  }

  /**
   * Waits until every joined run has settled (runs joined meanwhile included), then finishes, in
   * the same turn as the last check: no run can join between the two. Without joined runs it
   * finishes at once and returns `undefined`, so the caller has nothing to await.
   */
  finishAfterJoinedRuns(): Promise<void> | undefined {
    if (this.#joined === undefined || this.#joined.size === 0) {
      this.finish()
      return undefined
    }
    return this.#finishAfterJoined(this.#joined)
  }

  async #finishAfterJoined(joined: Set<Promise<unknown>>): Promise<void> {
    while (joined.size > 0) await Promise.all(joined)
    this.finish()
  }

  /** The handle to unlock when the task ends; `undefined` once a failed extension spent it. */
  get handle(): SimpleLock | undefined {
    return this.#handle
  }

  /** Extends the lock under this task; calls from parallel branches of one task run one after another. */
  extend(lockAtMostFor: Duration, lockAtLeastFor: Duration): Promise<void> {
    const run = this.#tail
      ? this.#tail.then(() => this.#extendNow(lockAtMostFor, lockAtLeastFor))
      : this.#extendNow(lockAtMostFor, lockAtLeastFor)
    this.#tail = run.catch(() => undefined)
    return run
  }

  /**
   * Aborts the task's signal with `reason` (the caller's own signal aborted, or the executor
   * closed): the lock is still held, so this is no loss and reports none.
   */
  abort(reason: unknown): void {
    if (!this.#finished && !this.#aborted) this.#abortWith(reason)
  }

  /** Stops the watchdog: the task has ended, so a later expiry is no loss. */
  finish(): void {
    this.#finished = true
    this.#cancelWatchdog?.()
  }

  async #extendNow(lockAtMostFor: Duration, lockAtLeastFor: Duration): Promise<void> {
    const name = this.name
    const next = lockConfiguration({ name, lockAtMostFor, lockAtLeastFor, createdAt: new Date(this.#clock.now()) })
    if (this.#simulated) return
    const handle = this.#handle
    if (!handle) {
      throw new LockCannotBeExtendedError(
        `Lock "${name}" can not be extended: it was already lost (an earlier extension found it expired)`,
      )
    }
    if (isKeepAliveLock(handle)) {
      throw new LockCannotBeExtendedError(
        `Lock "${name}" is kept alive by keepAliveLockProvider(); it can not be extended by hand as well`,
      )
    }
    if (!isExtensibleLock(handle)) {
      throw new LockCannotBeExtendedError(
        `Lock "${name}" can not be extended: its provider does not support extension; use an extensible provider`,
      )
    }
    const extended = await handle.extend(next.lockAtMostFor, next.lockAtLeastFor)
    if (!extended) {
      this.#handle = undefined
      const reason = new LockLostError(`Lock "${name}" was lost: it had expired when the task tried to extend it`)
      this.#lose(reason)
      throw new LockCannotBeExtendedError(`Lock "${name}" can not be extended, most likely it already expired`, {
        cause: reason,
      })
    }
    this.#handle = extended
    this.#configuration = next
    if (!this.#finished) this.#arm(next.lockAtMostUntil.getTime())
    this.#events.onExtended?.(next)
  }

  #arm(deadline: number): void {
    this.#cancelWatchdog?.()
    this.#cancelWatchdog = atDeadline(deadline, this.#clock, () =>
      this.#lose(
        new LockLostError(
          `Lock "${this.name}" expired at lockAtMostUntil (${new Date(deadline).toISOString()}) while its task was still running; another node may take it now`,
        ),
      ),
    )
  }

  #lose(reason: unknown): void {
    if (this.#finished || this.#aborted) return
    const error =
      reason instanceof LockLostError ? reason : new LockLostError(`Lock "${this.name}" was lost`, { cause: reason })
    this.#lost = true
    this.#abortWith(error)
    this.#events.onLost?.(this.#configuration, error)
  }

  // Aborting is rare: the controller is made then if nobody asked for the signal yet, so a
  // signal read later is already aborted, with this reason.
  #abortWith(reason: unknown): void {
    this.#aborted = true
    this.#controller ??= new AbortController()
    this.#controller.abort(reason)
  }
}

// A frame of the async context: an active lock, the task context the integrations hand to their
// functions (taskContext()), or both. One storage for the two: on Node 20 each AsyncLocalStorage
// in use costs every promise of the process a propagation step (a second storage's steps were 3 %
// of a profile of slot runs).
interface Frame {
  /** `undefined` in a frame that only sets the task context. */
  readonly lock: ActiveLock | undefined
  // A TaskContext (task.ts, which imports this module's types): opaque here.
  readonly context: object | undefined
  readonly parent: Frame | undefined
}

// One per process: a second copy of this module would split the context, which is why the
// package is ESM-only and providers never bundle the core.
const storage = new AsyncLocalStorage<Frame>()

/**
 * Runs `fn` with `lock` as the innermost active lock of its async context, and `context` (else
 * the enclosing one) as its task context.
 */
export function runWithActiveLock<T>(lock: ActiveLock, fn: () => T, context?: object): T {
  const parent = storage.getStore()
  return storage.run({ lock, context: context ?? parent?.context, parent }, fn)
}

/** Runs `fn` with `context` as the task context of its async context; the active locks stay as they are. */
export function runWithTaskContext<T>(context: object, fn: () => T): T {
  const frame = storage.getStore()
  // The executor's runs put their context in the lock's frame already.
  if (frame !== undefined && frame.context === context) return fn()
  return storage.run({ lock: undefined, context, parent: frame }, fn)
}

/** The task context of this async context, if any. */
export function currentTaskContext(): object | undefined {
  return storage.getStore()?.context
}

/**
 * The innermost active lock named `name` in this async context that a same-name call may join
 * (re-entrancy check): one whose task has ended and whose joined runs have settled is released or
 * about to be, and one that was lost no longer excludes other nodes.
 */
export function findActiveLock(name: string): ActiveLock | undefined {
  for (let frame = storage.getStore(); frame; frame = frame.parent) {
    const { lock } = frame
    if (lock !== undefined && lock.name === name && lock.joinable) return lock
  }
  return undefined
}

// The innermost frame whose task still runs: the async context outlives the task in work the
// task started (timers, promises), and that work must not count as locked.
function innermostLock(): ActiveLock | undefined {
  for (let frame = storage.getStore(); frame; frame = frame.parent) {
    const { lock } = frame
    if (lock !== undefined && !lock.finished) return lock
  }
  return undefined
}

/**
 * Throws unless the caller runs inside a locked task (any lock), across `await`s. Put it at the
 * top of a task to catch a scheduler that calls it without the lock.
 *
 * @throws NotLockedError outside a locked task.
 */
export function assertLocked(): void {
  if (!innermostLock()) {
    throw new NotLockedError(
      'The task is not locked. Call assertLocked() only inside executeWithLock(), withLock() or a @SchedulerLock method; in unit tests wrap the call in runLocked() from shedlock/testing',
    )
  }
}

/**
 * Extends the innermost lock of the running task: holds it `lockAtMostFor` more from now, and at
 * least `lockAtLeastFor` from now after unlock. Durations are milliseconds or strings.
 *
 * @throws NoActiveLockError outside a locked task.
 * @throws LockCannotBeExtendedError when the lock expired (the task's signal aborts too), or its
 *   provider cannot extend locks.
 * @throws LockProviderError when the store fails; the lock is then unchanged.
 */
export async function extendActiveLock(lockAtMostFor: Duration, lockAtLeastFor: Duration = 0): Promise<void> {
  const lock = innermostLock()
  if (!lock) {
    throw new NoActiveLockError(
      'No active lock in this async context; call extendActiveLock() inside the locked task (executeWithLock(), withLock() or a @SchedulerLock method)',
    )
  }
  await lock.extend(lockAtMostFor, lockAtLeastFor)
}

/**
 * The fencing token of the innermost lock of the running task (docs/fencing.md), across
 * `await`s: what `TaskContext.fencingToken` holds, for code that does not get the task's context
 * (a repository called deep in the task). Pass it with each write to a resource that checks it.
 * `undefined` where the store hands out no tokens, and in `runLocked()` of `shedlock/testing`
 * unless it is given one.
 *
 * @throws NoActiveLockError outside a locked task: a write meant to be fenced must not go out
 *   without its lock.
 */
export function activeFencingToken(): bigint | undefined {
  const lock = innermostLock()
  if (!lock) {
    throw new NoActiveLockError(
      'No active lock in this async context; call activeFencingToken() inside the locked task (executeWithLock(), withLock() or a @SchedulerLock method)',
    )
  }
  return lock.fencingToken
}
