import { type Clock, systemClock } from './clock.ts'
import { atDeadline, type CancelDeadline } from './deadline.ts'
import type { Duration } from './duration.ts'
import { LockCannotBeExtendedError, LockLostError } from './errors.ts'
import { type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import { isExtensibleLock, isKeepAliveLock, type SimpleLock } from './lock-provider.ts'

/** Callbacks of one {@link ActiveLock}, set by the executor to report to its listener. */
export interface ActiveLockEvents {
  onExtended?(configuration: LockConfiguration): void
  onLost?(configuration: LockConfiguration, reason: LockLostError): void
}

/**
 * A lock held as a lease (see {@link ActiveLock}): how long the store holds it at a time, and
 * until when the store holds it now (epoch ms).
 */
export interface Lease {
  readonly ms: number
  readonly until: number
  /** Renew at once: the store holds the lock for longer than a lease (the executor's first lock). */
  readonly renewNow?: boolean
}

/**
 * The lock of one running task: its current handle, its abort signal and the watchdog that
 * aborts the signal at `lockAtMostUntil`. Internal; the public view is `assertLocked()` and
 * `extendActiveLock()`.
 *
 * A leased lock (the executor's `lease`) is held by the store for a lease at a time, not for the
 * whole `lockAtMostFor`: while the task runs, this process renews it every third of a lease, up
 * to the run's `lockAtMostUntil`. A node that dies stops renewing, so its lock lapses within a
 * lease and the task's next fire runs elsewhere; a renewal that fails, or comes after the lease
 * lapsed, aborts the signal as a lost lock does. One deadline serves both: the next renewal, or
 * the expiry while a renewal is in flight.
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
  // A leased lock: the lease's length (0: not leased) and until when the store holds it now.
  #lease = 0
  #storeUntil = 0
  #reachedBound = false

  constructor(
    configuration: LockConfiguration,
    handle: SimpleLock | undefined,
    options: {
      clock?: Clock
      events?: ActiveLockEvents
      simulated?: boolean
      fencingToken?: bigint
      lease?: Lease | undefined
    } = {},
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
    } else if (this.#simulated) {
      // Nothing to watch: no store holds a simulated lock.
    } else if (options.lease && handle && isExtensibleLock(handle)) {
      this.#lease = options.lease.ms
      this.#storeUntil = options.lease.until
      this.#armRenewal(options.lease.renewNow === true)
    } else {
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

  /** True for a leased lock, which this process renews while its task runs. */
  get leased(): boolean {
    return this.#lease > 0
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
    return this.#enqueue(() => this.#extendNow(lockAtMostFor, lockAtLeastFor))
  }

  /**
   * The extension or lease renewal in flight, if any: the handle to release is the one it
   * resolves to, so a release waits for it.
   */
  get pendingExtension(): Promise<unknown> | undefined {
    return this.#tail
  }

  #settled(tail: Promise<void>): void {
    if (this.#tail === tail) this.#tail = undefined
  }

  // Runs `step` after the extension asked for before it: each spends the handle the last made.
  #enqueue<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#tail ? this.#tail.then(step) : step()
    // Cleared once settled: a release after a renewal that failed (the store was down) still
    // tries the handle it has, and reports what that gives, instead of taking it for in flight.
    const tail: Promise<void> = run.then(
      () => this.#settled(tail),
      () => this.#settled(tail),
    )
    this.#tail = tail
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
    if (this.#finished) {
      // Released next: nothing to watch.
    } else if (this.#lease > 0) {
      this.#storeUntil = next.lockAtMostUntil.getTime()
      this.#armRenewal()
    } else {
      this.#arm(next.lockAtMostUntil.getTime())
    }
    this.#events.onExtended?.(next)
  }

  // The next renewal of a leased lock: a third of a lease from now, and never after the store's
  // expiry.
  #armRenewal(now = false): void {
    this.#cancelWatchdog?.()
    const at = now ? this.#clock.now() : Math.min(this.#clock.now() + Math.floor(this.#lease / 3), this.#storeUntil)
    this.#cancelWatchdog = atDeadline(at, this.#clock, () => {
      void this.#enqueue(() => this.#renew())
    })
  }

  // Renews the lease for another lease, or what is left of lockAtMostFor; from lockAtMostUntil on
  // the lock is watched as an unleased one.
  async #renew(): Promise<void> {
    // Not `#aborted`: a task asked to stop (close(), the caller's signal) still holds its lock.
    if (this.#finished || this.#lost) return
    const now = this.#clock.now()
    const bound = this.#configuration.lockAtMostUntil.getTime()
    const forMs = Math.min(this.#lease, bound - now)
    const handle = this.#handle
    if (forMs <= 0 || this.#reachedBound || !handle || !isExtensibleLock(handle)) {
      this.#arm(Math.min(bound, Math.max(this.#storeUntil, now)))
      return
    }
    // Lost if the renewal has not landed when the store's lease ends.
    this.#arm(this.#storeUntil)
    const atLeast = Math.min(forMs, Math.max(0, this.#configuration.lockAtLeastUntil.getTime() - now))
    let next: Awaited<ReturnType<typeof handle.extend>>
    try {
      next = await handle.extend(forMs, atLeast)
    } catch (error) {
      this.#lose(new LockLostError(`Lock "${this.name}" was lost: renewing its lease failed`, { cause: error }))
      return
    }
    if (!next) {
      this.#handle = undefined
      this.#lose(new LockLostError(`Lock "${this.name}" was lost: its lease had lapsed when this node renewed it`))
      return
    }
    this.#handle = next
    this.#storeUntil = now + forMs
    // Renewed up to lockAtMostUntil: from now on it is watched as an unleased lock.
    this.#reachedBound = forMs < this.#lease
    if (!this.#finished && !this.#lost) this.#armRenewal()
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
