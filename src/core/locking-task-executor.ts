import { performance } from 'node:perf_hooks'
import { hostname } from 'node:os'
import { debuglog } from 'node:util'
import { type Clock, systemClock } from './clock.ts'
import { beforeDeadline } from './deadline.ts'
import { type CatchUpOptions, type CatchUpResult, type CatchUpRuntime, catchUp, type HeldTaskLock } from './catch-up.ts'
import type { LockExecution } from './diagnostics.ts'
import { type Duration, parseDuration } from './duration.ts'
import { LockConfigurationError, LockProviderError } from './errors.ts'
import { callHook, eventEmitter, type LockingTaskExecutorListener } from './executor-events.ts'
import { configurationAt, isLockConfiguration, type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import { ActiveLock, findActiveLock, runWithActiveLock } from './lock-context.ts'
import type { LockInspector } from './lock-inspector.ts'
import { type LockProvider, type SimpleLock, unwrappedProvider } from './lock-provider.ts'
import { type RunLedger, type RunOutcome, type RunStart, runErrorOf } from './run-ledger.ts'
import { catchUpMarkerName, DEFAULT_SLOT_RETENTION, slotRecordName } from './slots.ts'
import {
  callerSignal,
  closedReason,
  type ExecutionOptions,
  type LockedTask,
  type LockRequest,
  messageOf,
  newExecution,
  RunContext,
  type TaskContext,
  type TaskResult,
} from './task.ts'

export { type CatchUpOptions, type CatchUpPolicy, type CatchUpResult, CatchUpError } from './catch-up.ts'
export type { LockingTaskExecutorListener, TaskOutcome } from './executor-events.ts'
export type { ExecutionOptions, LockedTask, LockRequest, SkipReason, TaskContext, TaskResult } from './task.ts'

const debug = debuglog('shedlock')

/** Options of {@link LockingTaskExecutor.close}. */
export interface CloseOptions {
  /**
   * How long to wait for running tasks to end after their signal aborted, in milliseconds or a
   * duration string. A task still running then keeps its lock (it expires at its
   * `lockAtMostUntil`): releasing it would let another node start the task beside it. @default "10s"
   */
  timeout?: Duration
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
   * `options.within` after the task's latest held slot record; without one (a new task) there is
   * nothing to catch up. Needs a provider with an inspector (every provider of shedlock has one).
   * Two nodes starting together catch up once: the other finds the lock held. A slot a scheduler
   * fires meanwhile waits for the catch-up and then runs, once. Each run starts on a lock made
   * fresh; lost or closed mid-way, the catch-up starts nothing more (`notRun`, `stoppedBy`), and
   * `close()` waits for it. Task errors do not reject: they are in `failed`, and in the run ledger.
   * See docs/slots.md.
   *
   * @throws LockConfigurationError for bad options, or a provider without an inspector.
   * @throws CatchUpError (a `LockProviderError`) when the store fails; its `result` says what ran.
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
    return track(slot === undefined ? lockAndRun(task, configuration, signal) : slotRun(task, configuration, signal, slot, slotName!, retention))
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
      const locked = await lockForSlot(configuration, execution, signal)
      if (locked === 'closed') return closedBeforeStart(configuration)
      if (!locked) return await skipSlot(configuration, claimed)
      return await runLocked(task, locked.configuration, locked.handle, execution, signal, claimed)
    } finally {
      // Not decided (the store failed, or the executor closed, before the task could start): the
      // slot did not run, so another node or a catch-up may take it.
      if (!claimed.decided)
        await handle
          .unlock()
          .catch((error: unknown) => debug('Lock "%s": could not give back slot %s: %s', configuration.name, slot.toISOString(), messageOf(error)))
    }
  }

  /**
   * The task's lock for a claimed slot. Held by a catch-up (its marker is held), the slot waits
   * for the catch-up to end, polling, instead of being skipped: the catch-up passes over a slot
   * claimed here, so skipping it would leave it never run. Held by anything else (a long run of an
   * earlier slot): `undefined`, the slot is skipped. `'closed'` when the executor closed while it
   * waited.
   */
  async function lockForSlot(
    configuration: LockConfiguration,
    execution: LockExecution,
    signal: AbortSignal | undefined,
  ): Promise<{ configuration: LockConfiguration; handle: SimpleLock } | 'closed' | undefined> {
    let current = configuration
    // One more attempt after the marker is found free: the catch-up may have released both
    // between this node's attempt and its look at the marker.
    let lastChance = false
    for (;;) {
      const handle = await acquire(provider, current, current, execution)
      if (handle) return { configuration: current, handle }
      if (closing) return 'closed'
      signal?.throwIfAborted()
      if (await catchUpRunning(current.name)) {
        lastChance = false
        debug('Lock "%s": a catch-up holds it; the slot waits for it to end', current.name)
        await sleep(CATCH_UP_POLL_MS)
        if (closing) return 'closed'
        signal?.throwIfAborted()
      } else if (lastChance) {
        return undefined
      } else {
        lastChance = true
      }
      current = lockConfiguration({
        name: configuration.name,
        lockAtMostFor: configuration.lockAtMostFor,
        lockAtLeastFor: configuration.lockAtLeastFor,
        createdAt: new Date(clock.now()),
      })
    }
  }

  /** True when a catch-up of `name` runs: its marker record is held. A failed look counts as no. */
  async function catchUpRunning(name: string): Promise<boolean> {
    try {
      slotInspector ??= claimer.inspector?.()
      const marker = await slotInspector?.get(catchUpMarkerName(name))
      return marker?.held === true
    } catch (error) {
      debug('Lock "%s": could not look for a running catch-up: %s', name, messageOf(error))
      return false
    }
  }

  /** The slot could not run: the lock is held by a run of an earlier slot. Recorded as skipped, once. */
  async function skipSlot(configuration: LockConfiguration, claimed: SlotClaim): Promise<TaskResult<never>> {
    const { name } = configuration
    const { execution } = claimed
    debug('Lock "%s" not acquired: another node holds it; the task is skipped', name)
    emit('onLockNotAcquired', execution, configuration)
    claimed.decided = true
    emit('onSlotSkipped', execution, configuration, claimed.slot)
    const now = new Date(clock.now())
    await ledgerWrite(configuration, execution, () =>
      runLedger!.record({ name, slot: claimed.slot, node: claimed.owner, startedAt: now, finishedAt: now, outcome: 'skipped', durationMs: 0 }),
    )
    return { executed: false, reason: 'held' }
  }

  function closedBeforeStart(configuration: LockConfiguration): TaskResult<never> {
    debug('Lock "%s" not run: the executor was closed while it was taken', configuration.name)
    return { executed: false, reason: 'closed' }
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

  /** Takes the lock and runs `task` under it, recorded in the run ledger: a plain run. */
  async function lockAndRun<T>(task: LockedTask<T>, configuration: LockConfiguration, signal: AbortSignal | undefined): Promise<TaskResult<T>> {
    const execution = newExecution(providerName, false)
    emit('onLockAttempt', execution, configuration)
    const handle = await acquire(provider, configuration, configuration, execution)
    if (!handle) {
      debug('Lock "%s" not acquired: another node holds it; the task is skipped', configuration.name)
      emit('onLockNotAcquired', execution, configuration)
      return { executed: false, reason: 'held' }
    }
    return runLocked(task, configuration, handle, execution, signal, undefined)
  }

  /** Watches a task lock just taken: lock loss, close() (which aborts it), listener events. */
  function hold(configuration: LockConfiguration, handle: SimpleLock, execution: LockExecution): HeldTaskLock {
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
        configuration.name,
        providerName === undefined ? '' : ` from ${providerName}`,
        configuration.lockAtMostUntil.toISOString(),
        configuration.lockAtLeastUntil.toISOString(),
      )
    }
    emit('onLockAcquired', execution, configuration)
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
  async function runLocked<T>(
    task: LockedTask<T>,
    configuration: LockConfiguration,
    handle: SimpleLock,
    execution: LockExecution,
    signal: AbortSignal | undefined,
    claimed: SlotClaim | undefined,
  ): Promise<TaskResult<T>> {
    const held = hold(configuration, handle, execution)
    const { active } = held
    // Closed, or aborted by the caller, while the lock was being taken: the task does not start.
    if (closing || signal?.aborted) {
      await held.done()
      await release(active, execution)
      signal?.throwIfAborted()
      return closedBeforeStart(configuration)
    }
    const stopOnAbort = signal ? (): void => active.abort(signal.reason) : noop
    signal?.addEventListener('abort', stopOnAbort, { once: true })
    if (claimed) claimed.decided = true
    const record = recordRun(configuration, execution, claimed?.slot, handleOwner(handle) ?? node)
    let failure: unknown
    try {
      return await runWithActiveLock(active, () => runTask(task, new RunContext(active, configuration, claimed?.slot), execution))
    } catch (error) {
      failure = error
      throw error
    } finally {
      signal?.removeEventListener('abort', stopOnAbort)
      await held.done()
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

  const catchUpRuntime: CatchUpRuntime = {
    provider,
    claimer,
    providerName,
    clock,
    runLedger,
    defaultRetention,
    emit,
    closed: () => closing !== undefined,
    inspector: () => (slotInspector ??= claimer.inspector?.()),
    track,
    acquire,
    hold,
    release,
    runTask,
    recordRun,
    ledgerWrite,
    ownerOf: (handle) => handleOwner(handle) ?? node,
  }

  /** `call`, tracked from now until it settles: close() waits for it. */
  async function track<T>(call: Promise<T>): Promise<T> {
    const entry = inflight.add(call)
    try {
      return await call
    } finally {
      inflight.delete(entry)
    }
  }

  return {
    executeWithLock: execute,
    catchUp: (task, request, catchUpOptions) => catchUp(catchUpRuntime, task, request, catchUpOptions),
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

/** A slot this node claimed; `decided` once it ran or was recorded as skipped. */
interface SlotClaim {
  readonly slot: Date
  readonly execution: LockExecution
  /** Who claimed it, as the ledger names nodes: the claim's `lockedBy` where the store keeps one. */
  readonly owner: string
  decided: boolean
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

// How long a release may take at least, even when it starts after lockAtMostUntil.
const RELEASE_GRACE_MS = 5_000
// How long the executor waits for one run-ledger write before it reports it as failed.
const LEDGER_TIMEOUT_MS = 5_000
// How often a slot waiting for a catch-up to end tries the task's lock again: a few statements a
// second per waiting node, only while a catch-up runs.
const CATCH_UP_POLL_MS = 250
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

/** Resolves after `ms` milliseconds. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
