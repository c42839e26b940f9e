import { hostname } from 'node:os'
import { debuglog } from 'node:util'
import type { CatchUpRuntime, HeldTaskLock } from './catch-up.ts'
import { type Clock, systemClock } from './clock.ts'
import { waitAtMost } from './deadline.ts'
import type { LockExecution } from './diagnostics.ts'
import { parseDuration, type Duration } from './duration.ts'
import { LockProviderError } from './errors.ts'
import { type Emit, eventEmitter, type LockingTaskExecutorListener } from './executor-events.ts'
import { reportingEvents } from './lock-events.ts'
import { runTask } from './task-start.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import { DEFAULT_LEASE, leasedConfiguration } from './lease.ts'
import { ActiveLock } from './active-lock.ts'
import { runWithActiveLock } from './lock-context.ts'
import type { LockInspector } from './lock-inspector.ts'
import { type ShedlockLogger, withLogger } from './logger.ts'
import {
  isExtensibleLock,
  isKeepAliveLock,
  type LockPair,
  type LockProvider,
  type PairedLocks,
  type SimpleLock,
  unwrappedProvider,
} from './lock-provider.ts'
import { describePause, pauseOf, readHolder } from './pause.ts'
import { Registry } from './registry.ts'
import { DEFAULT_RECORD_RUNNING_AFTER_MS, RunRecorder } from './run-recorder.ts'
import type { RunLedger } from './run-ledger.ts'
import { releaseTaskLock } from './release.ts'
import { DEFAULT_SLOT_RETENTION } from './slots.ts'
import type { TriggerClaim } from './trigger-poller.ts'
import {
  closedReason,
  type LockedTask,
  lockTaken,
  messageOf,
  newExecution,
  RunContext,
  type TaskContext,
  type TaskResult,
} from './task.ts'

const debug = debuglog('shedlock')

/** What {@link RunSteps} is made of: the executor's options. */
export interface RunStepsOptions {
  listener?: LockingTaskExecutorListener | undefined
  clock?: Clock | undefined
  runLedger?: RunLedger | undefined
  recordRunningAfter?: Duration | undefined
  slotRetention?: Duration | undefined
  node?: string | undefined
  logger?: ShedlockLogger | undefined
  lease?: Duration | false | undefined
}

/** What a run under a lock is for, beside its task: the caller's signal, the slot it claimed, the trigger it answers. */
export interface RunFor {
  readonly signal?: AbortSignal | undefined
  readonly claimed?: SlotClaim | undefined
  readonly trigger?: TriggerClaim | undefined
}

/** A slot this node claimed; `decided` once it ran or was recorded as skipped. */
export interface SlotClaim {
  readonly slot: Date
  readonly execution: LockExecution
  /** Who claimed it, as the ledger names nodes: the claim's `lockedBy` where the store keeps one. */
  readonly owner: string
  decided: boolean
}

/**
 * The steps every run of an executor goes through, and the state they share: taking a lock,
 * watching it while its task runs, running the task (through the listener's `aroundTask`),
 * releasing it, recording the run; and the calls and locks that `close()` stops and waits for.
 * Plain runs use it directly, slot runs (slot-runs.ts) and catch-ups (catch-up.ts) through it.
 */
export class RunSteps implements CatchUpRuntime {
  readonly provider: LockProvider
  // Slot records are plain locks that are never released: claimed through the provider itself,
  // not through a keep-alive wrapper, which would extend them.
  readonly claimer: LockProvider
  readonly providerName: string | undefined
  readonly clock: Clock
  readonly node: string
  readonly defaultRetention: number
  /** How long the store holds a task lock at a time, in milliseconds; 0: for the whole `lockAtMostFor`. */
  readonly leaseMs: number
  readonly emit: Emit
  readonly recorder: RunRecorder
  readonly #listener: LockingTaskExecutorListener | undefined
  #inspector: LockInspector | undefined
  // Whether the provider's task locks can be leased (renewed by extension, and not kept alive by
  // a wrapper): learnt from the first one taken, which is held for its whole lockAtMostFor.
  #leasable: boolean | undefined
  // Calls past their checks (taking a lock, running or releasing it), and the locks whose task
  // runs: what close() stops and waits for.
  readonly #inflight = new Registry<Promise<unknown>>()
  readonly #running = new Registry<ActiveLock>()
  #closing: Promise<void> | undefined

  constructor(provider: LockProvider, options: RunStepsOptions) {
    this.provider = provider
    this.claimer = unwrappedProvider(provider)
    this.providerName = providerNameOf(provider)
    this.clock = options.clock ?? systemClock
    this.node = options.node ?? `${hostname()}:${process.pid}`
    this.defaultRetention = parseDuration(options.slotRetention ?? DEFAULT_SLOT_RETENTION)
    this.leaseMs = options.lease === false ? 0 : parseDuration(options.lease ?? DEFAULT_LEASE)
    this.#listener = withLogger(options.listener, options.logger)
    this.emit = eventEmitter(this.#listener)
    this.recorder = new RunRecorder(
      options.runLedger,
      this.clock,
      this.emit,
      parseDuration(options.recordRunningAfter ?? DEFAULT_RECORD_RUNNING_AFTER_MS),
    )
  }

  /** True once the executor was closed. */
  closed(): boolean {
    return this.#closing !== undefined
  }

  /** The claimer's inspector, made on first use. It may throw (a client without the calls it needs). */
  inspector(): LockInspector | undefined {
    this.#inspector ??= this.claimer.inspector?.()
    return this.#inspector
  }

  /** `call`, tracked from now until it settles: close() waits for it. */
  async track<T>(call: Promise<T>): Promise<T> {
    const entry = this.begin(call)
    try {
      return await call
    } finally {
      this.end(entry)
    }
  }

  /**
   * {@link track} in two steps, for a caller that awaits `call` itself: one async function fewer
   * per execution (an async wrapper that returns a promise costs two promises and two turns).
   */
  begin(call: Promise<unknown>): unknown {
    return this.#inflight.add(call)
  }

  /** Ends what {@link begin} tracked. */
  end(entry: unknown): void {
    this.#inflight.delete(entry as never)
  }

  /** What the store is asked for to take the task lock of `configuration`: a lease of it, where leases apply. */
  taskLock(configuration: LockConfiguration): LockConfiguration {
    return this.#leasable === true ? leasedConfiguration(configuration, this.leaseMs) : configuration
  }

  /** Who holds `handle`, as the ledger names nodes: its `lockedBy` where the store keeps one, else this node. */
  ownerOf(handle: SimpleLock): string {
    const { lockedBy } = handle as { lockedBy?: unknown }
    return typeof lockedBy === 'string' ? lockedBy : this.node
  }

  /** Asks `from` for `lock`; a store failure is reported as the failure of `configuration` (the caller's lock) and thrown. */
  acquire(
    from: LockProvider,
    lock: LockConfiguration,
    configuration: LockConfiguration,
    execution: LockExecution,
  ): Promise<SimpleLock | undefined> {
    // Not an async function: one promise (the catch's) per acquisition instead of two and a turn.
    const failed = (error: unknown): never => {
      throw this.#acquireFailed(error, configuration, execution)
    }
    try {
      return Promise.resolve(from.lock(lock)).catch(failed)
    } catch (error) {
      return Promise.reject(this.#acquireFailed(error, configuration, execution))
    }
  }

  /** `pair(first, second)`, with a store failure reported as {@link acquire} reports it. */
  async acquirePair(
    pair: LockPair,
    first: LockConfiguration,
    second: LockConfiguration,
    execution: LockExecution,
  ): Promise<PairedLocks> {
    try {
      return await pair(first, second)
    } catch (error) {
      throw this.#acquireFailed(error, second, execution)
    }
  }

  // The failure of an acquisition for `configuration`, reported: what acquire() throws.
  #acquireFailed(error: unknown, configuration: LockConfiguration, execution: LockExecution): LockProviderError {
    const { name } = configuration
    const failure =
      error instanceof LockProviderError
        ? error
        : new LockProviderError(`Could not acquire lock "${name}": ${messageOf(error)}`, {
            cause: error,
            lockName: name,
          })
    debug('Lock "%s" could not be acquired, the task does not run: %s', name, failure.message)
    this.emit('onLockFailed', execution, configuration, failure)
    return failure
  }

  /**
   * Takes the lock and runs `task` under it, recorded in the run ledger: a plain run. Not async:
   * runLocked() awaits the acquisition itself (one async function fewer per execution, measured
   * with scripts/instructions.mjs).
   */
  lockAndRun<T>(task: LockedTask<T>, configuration: LockConfiguration, run: RunFor): Promise<TaskResult<T>> {
    const execution = newExecution(this.providerName, false)
    this.emit('onLockAttempt', execution, configuration)
    const acquiring = this.acquire(this.provider, this.taskLock(configuration), configuration, execution)
    return this.runLocked(task, configuration, acquiring, execution, run)
  }

  /** Watches a task lock just taken: lock loss, close() (which aborts it), listener events. */
  hold(configuration: LockConfiguration, handle: SimpleLock, execution: LockExecution): HeldTaskLock {
    const emit = this.emit
    // The first task lock, taken before the provider was known to extend, is held for its whole
    // lockAtMostFor: it is renewed at once, down to a lease (one write, once per executor).
    const first = this.#leasable === undefined
    this.#leasable ??= this.leaseMs > 0 && isExtensibleLock(handle) && !isKeepAliveLock(handle)
    const asked = this.taskLock(configuration)
    const active = new ActiveLock(configuration, handle, {
      clock: this.clock,
      lease:
        this.#leasable && asked !== configuration
          ? {
              ms: asked.lockAtMostFor,
              until: (first ? configuration : asked).lockAtMostUntil.getTime(),
              renewNow: first,
            }
          : undefined,
      events: reportingEvents(emit, execution),
    })
    lockTaken(execution, active.fencingToken)
    if (debug.enabled) {
      debug(
        'Lock "%s" acquired%s%s; held at most until %s, at least until %s',
        configuration.name,
        this.providerName === undefined ? '' : ` from ${this.providerName}`,
        active.fencingToken === undefined ? '' : ` with fencing token ${active.fencingToken}`,
        configuration.lockAtMostUntil.toISOString(),
        configuration.lockAtLeastUntil.toISOString(),
      )
    }
    emit('onLockAcquired', execution, configuration)
    const running = this.#running
    const entry = running.add(active)
    return {
      active,
      // Same-name calls the task started without awaiting them still run under this lock: a
      // promise only when there are some (most runs have none, and an await costs a turn).
      done: () => {
        const joined = active.finishAfterJoinedRuns()
        if (!joined) {
          running.delete(entry)
          return undefined
        }
        return joined.then(() => void running.delete(entry))
      },
    }
  }

  /**
   * Runs `task` under the lock `handle` just taken (for `run.claimed`'s slot, if any), then
   * releases it; given the acquisition still under way, awaits it first, and skips the task
   * (`'held'`) when it finds the lock held. A triggered run (`run.trigger`) starts only if its
   * claim succeeds.
   */
  async runLocked<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    taken: SimpleLock | Promise<SimpleLock | undefined>,
    execution: LockExecution,
    run: RunFor,
  ): Promise<TaskResult<T>> {
    const { signal, claimed, trigger } = run
    const handle = taken instanceof Promise ? await taken : taken
    if (!handle) return this.#notAcquired(configuration, execution)
    const held = this.hold(configuration, handle, execution)
    const { active } = held
    // Closed, or aborted by the caller, while the lock was being taken: the task does not start.
    // Nor does a triggered run whose trigger another replica claimed (and ran) first.
    const stop = this.#closing || signal?.aborted ? 'closed' : trigger && !(await trigger.claim()) ? 'held' : undefined
    if (stop) {
      const joined = held.done()
      if (joined) await joined
      await this.release(active, execution)
      signal?.throwIfAborted()
      return stop === 'closed' ? closedBeforeStart(configuration) : { executed: false, reason: 'held' }
    }
    const stopOnAbort = signal ? (): void => active.abort(signal.reason) : noop
    signal?.addEventListener('abort', stopOnAbort, { once: true })
    if (claimed) claimed.decided = true
    const record = this.recorder.start(
      configuration,
      execution,
      claimed?.slot,
      this.ownerOf(handle),
      active.fencingToken,
      trigger?.by,
    )
    let failure: unknown
    try {
      if (record?.started) await record.started
      const context = new RunContext(active, configuration, claimed?.slot)
      return await runWithActiveLock(active, () => this.runTask(task, context, execution), context)
    } catch (error) {
      failure = error
      throw error
    } finally {
      signal?.removeEventListener('abort', stopOnAbort)
      const joined = held.done()
      if (joined) await joined
      if (record) await Promise.all([this.release(active, execution), record.end(active, failure)])
      else await this.release(active, execution)
    }
  }

  // The lock was held: by a pause (one read tells), or by a run.
  async #notAcquired(configuration: LockConfiguration, execution: LockExecution): Promise<TaskResult<never>> {
    debug('Lock "%s" not acquired: another node holds it; the task is skipped', configuration.name)
    this.emit('onLockNotAcquired', execution, configuration)
    const pause = pauseOf(await readHolder(() => this.inspector(), configuration.name))
    if (!pause) return { executed: false, reason: 'held' }
    debug('Lock "%s": %s', configuration.name, describePause(pause))
    this.emit('onTaskPaused', execution, configuration, pause)
    return { executed: false, reason: 'paused' }
  }

  /** Runs `task` (through the listener's `aroundTask`), reporting its start and end. */
  runTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): Promise<TaskResult<T>> {
    return runTask(this.#listener, this.emit, task, context, execution)
  }

  /** Releases a task lock, bounded in time; a failure is reported, never thrown. */
  release(active: ActiveLock, execution: LockExecution): Promise<void> {
    return releaseTaskLock(active, execution, this.clock, this.emit, this.#listener)
  }

  /**
   * Runs nothing new from now on, aborts every running task's signal and resolves once every
   * tracked call settled, or after `timeoutMs`. Calling it again returns the same promise.
   */
  close(timeoutMs: number): Promise<void> {
    if (this.#closing) return this.#closing
    const running = this.#running
    const calls = this.#inflight.values()
    for (const active of running.values()) active.abort(closedReason())
    debug('Executor closed: %d task(s) asked to stop', running.size)
    // allSettled: a call that fails must not end the wait for the others.
    this.#closing = waitAtMost(Promise.allSettled(calls), timeoutMs).then((done) => {
      if (!done && debug.enabled) {
        const names = running
          .values()
          .map((active) => `"${active.name}"`)
          .join(', ')
        debug(
          'Executor closed; still running after %dms, keeping their locks until they end or expire: %s',
          timeoutMs,
          names,
        )
      }
    })
    return this.#closing
  }
}

/** The outcome of a run whose executor closed while its lock was taken. */
export function closedBeforeStart(configuration: LockConfiguration): TaskResult<never> {
  debug('Lock "%s" not run: the executor was closed while it was taken', configuration.name)
  return { executed: false, reason: 'closed' }
}

function noop(): void {}

// LockProvider has no name yet; a provider that carries a string `name` is reported by it.
function providerNameOf(provider: LockProvider): string | undefined {
  const { name } = provider as { name?: unknown }
  return typeof name === 'string' && name !== '' ? name : undefined
}
