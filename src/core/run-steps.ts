import { performance } from 'node:perf_hooks'
import { hostname } from 'node:os'
import { debuglog } from 'node:util'
import type { CatchUpRuntime, HeldTaskLock } from './catch-up.ts'
import { type Clock, systemClock } from './clock.ts'
import type { LockExecution } from './diagnostics.ts'
import { parseDuration, type Duration } from './duration.ts'
import { LockProviderError } from './errors.ts'
import { callHook, type Emit, eventEmitter, type LockingTaskExecutorListener } from './executor-events.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import { ActiveLock, runWithActiveLock } from './lock-context.ts'
import type { LockInspector } from './lock-inspector.ts'
import { type ShedlockLogger, withLogger } from './logger.ts'
import {
  type LockPair,
  type LockProvider,
  type PairedLocks,
  type SimpleLock,
  unwrappedProvider,
} from './lock-provider.ts'
import { Registry } from './registry.ts'
import { DEFAULT_RECORD_RUNNING_AFTER_MS, RunRecorder } from './run-recorder.ts'
import type { RunLedger } from './run-ledger.ts'
import { releaseTaskLock } from './release.ts'
import { DEFAULT_SLOT_RETENTION } from './slots.ts'
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
  readonly emit: Emit
  readonly recorder: RunRecorder
  readonly #listener: LockingTaskExecutorListener | undefined
  #inspector: LockInspector | undefined
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
    const entry = this.#inflight.add(call)
    try {
      return await call
    } finally {
      this.#inflight.delete(entry)
    }
  }

  /** Who holds `handle`, as the ledger names nodes: its `lockedBy` where the store keeps one, else this node. */
  ownerOf(handle: SimpleLock): string {
    const { lockedBy } = handle as { lockedBy?: unknown }
    return typeof lockedBy === 'string' ? lockedBy : this.node
  }

  /** Asks `from` for `lock`; a store failure is reported as the failure of `configuration` (the caller's lock) and thrown. */
  async acquire(
    from: LockProvider,
    lock: LockConfiguration,
    configuration: LockConfiguration,
    execution: LockExecution,
  ): Promise<SimpleLock | undefined> {
    try {
      return await from.lock(lock)
    } catch (error) {
      throw this.#acquireFailed(error, configuration, execution)
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

  /** Takes the lock and runs `task` under it, recorded in the run ledger: a plain run. */
  async lockAndRun<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    signal: AbortSignal | undefined,
  ): Promise<TaskResult<T>> {
    const execution = newExecution(this.providerName, false)
    this.emit('onLockAttempt', execution, configuration)
    const handle = await this.acquire(this.provider, configuration, configuration, execution)
    if (!handle) {
      debug('Lock "%s" not acquired: another node holds it; the task is skipped', configuration.name)
      this.emit('onLockNotAcquired', execution, configuration)
      return { executed: false, reason: 'held' }
    }
    return this.runLocked(task, configuration, handle, execution, signal, undefined)
  }

  /** Watches a task lock just taken: lock loss, close() (which aborts it), listener events. */
  hold(configuration: LockConfiguration, handle: SimpleLock, execution: LockExecution): HeldTaskLock {
    const emit = this.emit
    const active = new ActiveLock(configuration, handle, {
      clock: this.clock,
      events: {
        onExtended: (next) => {
          if (debug.enabled)
            debug('Lock "%s" extended: held at most until %s', next.name, next.lockAtMostUntil.toISOString())
          emit('onLockExtended', execution, next)
        },
        onLost: (current, reason) => {
          if (debug.enabled)
            debug(
              'Lock "%s" lost: %s%s',
              current.name,
              reason.message,
              reason.cause === undefined ? '' : ` (${messageOf(reason.cause)})`,
            )
          emit('onLockLost', execution, current, reason)
        },
      },
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
      done: async () => {
        // Same-name calls the task started without awaiting them still run under this lock.
        const joined = active.finishAfterJoinedRuns()
        if (joined) await joined
        running.delete(entry)
      },
    }
  }

  /** Runs `task` under the lock `handle` just taken (for `claimed`'s slot, if any), then releases it. */
  async runLocked<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    handle: SimpleLock,
    execution: LockExecution,
    signal: AbortSignal | undefined,
    claimed: SlotClaim | undefined,
  ): Promise<TaskResult<T>> {
    const held = this.hold(configuration, handle, execution)
    const { active } = held
    // Closed, or aborted by the caller, while the lock was being taken: the task does not start.
    if (this.#closing || signal?.aborted) {
      await held.done()
      await this.release(active, execution)
      signal?.throwIfAborted()
      return closedBeforeStart(configuration)
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
    )
    let failure: unknown
    try {
      const context = new RunContext(active, configuration, claimed?.slot)
      return await runWithActiveLock(active, () => this.runTask(task, context, execution), context)
    } catch (error) {
      failure = error
      throw error
    } finally {
      signal?.removeEventListener('abort', stopOnAbort)
      await held.done()
      if (record) await Promise.all([this.release(active, execution), record.end(active, failure)])
      else await this.release(active, execution)
    }
  }

  async runTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): Promise<TaskResult<T>> {
    const { configuration } = context
    this.emit('onTaskStarted', execution, configuration)
    const start = performance.now()
    try {
      const result = await this.#startTask(task, context, execution)
      this.emit('onTaskFinished', execution, configuration, { durationMs: performance.now() - start, failed: false })
      return { executed: true, result }
    } catch (error) {
      this.emit('onTaskFinished', execution, configuration, {
        durationMs: performance.now() - start,
        failed: true,
        error,
      })
      throw error
    }
  }

  // Runs the task, through the listener's aroundTask hook when it has one. Whatever the hook
  // does, the task starts exactly once, and its own result or error is what counts.
  #startTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): T | Promise<T> {
    const listener = this.#listener
    const around = listener?.aroundTask
    if (typeof around !== 'function') return task(context)
    let result: { value: T | Promise<T> } | { error: unknown } | undefined
    const start = (): void => {
      if (result) return
      try {
        result = { value: task(context) }
      } catch (error) {
        result = { error }
      }
    }
    callHook(listener, 'aroundTask', [context.configuration, start, execution])
    if (!result) start()
    if ('error' in result!) throw result.error
    return result!.value
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

/** Resolves to true once `promise` settles, or to false after `ms`; never rejects. */
function waitAtMost(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    timer.unref()
    const settled = (): void => {
      clearTimeout(timer)
      resolve(true)
    }
    promise.then(settled, settled)
  })
}

// LockProvider has no name yet; a provider that carries a string `name` is reported by it.
function providerNameOf(provider: LockProvider): string | undefined {
  const { name } = provider as { name?: unknown }
  return typeof name === 'string' && name !== '' ? name : undefined
}
