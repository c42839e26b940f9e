import { performance } from 'node:perf_hooks'
import { hostname } from 'node:os'
import { debuglog } from 'node:util'
import { type Clock, systemClock } from './clock.ts'
import { beforeDeadline } from './deadline.ts'
import { type LockEventName, type LockExecution, publishLockEvent } from './diagnostics.ts'
import { type Duration, parseDuration } from './duration.ts'
import { ExecutorClosedError, LockConfigurationError, type LockLostError, LockProviderError } from './errors.ts'
import { configurationAt, isLockConfiguration, type LockConfiguration, type LockConfigurationOptions, lockConfiguration } from './lock-configuration.ts'
import { ActiveLock, findActiveLock, runWithActiveLock } from './lock-context.ts'
import type { LockInspector } from './lock-inspector.ts'
import { type LockProvider, type SimpleLock, unwrappedProvider } from './lock-provider.ts'
import { type RunLedger, type RunOutcome, type RunStart, runErrorOf } from './run-ledger.ts'
import { DEFAULT_SLOT_RETENTION, parseSlotRecordName, slotRecordName } from './slots.ts'

const debug = debuglog('shedlock')

/** What a locked task receives. */
export interface TaskContext {
  /**
   * Aborts when the task should stop: with a `LockLostError` when the lock can no longer be
   * trusted (`lockAtMostUntil` passed without an extension, or a keep-alive extension failed),
   * with an `ExecutorClosedError` when the executor is closed (a shutdown), or with the reason of
   * the caller's own `signal`. Long tasks should stop when it aborts.
   */
  readonly signal: AbortSignal
  /** The lock the task runs under. */
  readonly configuration: LockConfiguration
  /** The scheduled fire time this run is for: a slot run, or a catch-up of a missed slot; `undefined` otherwise. */
  readonly slot: Date | undefined
}

/** A task to run under a lock. */
export type LockedTask<T> = (context: TaskContext) => T | Promise<T>

/**
 * Why `executeWithLock()` did not run the task:
 * - `'held'`: another node (or another call of this process) holds the lock;
 * - `'slot-done'`: a slot run (the `slot` option) that ran, or was skipped, on some node already;
 * - `'closed'`: the executor was closed (`close()`, on a shutdown) and runs nothing new.
 */
export type SkipReason = 'held' | 'slot-done' | 'closed'

/**
 * The outcome of `executeWithLock()`: the task's result, or `{ executed: false, reason }` when it
 * did not run. Test `executed` first; `reason` says why it was skipped.
 */
export type TaskResult<T> = { executed: true; result: T } | { executed: false; reason: SkipReason }

/**
 * Per-call options of `executeWithLock()`, next to the lock's: pass them in the options object,
 * or as the third argument with a ready `LockConfiguration`.
 */
export interface ExecutionOptions {
  /**
   * The caller's signal: aborted before the lock is taken, the call rejects with its reason and
   * the store is not asked; aborted while the task runs, the task's own `signal` aborts with the
   * same reason (the lock stays held until the task ends, and is released as usual).
   */
  signal?: AbortSignal
  /**
   * The scheduled fire time this run is for (a slot). For one name and slot, the task runs at most
   * once across all nodes, for as long as the slot's record is kept (`slotRetention`), whatever
   * the nodes' clocks, `lockAtLeastFor` or the task's duration: a later attempt resolves to
   * `{ executed: false, reason: 'slot-done' }`. The first node to claim the slot decides it: it
   * runs the task, or records the slot as skipped when the lock is held (a long run of an earlier
   * slot). A failed run counts as run. See docs/slots.md.
   */
  slot?: Date
  /**
   * How long a slot's record is kept, in milliseconds or a duration string: longer than the worst
   * clock skew and scheduling delay between nodes, and than any catch-up window.
   * @default the executor's `slotRetention`, else "24h"
   */
  slotRetention?: Duration
}

/** What `executeWithLock()` takes: the lock's options and the call's. */
export type LockRequest = LockConfigurationOptions & ExecutionOptions

/**
 * What to do about slots every node missed (all were down at their fire time: a deploy, an outage):
 * - `'skip'`: nothing (the default of the integrations);
 * - `'once'`: one run for all of them (for the latest; the others are recorded as skipped);
 * - `'all'`: each of them, oldest first.
 * Catch-up runs are slot runs too: each slot runs at most once across nodes.
 */
export type CatchUpPolicy = 'skip' | 'once' | 'all'

/** Options of {@link LockingTaskExecutor.catchUp}. */
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

/** What {@link LockingTaskExecutor.catchUp} did. */
export interface CatchUpResult {
  /**
   * - `'ran'`: missed slots were found and handled (see `ran` and `failed`);
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
}

/** Options of {@link LockingTaskExecutor.close}. */
export interface CloseOptions {
  /**
   * How long to wait for running tasks to end after their signal aborted, in milliseconds or a
   * duration string. A task still running then keeps its lock (it expires at its
   * `lockAtMostUntil`): releasing it would let another node start the task beside it. @default "10s"
   */
  timeout?: Duration
}

/** How a task ended, for {@link LockingTaskExecutorListener.onTaskFinished}. */
export interface TaskOutcome {
  /** Wall time of the task in milliseconds (lock acquisition excluded). */
  readonly durationMs: number
  /** True when the task threw or rejected; `error` holds the reason. */
  readonly failed: boolean
  readonly error?: unknown
}

/**
 * Hooks into the executor's decisions. Every hook is optional. A hook that throws (or returns a
 * rejected promise) is ignored: a listener never breaks a task.
 *
 * The last argument of every hook is the {@link LockExecution}: the same object for every hook of
 * one `executeWithLock()` call, so a listener can tell concurrent calls apart (key a `WeakMap` by
 * it). The same events go to `node:diagnostics_channel` (see `diagnosticsChannels`).
 */
export interface LockingTaskExecutorListener {
  /** Before asking the provider (not called for re-entrant calls). */
  onLockAttempt?(configuration: LockConfiguration, execution: LockExecution): void
  onLockAcquired?(configuration: LockConfiguration, execution: LockExecution): void
  /** Another node holds the lock; the task is skipped. */
  onLockNotAcquired?(configuration: LockConfiguration, execution: LockExecution): void
  /** The store failed while acquiring; the task is skipped and the caller gets `error`. */
  onLockFailed?(configuration: LockConfiguration, error: LockProviderError, execution: LockExecution): void
  /** The task starts; also for a re-entrant call (`execution.reentrant`), with the outer lock's configuration. */
  onTaskStarted?(configuration: LockConfiguration, execution: LockExecution): void
  onTaskFinished?(configuration: LockConfiguration, outcome: TaskOutcome, execution: LockExecution): void
  /** The lock was released (or kept until `lockAtLeastUntil`) after the task. */
  onUnlocked?(configuration: LockConfiguration, execution: LockExecution): void
  /** Releasing failed; the lock expires at its `lockAtMostUntil` instead. */
  onUnlockFailed?(configuration: LockConfiguration, error: unknown, execution: LockExecution): void
  /** The lock was extended, by `extendActiveLock()` or a keep-alive provider; `configuration` holds the new deadlines. */
  onLockExtended?(configuration: LockConfiguration, execution: LockExecution): void
  /** The lock can no longer be trusted while its task runs; the task's signal aborted with `reason`. */
  onLockLost?(configuration: LockConfiguration, reason: LockLostError, execution: LockExecution): void
  /** A slot run: this node claimed `slot`; it runs the task next, or records the slot as skipped if the lock is held. */
  onSlotClaimed?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** A slot run: `slot` ran, or was skipped, on some node already; the task is skipped (`reason: 'slot-done'`). */
  onSlotDone?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** A slot run: this node claimed `slot` but the lock was held (a long run of an earlier slot); the slot is recorded as skipped and never runs. */
  onSlotSkipped?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** A catch-up found `slot` missed: every node was down when it was due. */
  onSlotMissed?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** A catch-up ran the missed `slot` (its task ended, failed or not). */
  onSlotCaughtUp?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** Writing the run ledger failed; the run went on. */
  onRunLedgerFailed?(configuration: LockConfiguration, error: unknown, execution: LockExecution): void
  /**
   * Wraps the start of the task, after `onTaskStarted`: call `start()` inside a context of your
   * own, e.g. an OpenTelemetry context with the lock's span active, and the task (with every
   * `await` in it) runs in that context. Call `start()` once and synchronously; it returns when
   * the task first awaits and never throws. If the hook does not call it, or throws before it
   * does, the executor starts the task itself, and later calls do nothing.
   */
  aroundTask?(configuration: LockConfiguration, start: () => void, execution: LockExecution): void
}

/** Options of {@link createLockingTaskExecutor}. */
export interface LockingTaskExecutorOptions {
  listener?: LockingTaskExecutorListener
  /** Clock for `createdAt` and the lock-lost watchdog. @default systemClock */
  clock?: Clock
  /**
   * Where every execution is recorded (name, slot, node, start, end, outcome, error), e.g.
   * `postgresRunLedger({ client: pool })`. A failed write never fails the task: it goes to
   * `onRunLedgerFailed`. @default no history
   */
  runLedger?: RunLedger
  /** How long slot records are kept, unless a call says otherwise. @default "24h" */
  slotRetention?: Duration
  /** How this process names itself in the run ledger where the store keeps no holder. @default `<host>:<pid>` */
  node?: string
}

/** Runs tasks under locks. See {@link createLockingTaskExecutor}. */
export interface LockingTaskExecutor {
  /**
   * Runs `task` if the lock can be taken, skips it at once otherwise.
   *
   * Pass lock options (a fresh `createdAt` is taken for each call) or a ready
   * `LockConfiguration`. The lock is held until the task's promise settles, then released (or
   * kept until `lockAtLeastUntil`). A task error is re-thrown after the unlock; an unlock error
   * never hides it and is reported to `onUnlockFailed`. A nested call with the same name in the
   * same async context runs under the outer lock (re-entrant), which is released only after it.
   *
   * @throws LockConfigurationError for invalid options, before the store is touched.
   * @throws LockProviderError when the store fails; the task did not run.
   * @throws the reason of `signal` when it aborted before the lock was taken.
   */
  executeWithLock<T>(task: LockedTask<T>, request: LockConfiguration | LockRequest, options?: ExecutionOptions): Promise<TaskResult<T>>
  /**
   * Shuts the executor down, for a graceful exit (on SIGTERM, say): from now on it runs nothing
   * new (`executeWithLock()` resolves to `{ executed: false, reason: 'closed' }`), aborts the
   * signal of every running task with an `ExecutorClosedError`, waits for them to end (at most
   * `timeout`), and resolves once their locks are released, so that another node can take them at
   * once instead of after `lockAtMostFor`. Calling it again returns the same promise.
   */
  close(options?: CloseOptions): Promise<void>
  /** True once `close()` was called. */
  readonly closed: boolean
  /**
   * Runs the slots of `request.name` that every node missed, by `options.policy`, under the
   * task's lock: call it when a node starts. Missed slots are the schedule's fire times within
   * `options.within` after the task's latest slot record; without one (a new task) there is
   * nothing to catch up. Needs a provider with an inspector (every provider of shedlock has one).
   * Two nodes starting together catch up once: the other finds the lock held. Task errors do not
   * reject: they are in `failed`, and in the run ledger.
   *
   * @throws LockConfigurationError for bad options, or a provider without an inspector.
   * @throws LockProviderError when the store fails.
   */
  catchUp<T>(task: LockedTask<T>, request: LockRequest, options: CatchUpOptions): Promise<CatchUpResult>
}

/**
 * Creates an executor that runs tasks under locks from `provider`.
 *
 * ```ts
 * const executor = createLockingTaskExecutor(postgresLockProvider({ client: pool }))
 * await executor.executeWithLock(() => sendReport(), { name: 'report', lockAtMostFor: '10m', lockAtLeastFor: '30s' })
 * ```
 */
export function createLockingTaskExecutor(provider: LockProvider, options: LockingTaskExecutorOptions = {}): LockingTaskExecutor {
  if (provider === null || typeof provider !== 'object' || typeof provider.lock !== 'function') {
    throw new LockConfigurationError(
      'createLockingTaskExecutor() needs a LockProvider: an object with a lock(configuration) method, such as postgresLockProvider({ client })',
    )
  }
  const clock = options.clock ?? systemClock
  const { listener, runLedger } = options
  const providerName = providerNameOf(provider)
  const emit = eventEmitter(listener)
  const defaultRetention = parseDuration(options.slotRetention ?? DEFAULT_SLOT_RETENTION)
  const node = options.node ?? `${hostname()}:${process.pid}`
  // Slot records are plain locks that are never released: claimed through the provider itself,
  // not through a keep-alive wrapper, which would extend them.
  const claimer = unwrappedProvider(provider)
  let slotInspector: LockInspector | undefined
  // When each task's expired slot records were last removed (epoch ms, this process's clock).
  const swept = new Map<string, number>()

  /**
   * Removes the task's expired slot records, at most once per SWEEP_INTERVAL_MS and name, in the
   * background: on stores that keep records (SQL, MongoDB, DynamoDB, ZooKeeper, NATS) they would
   * otherwise pile up, one per slot. A failure only delays the next sweep.
   */
  function sweepSlotRecords(configuration: LockConfiguration): void {
    const { name } = configuration
    const now = clock.now()
    if (now - (swept.get(name) ?? Number.NEGATIVE_INFINITY) < SWEEP_INTERVAL_MS) return
    swept.set(name, now)
    // A sweep is housekeeping: whatever it throws (a client without the calls an inspector
    // needs, a store failure), the slot run goes on.
    Promise.resolve()
      .then(() => {
        slotInspector ??= claimer.inspector?.()
        return slotInspector?.removeExpired({ prefix: `${name}@` })
      })
      .then(
        (removed) => debug('Lock "%s": removed %d expired slot records', name, removed ?? 0),
        (error: unknown) => debug('Lock "%s": could not remove expired slot records: %s', name, messageOf(error)),
      )
  }
  // Calls past their checks (taking a lock, running or releasing it), and the locks whose task
  // runs: what close() stops and waits for.
  const inflight = new Registry<Promise<unknown>>()
  const running = new Registry<ActiveLock>()
  let closing: Promise<void> | undefined

  // Runs the task, through the listener's aroundTask hook when it has one. Whatever the hook
  // does, the task starts exactly once, and its own result or error is what counts.
  function startTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): T | Promise<T> {
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

  async function runTask<T>(task: LockedTask<T>, context: TaskContext, execution: LockExecution): Promise<TaskResult<T>> {
    const { configuration } = context
    emit('onTaskStarted', execution, configuration)
    const start = performance.now()
    try {
      const result = await startTask(task, context, execution)
      emit('onTaskFinished', execution, configuration, { durationMs: performance.now() - start, failed: false })
      return { executed: true, result }
    } catch (error) {
      emit('onTaskFinished', execution, configuration, { durationMs: performance.now() - start, failed: true, error })
      throw error
    }
  }

  async function release(active: ActiveLock, execution: LockExecution): Promise<void> {
    const handle = active.handle
    const { configuration } = active
    if (!handle) {
      debug('Lock "%s" not released: it was lost during the task', configuration.name)
      return
    }
    try {
      // A store that never answers must not keep executeWithLock() pending forever; past
      // lockAtMostUntil the lock has expired anyway (a release gets at least 5 s).
      const deadline = Math.max(configuration.lockAtMostUntil.getTime(), clock.now() + RELEASE_GRACE_MS)
      await beforeDeadline(
        handle.unlock(),
        deadline,
        clock,
        () =>
          new LockProviderError(
            `Could not release lock "${configuration.name}": the store did not answer by ${new Date(deadline).toISOString()}; the lock expires at ${configuration.lockAtMostUntil.toISOString()}`,
            { lockName: configuration.name },
          ),
      )
      if (debug.enabled) {
        const keptUntil =
          configuration.lockAtLeastUntil.getTime() > clock.now() ? `; held until ${configuration.lockAtLeastUntil.toISOString()} (lockAtLeastFor)` : ''
        debug('Lock "%s" released after the task%s', configuration.name, keptUntil)
      }
      emit('onUnlocked', execution, configuration)
    } catch (error) {
      if (debug.enabled)
        debug('Lock "%s" could not be released, it expires at %s: %s', configuration.name, configuration.lockAtMostUntil.toISOString(), messageOf(error))
      emit('onUnlockFailed', execution, configuration, error)
      if (!listener?.onUnlockFailed) {
        process.emitWarning(
          `shedlock: could not release lock "${configuration.name}" (${messageOf(error)}); it expires at ${configuration.lockAtMostUntil.toISOString()}`,
          'ShedLockWarning',
        )
      }
    }
  }

  async function execute<T>(task: LockedTask<T>, input: LockConfiguration | LockRequest, options: ExecutionOptions | undefined): Promise<TaskResult<T>> {
    if (typeof task !== 'function') {
      throw new LockConfigurationError(`executeWithLock() needs a task function as its first argument, got ${typeof task}`)
    }
    // Anything but a configuration built by lockConfiguration() is validated as options: an
    // object that only looks like one must not reach the store.
    const built = isLockConfiguration(input)
    const configuration = built ? input : configurationAt(input, clock.now())
    const { name } = configuration
    // The options object is read as it is unless a third argument overrides some of it.
    const request: ExecutionOptions = options === undefined ? (built ? {} : input) : { ...(built ? {} : input), ...options }
    const signal = callerSignal(request.signal)
    const slot = request.slot
    // Validated here, before the store is asked: a bad slot or retention is the caller's mistake.
    const slotName = slot === undefined ? undefined : slotRecordName(name, slot)
    const retention = request.slotRetention === undefined ? defaultRetention : parseDuration(request.slotRetention)

    const outer = findActiveLock(name)
    if (outer) {
      debug('Lock "%s" is already held in this async context; the nested task runs under it', name)
      // Joined, so that the outer call releases the lock only after this run, awaited or not.
      return outer.join(() => runTask(task, new RunContext(outer, outer.configuration, undefined), newExecution(providerName, true)))
    }
    if (closing) {
      debug('Lock "%s" not attempted: the executor is closed', name)
      return { executed: false, reason: 'closed' }
    }
    signal?.throwIfAborted()
    if (configuration.lockAtMostUntil.getTime() <= clock.now()) {
      throw new LockConfigurationError(
        `Lock "${name}": its configuration expired at ${configuration.lockAtMostUntil.toISOString()} (createdAt + lockAtMostFor), so the lock would exclude nobody; pass options ({ name, lockAtMostFor }) to executeWithLock(), which takes a fresh createdAt for every call, or build a fresh configuration for every attempt`,
      )
    }
    // Tracked from here, so that close() also waits for calls still taking their lock.
    const call = slot === undefined ? lockAndRun(task, configuration, signal, undefined) : slotRun(task, configuration, signal, slot, slotName!, retention)
    const entry = inflight.add(call)
    try {
      return await call
    } finally {
      inflight.delete(entry)
    }
  }

  // A slot run: the slot's record is claimed first, so that exactly one node decides the slot
  // (runs it, or records it as skipped when the lock is held), whatever the nodes' clocks.
  async function slotRun<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    signal: AbortSignal | undefined,
    slot: Date,
    slotName: string,
    retention: number,
  ): Promise<TaskResult<T>> {
    const execution = newExecution(providerName, false)
    emit('onLockAttempt', execution, configuration)
    const claim = lockConfiguration({ name: slotName, lockAtMostFor: retention, createdAt: new Date(clock.now()) })
    // Once the slot is decided, the claim is never released: its record stays until the
    // retention ends, and tells every later attempt that the slot is done.
    const handle = await acquire(claimer, claim, configuration, execution)
    if (!handle) {
      debug('Lock "%s": slot %s ran or was skipped on some node already; the task is skipped', configuration.name, slot.toISOString())
      emit('onSlotDone', execution, configuration, slot)
      return { executed: false, reason: 'slot-done' }
    }
    emit('onSlotClaimed', execution, configuration, slot)
    sweepSlotRecords(configuration)
    const claimed: SlotClaim = { slot, execution, owner: handleOwner(handle) ?? node, decided: false }
    try {
      return await lockAndRun(task, configuration, signal, claimed)
    } finally {
      // Not decided (the store failed, or the executor closed, before the task could start): the
      // slot did not run, so another node or a catch-up may take it.
      if (!claimed.decided)
        await handle
          .unlock()
          .catch((error: unknown) => debug('Lock "%s": could not give back slot %s: %s', configuration.name, slot.toISOString(), messageOf(error)))
    }
  }

  /** Asks `from` for `lock`; a store failure is reported as the failure of `configuration` (the caller's lock) and thrown. */
  async function acquire(
    from: LockProvider,
    lock: LockConfiguration,
    configuration: LockConfiguration,
    execution: LockExecution,
  ): Promise<SimpleLock | undefined> {
    try {
      return await from.lock(lock)
    } catch (error) {
      const { name } = configuration
      const failure =
        error instanceof LockProviderError
          ? error
          : new LockProviderError(`Could not acquire lock "${name}": ${messageOf(error)}`, { cause: error, lockName: name })
      debug('Lock "%s" could not be acquired, the task does not run: %s', name, failure.message)
      emit('onLockFailed', execution, configuration, failure)
      throw failure
    }
  }

  /**
   * Takes the lock and runs `task` under it (recorded in the run ledger), or `body` instead: what
   * a catch-up runs, recording its runs itself.
   */
  async function lockAndRun<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    signal: AbortSignal | undefined,
    claimed: SlotClaim | undefined,
    body?: (active: ActiveLock, execution: LockExecution, owner: string) => Promise<TaskResult<T>>,
  ): Promise<TaskResult<T>> {
    const { name } = configuration
    const execution = claimed?.execution ?? newExecution(providerName, false)
    if (!claimed) emit('onLockAttempt', execution, configuration)
    const handle = await acquire(provider, configuration, configuration, execution)
    if (!handle) {
      debug('Lock "%s" not acquired: another node holds it; the task is skipped', name)
      emit('onLockNotAcquired', execution, configuration)
      if (claimed) {
        // This node decided the slot, and it cannot run: it is recorded as skipped, once.
        claimed.decided = true
        emit('onSlotSkipped', execution, configuration, claimed.slot)
        const now = new Date(clock.now())
        await ledgerWrite(configuration, execution, () =>
          runLedger!.record({ name, slot: claimed.slot, node: claimed.owner, startedAt: now, finishedAt: now, outcome: 'skipped', durationMs: 0 }),
        )
      }
      return { executed: false, reason: 'held' }
    }

    const active = new ActiveLock(configuration, handle, {
      clock,
      events: {
        onExtended: (next) => {
          if (debug.enabled) debug('Lock "%s" extended: held at most until %s', next.name, next.lockAtMostUntil.toISOString())
          emit('onLockExtended', execution, next)
        },
        onLost: (current, reason) => {
          if (debug.enabled) debug('Lock "%s" lost: %s%s', current.name, reason.message, reason.cause === undefined ? '' : ` (${messageOf(reason.cause)})`)
          emit('onLockLost', execution, current, reason)
        },
      },
    })
    if (debug.enabled) {
      debug(
        'Lock "%s" acquired%s; held at most until %s, at least until %s',
        name,
        providerName === undefined ? '' : ` from ${providerName}`,
        configuration.lockAtMostUntil.toISOString(),
        configuration.lockAtLeastUntil.toISOString(),
      )
    }
    emit('onLockAcquired', execution, configuration)
    // Closed, or aborted by the caller, while the lock was being taken: the task does not start.
    if (closing || signal?.aborted) {
      active.finish()
      await release(active, execution)
      if (signal?.aborted) throw signal.reason
      debug('Lock "%s" released unused: the executor was closed while it was taken', name)
      return { executed: false, reason: 'closed' }
    }
    const stopOnAbort = signal ? (): void => active.abort(signal.reason) : noop
    signal?.addEventListener('abort', stopOnAbort, { once: true })
    const runningEntry = running.add(active)
    if (claimed) claimed.decided = true
    const owner = handleOwner(handle) ?? node
    const record = body ? undefined : recordRun(configuration, execution, claimed?.slot, owner)
    let failure: unknown
    try {
      const run = body ? () => body(active, execution, owner) : () => runTask(task, new RunContext(active, configuration, claimed?.slot), execution)
      return await runWithActiveLock(active, run)
    } catch (error) {
      failure = error
      throw error
    } finally {
      signal?.removeEventListener('abort', stopOnAbort)
      // Same-name calls the task started without awaiting them still run under this lock.
      const joined = active.finishAfterJoinedRuns()
      if (joined) await joined
      running.delete(runningEntry)
      if (record) await Promise.all([release(active, execution), record.end(active, failure)])
      else await release(active, execution)
    }
  }

  /**
   * Records a run in the ledger: its start now (not awaited before the task: a slow or failing
   * ledger never delays or fails a run), its end when `end` is called.
   */
  function recordRun(
    configuration: LockConfiguration,
    execution: LockExecution,
    slot: Date | undefined,
    owner: string,
  ): { end(active: ActiveLock, failure: unknown): Promise<void> } | undefined {
    if (!runLedger) return undefined
    const started: RunStart = { name: configuration.name, slot, node: owner, startedAt: new Date(clock.now()) }
    const runId = runLedger.start(started)
    runId.catch(() => undefined)
    const startedAt = performance.now()
    return {
      end: (active, failure) => {
        const outcome: Exclude<RunOutcome, 'running'> = active.lost ? 'lock-lost' : failure === undefined ? 'ok' : 'failed'
        const durationMs = performance.now() - startedAt
        const error = failure === undefined ? undefined : runErrorOf(failure)
        return ledgerWrite(configuration, execution, async () =>
          runLedger.finish(await runId, { finishedAt: new Date(clock.now()), outcome, durationMs, error }),
        )
      },
    }
  }

  /** Runs one ledger write, bounded; a failure is reported and swallowed: history never fails a run. */
  async function ledgerWrite(configuration: LockConfiguration, execution: LockExecution, write: () => Promise<unknown>): Promise<void> {
    if (!runLedger) return
    try {
      await beforeDeadline(
        write(),
        clock.now() + LEDGER_TIMEOUT_MS,
        clock,
        () => new Error(`the run ledger (${runLedger.name}) did not answer within ${LEDGER_TIMEOUT_MS} ms`),
      )
    } catch (error) {
      debug('Lock "%s": could not write the run ledger: %s', configuration.name, messageOf(error))
      emit('onRunLedgerFailed', execution, configuration, error)
    }
  }

  async function catchUp<T>(task: LockedTask<T>, request: LockRequest, options: CatchUpOptions): Promise<CatchUpResult> {
    const nothing = (outcome: CatchUpResult['outcome'], missed: Date[] = []): CatchUpResult => ({ outcome, missed, ran: [], failed: [] })
    if (typeof task !== 'function') throw new LockConfigurationError(`catchUp() needs a task function as its first argument, got ${typeof task}`)
    const configuration = lockConfiguration({ ...request, createdAt: request?.createdAt ?? new Date(clock.now()) })
    const { name } = configuration
    const policy = options?.policy
    if (policy !== 'skip' && policy !== 'once' && policy !== 'all') {
      throw new LockConfigurationError(`Lock "${name}": catchUp policy must be 'skip', 'once' or 'all', got ${JSON.stringify(policy)}`)
    }
    if (typeof options.fireTimes !== 'function')
      throw new LockConfigurationError(`Lock "${name}": catchUp needs fireTimes(from, to), the schedule's fire times`)
    const within = parseDuration(options.within)
    const retention = request.slotRetention === undefined ? defaultRetention : parseDuration(request.slotRetention)
    if (within > retention) {
      throw new LockConfigurationError(
        `Lock "${name}": catchUp within (${within}ms) is longer than the slot retention (${retention}ms), so missed slots could not be told from run ones; raise slotRetention or shorten within`,
      )
    }
    if (policy === 'skip' || closing) return nothing('skipped')
    const inspector = claimer.inspector?.()
    if (!inspector)
      throw new LockConfigurationError(
        `Lock "${name}": catching up needs a provider with an inspector (to read the task's slot records); ${providerName ?? 'this provider'} has none`,
      )
    const signal = callerSignal(request.signal)
    signal?.throwIfAborted()

    const result = {
      missed: [] as Date[],
      ran: [] as Date[],
      failed: [] as { slot: Date; error: unknown }[],
      outcome: 'nothing-missed' as CatchUpResult['outcome'],
    }
    const body = async (active: ActiveLock, execution: LockExecution, owner: string): Promise<TaskResult<undefined>> => {
      const now = clock.now()
      const prefix = `${name}@`
      const known = (await inspector.list({ prefix })).locks.flatMap((record) => {
        const parsed = parseSlotRecordName(record.name)
        return parsed && parsed.name === name ? [parsed.slot.getTime()] : []
      })
      if (known.length === 0) {
        result.outcome = 'no-history'
        return { executed: true, result: undefined }
      }
      const latest = Math.max(...known)
      const fires = [...options.fireTimes(new Date(Math.max(now - within, latest + 1)), new Date(now))]
        .filter((fire) => fire instanceof Date && fire.getTime() > latest && fire.getTime() <= now)
        .sort((a, b) => a.getTime() - b.getTime())
      result.missed = fires
      for (const slot of fires) emit('onSlotMissed', execution, configuration, slot)
      if (fires.length === 0) return { executed: true, result: undefined }
      result.outcome = 'ran'
      // Claimed one by one: a slot another node claimed meanwhile (its scheduler fired it) is its.
      const claimed: Date[] = []
      for (const slot of fires) {
        if (active.signal.aborted) break
        const claim = lockConfiguration({ name: slotRecordName(name, slot), lockAtMostFor: retention, createdAt: new Date(clock.now()) })
        if (!(await acquire(claimer, claim, configuration, execution))) continue
        claimed.push(slot)
        if (policy === 'all') await runMissed(task, active, configuration, execution, owner, slot, result)
      }
      if (policy === 'once' && claimed.length > 0) {
        const last = claimed.at(-1)!
        const at = new Date(clock.now())
        for (const slot of claimed.slice(0, -1)) {
          await ledgerWrite(configuration, execution, () =>
            runLedger!.record({ name, slot, node: owner, startedAt: at, finishedAt: at, outcome: 'skipped', durationMs: 0 }),
          )
        }
        await runMissed(task, active, configuration, execution, owner, last, result)
      }
      return { executed: true, result: undefined }
    }
    const outcome = await lockAndRun(task, configuration, signal, undefined, body)
    if (!outcome.executed) return nothing(outcome.reason === 'held' ? 'held' : 'skipped')
    return result
  }

  /** One catch-up run of a missed slot, under the catch-up's lock, recorded in the ledger; its error goes to `result`. */
  async function runMissed<T>(
    task: LockedTask<T>,
    active: ActiveLock,
    configuration: LockConfiguration,
    execution: LockExecution,
    owner: string,
    slot: Date,
    result: { ran: Date[]; failed: { slot: Date; error: unknown }[] },
  ): Promise<void> {
    const record = recordRun(configuration, execution, slot, owner)
    let failure: unknown
    try {
      await runTask(task, new RunContext(active, configuration, slot), execution)
    } catch (error) {
      failure = error
      result.failed.push({ slot, error })
    } finally {
      result.ran.push(slot)
      emit('onSlotCaughtUp', execution, configuration, slot)
      await record?.end(active, failure)
    }
  }

  return {
    executeWithLock: execute,
    catchUp,
    get closed() {
      return closing !== undefined
    },
    close(closeOptions: CloseOptions = {}) {
      if (closing) return closing
      const timeout = parseDuration(closeOptions.timeout ?? '10s')
      const calls = inflight.values()
      for (const active of running.values()) active.abort(closedReason())
      debug('Executor closed: %d task(s) asked to stop', running.size)
      // allSettled: a call that fails must not end the wait for the others.
      closing = waitAtMost(Promise.allSettled(calls), timeout).then((done) => {
        if (!done && debug.enabled) {
          const names = running
            .values()
            .map((active) => `"${active.name}"`)
            .join(', ')
          debug('Executor closed; still running after %dms, keeping their locks until they end or expire: %s', timeout, names)
        }
      })
      return closing
    },
  }
}

function noop(): void {}

interface RegistryEntry<T> {
  readonly value: T
  prev: RegistryEntry<T> | undefined
  next: RegistryEntry<T> | undefined
  removed: boolean
}

/**
 * The executor's bookkeeping of calls and running tasks: a doubly linked list, because every
 * execution adds and removes entries and close() alone reads them. A Set did the same at several
 * times the cost (hashing a fresh object, shrinking its table), once per execution.
 */
class Registry<T> {
  #head: RegistryEntry<T> | undefined
  #size = 0

  get size(): number {
    return this.#size
  }

  add(value: T): RegistryEntry<T> {
    const entry: RegistryEntry<T> = { value, prev: undefined, next: this.#head, removed: false }
    if (this.#head) this.#head.prev = entry
    this.#head = entry
    this.#size++
    return entry
  }

  /** Removes `entry`; removing it again does nothing. */
  delete(entry: RegistryEntry<T>): void {
    if (entry.removed) return
    entry.removed = true
    if (entry.prev) entry.prev.next = entry.next
    else this.#head = entry.next
    if (entry.next) entry.next.prev = entry.prev
    this.#size--
  }

  /** The values, oldest first. */
  values(): T[] {
    const out: T[] = []
    for (let entry = this.#head; entry; entry = entry.next) out.push(entry.value)
    return out.reverse()
  }
}

/** The {@link TaskContext} of one run: its signal is the lock's, made only when the task reads it. */
class RunContext implements TaskContext {
  readonly #active: ActiveLock
  readonly configuration: LockConfiguration
  readonly slot: Date | undefined

  constructor(active: ActiveLock, configuration: LockConfiguration, slot: Date | undefined) {
    this.#active = active
    this.configuration = configuration
    this.slot = slot
  }

  get signal(): AbortSignal {
    return this.#active.signal
  }
}

/** A slot this node claimed; `decided` once it ran or was recorded as skipped. */
interface SlotClaim {
  readonly slot: Date
  readonly execution: LockExecution
  /** Who claimed it, as the ledger names nodes: the claim's `lockedBy` where the store keeps one. */
  readonly owner: string
  decided: boolean
}

function closedReason(): ExecutorClosedError {
  return new ExecutorClosedError('The executor was closed (a shutdown): stop the task, so that its lock is released before the process exits')
}

/** `signal` when it is an AbortSignal (or absent); anything else is a configuration error. */
function callerSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined
  if (!(signal instanceof AbortSignal)) throw new LockConfigurationError(`executeWithLock(): signal must be an AbortSignal, got ${typeof signal}`)
  return signal
}

/** Resolves to true once `promise` settles, or to false after `ms`; never rejects. */
function waitAtMost(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    timer.unref()
    promise.then(
      () => {
        clearTimeout(timer)
        resolve(true)
      },
      () => {
        clearTimeout(timer)
        resolve(true)
      },
    )
  })
}

let lastExecutionId = 0

function newExecution(provider: string | undefined, reentrant: boolean): LockExecution {
  lastExecutionId += 1
  return Object.freeze({ id: lastExecutionId, provider, reentrant })
}

// How long a release may take at least, even when it starts after lockAtMostUntil.
const RELEASE_GRACE_MS = 5_000
// How long the executor waits for one run-ledger write before it reports it as failed.
const LEDGER_TIMEOUT_MS = 5_000
// How often, at most, a task's expired slot records are removed.
const SWEEP_INTERVAL_MS = 10 * 60_000

/** The `lockedBy` of a handle that says it (the providers that store an owner do), for the run ledger. */
function handleOwner(handle: SimpleLock): string | undefined {
  const { lockedBy } = handle as { lockedBy?: unknown }
  return typeof lockedBy === 'string' ? lockedBy : undefined
}

// LockProvider has no name yet; a provider that carries a string `name` is reported by it.
function providerNameOf(provider: LockProvider): string | undefined {
  const { name } = provider as { name?: unknown }
  return typeof name === 'string' && name !== '' ? name : undefined
}

type EventHooks = Required<Omit<LockingTaskExecutorListener, 'aroundTask'>>
type EventHook = keyof EventHooks
/** The argument between the configuration and the execution, for the hooks that have one. */
type DetailOf<K extends EventHook> = Parameters<EventHooks[K]> extends [LockConfiguration, infer D, LockExecution] ? [detail: D] : []

const CHANNEL_OF: { readonly [K in EventHook]: LockEventName } = {
  onLockAttempt: 'lockAttempt',
  onLockAcquired: 'lockAcquired',
  onLockNotAcquired: 'lockNotAcquired',
  onLockFailed: 'lockFailed',
  onTaskStarted: 'taskStarted',
  onTaskFinished: 'taskFinished',
  onUnlocked: 'unlocked',
  onUnlockFailed: 'unlockFailed',
  onLockExtended: 'lockExtended',
  onLockLost: 'lockLost',
  onSlotClaimed: 'slotClaimed',
  onSlotDone: 'slotDone',
  onSlotSkipped: 'slotSkipped',
  onSlotMissed: 'slotMissed',
  onSlotCaughtUp: 'slotCaughtUp',
  onRunLedgerFailed: 'runLedgerFailed',
}

/** Reports one event to the listener's hook (if any) and to its diagnostics channel (if observed). */
function eventEmitter(listener: LockingTaskExecutorListener | undefined) {
  return <K extends EventHook>(hook: K, execution: LockExecution, configuration: LockConfiguration, ...detail: DetailOf<K>): void => {
    const hasDetail = detail.length > 0
    callHook(listener, hook, hasDetail ? [configuration, detail[0], execution] : [configuration, execution])
    if (!hasDetail) publishLockEvent(CHANNEL_OF[hook], execution, configuration)
    else if (hook === 'onTaskFinished') publishLockEvent(CHANNEL_OF[hook], execution, configuration, detail[0] as TaskOutcome)
    else if (detail[0] instanceof Date) publishLockEvent(CHANNEL_OF[hook], execution, configuration, { slot: detail[0] })
    else publishLockEvent(CHANNEL_OF[hook], execution, configuration, { error: detail[0] })
  }
}

/** Calls `listener[hook](...args)` if present; a throw or a rejected promise is logged, never raised. */
function callHook(listener: LockingTaskExecutorListener | undefined, hook: keyof LockingTaskExecutorListener, args: unknown[]): void {
  const fn = listener?.[hook] as ((...a: unknown[]) => unknown) | undefined
  if (typeof fn !== 'function') return
  try {
    const returned = fn.apply(listener, args)
    if (returned instanceof Promise) returned.catch((error: unknown) => debug('Listener %s failed: %s', hook, messageOf(error)))
  } catch (error) {
    debug('Listener %s failed: %s', hook, messageOf(error))
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
