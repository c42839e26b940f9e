import { debuglog } from 'node:util'
import type { CatchUpOptions, CatchUpResult } from './catch-up.ts'
import { catchUp } from './catch-up-request.ts'
import type { Clock } from './clock.ts'
import { type Duration, parseDuration } from './duration.ts'
import { LockConfigurationError } from './errors.ts'
import type { LockingTaskExecutorListener } from './executor-events.ts'
import { configurationAt, isLockConfiguration, type LockConfiguration } from './lock-configuration.ts'
import { findActiveLock, runWithTaskContext } from './lock-context.ts'
import type { LockProvider } from './lock-provider.ts'
import type { ShedlockLogger } from './logger.ts'
import { DEFAULT_OVERLAP, isOverlapPolicy, type OverlapPolicy } from './overlap.ts'
import { OwedWaiters } from './owed-waiters.ts'
import type { RunLedger } from './run-ledger.ts'
import { type RunFor, RunSteps } from './run-steps.ts'
import { SlotRuns } from './slot-runs.ts'
import { slotRecordName } from './slots.ts'
import { type TriggerOptions, TriggerPoller } from './trigger-poller.ts'
import {
  callerSignal,
  type ExecutionOptions,
  type LockedTask,
  type LockRequest,
  newExecution,
  RunContext,
  type TaskResult,
} from './task.ts'

export { type CatchUpOptions, type CatchUpPolicy, type CatchUpResult, CatchUpError } from './catch-up.ts'
export type { OverlapPolicy } from './overlap.ts'
export type { TriggerOptions } from './trigger-poller.ts'
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
  /**
   * How long a run may take before the run ledger gets its `running` row, in milliseconds or a
   * duration string. A run that ends sooner is written once, when it ends, with its outcome (one
   * write instead of two); a longer one is written as `running` at that moment (what
   * `shedlock status` and the dashboard show of it) and updated when it ends. A node that dies
   * within this time leaves no row of the run (its lock and slot records remain). 0 writes every
   * run's start before its task starts (the task waits for that write, 5 s at most), so a node
   * that dies at any point of a run leaves its row. @default "1s"
   */
  recordRunningAfter?: Duration
  /** How long slot records are kept, unless a call says otherwise. @default "24h" */
  slotRetention?: Duration
  /**
   * How long the store holds a running task's lock at a time, in milliseconds or a duration
   * string: the executor renews it every third of that while the task runs, up to
   * `lockAtMostFor`, so a node that dies frees its task's lock within a lease instead of after
   * `lockAtMostFor` (and the fire times due meanwhile are owed, not lost). A lock whose
   * `lockAtMostFor` is not longer than the lease (or whose `lockAtLeastFor` is) is held as before;
   * so are locks of stores that cannot extend (memcached) and of `keepAliveLockProvider()`.
   * Costs a long task one store write per third of a lease (6 a minute by default); a task
   * shorter than that, none. `false`: every lock is held for its whole `lockAtMostFor`.
   * @default "30s"
   */
  lease?: Duration | false
  /**
   * What a slot run does when the task's lock is held (see `ExecutionOptions.overlap`), unless a
   * call says otherwise: `'all'` (every fire time runs, late), `'once'` or `'skip'`.
   * @default "all"
   */
  overlap?: OverlapPolicy
  /** How this process names itself in the run ledger where the store keeps no holder. @default `<host>:<pid>` */
  node?: string
  /** Logs runs, skips, lock losses and store errors (`console`, or a pino logger), beside `listener`. @default no logging */
  logger?: ShedlockLogger
  /**
   * Opt in to `shedlock trigger NAME` ("run now"): every `poll` (e.g. `'10s'`), the executor
   * reads the trigger record of each task it ran through `executeWithLock` (one store read per
   * task), and runs a triggered task once, through the task's own lock: never beside a run that
   * holds it, and on one replica only. The run is recorded with `triggeredBy` in the run ledger.
   * See docs/usage.md. @default no poll: `shedlock trigger` says that no replica listens
   */
  triggers?: TriggerOptions
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
  executeWithLock<T>(
    task: LockedTask<T>,
    request: LockConfiguration | LockRequest,
    options?: ExecutionOptions,
  ): Promise<TaskResult<T>>
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
export function createLockingTaskExecutor(
  provider: LockProvider,
  options: LockingTaskExecutorOptions = {},
): LockingTaskExecutor {
  if (provider === null || typeof provider !== 'object' || typeof provider.lock !== 'function') {
    throw new LockConfigurationError(
      'createLockingTaskExecutor() needs a LockProvider: an object with a lock(configuration) method, such as postgresLockProvider({ client })',
    )
  }
  const steps = new RunSteps(provider, options)
  const waiters = new OwedWaiters(steps)
  const slots = new SlotRuns(steps, waiters)
  const { clock } = steps
  const defaultOverlap = checkedOverlap(options.overlap ?? DEFAULT_OVERLAP, 'createLockingTaskExecutor()')
  const triggers =
    options.triggers === undefined
      ? undefined
      : new TriggerPoller(
          pollInterval(options.triggers, steps),
          () => steps.inspector(),
          (task, lock, claim) =>
            steps.closed()
              ? Promise.resolve({ executed: false, reason: 'closed' })
              : steps.track(steps.lockAndRun(task, configurationAt(lock, clock.now()), { trigger: claim })),
        )

  async function execute<T>(
    task: LockedTask<T>,
    input: LockConfiguration | LockRequest,
    options: ExecutionOptions | undefined,
  ): Promise<TaskResult<T>> {
    if (typeof task !== 'function') {
      throw new LockConfigurationError(
        `executeWithLock() needs a task function as its first argument, got ${typeof task}`,
      )
    }
    // Anything but a configuration built by lockConfiguration() is validated as options: an
    // object that only looks like one must not reach the store.
    const built = isLockConfiguration(input)
    const configuration = built ? input : configurationAt(input, clock.now())
    const { name } = configuration
    // The options object is read as it is unless a third argument overrides some of it.
    const request: ExecutionOptions =
      options === undefined ? (built ? {} : input) : { ...(built ? {} : input), ...options }
    const signal = callerSignal(request.signal)
    const slot = request.slot
    // Validated here, before the store is asked: a bad slot or retention is the caller's mistake.
    const slotName = slot === undefined ? undefined : slotRecordName(name, slot)
    const retention =
      request.slotRetention === undefined ? steps.defaultRetention : parseDuration(request.slotRetention)
    const overlap = request.overlap === undefined ? defaultOverlap : checkedOverlap(request.overlap, `Lock "${name}"`)
    const { nextFireAt } = request
    if (nextFireAt !== undefined) {
      if (typeof nextFireAt !== 'function')
        throw new LockConfigurationError(
          `Lock "${name}": nextFireAt must be a function that returns the next fire time (e.g. () => job.nextRun()), got ${typeof nextFireAt}`,
        )
      steps.recorder.expectNext(name, nextFireAt)
    }

    const outer = findActiveLock(name)
    if (outer) {
      debug('Lock "%s" is already held in this async context; the nested task runs under it', name)
      // Joined, so that the outer call releases the lock only after this run, awaited or not.
      // Its own task context too, so that taskContext() in it is the context it gets.
      const context = new RunContext(outer, outer.configuration, undefined)
      return outer.join(() =>
        runWithTaskContext(context, () =>
          steps.runTask(task, context, newExecution(steps.providerName, true, outer.fencingToken)),
        ),
      )
    }
    if (steps.closed()) {
      debug('Lock "%s" not attempted: the executor is closed', name)
      return { executed: false, reason: 'closed' }
    }
    // Plain and slot runs alike: a trigger runs the task as a plain run, with the latest options.
    if (triggers) triggers.remember(task as LockedTask<unknown>, configuration)
    signal?.throwIfAborted()
    if (configuration.lockAtMostUntil.getTime() <= clock.now()) {
      throw new LockConfigurationError(
        `Lock "${name}": its configuration expired at ${configuration.lockAtMostUntil.toISOString()} (createdAt + lockAtMostFor), so the lock would exclude nobody; pass options ({ name, lockAtMostFor }) to executeWithLock(), which takes a fresh createdAt for every call, or build a fresh configuration for every attempt`,
      )
    }
    // Tracked from here, so that close() also waits for calls still taking their lock.
    const call =
      slot === undefined
        ? steps.lockAndRun(task, configuration, signal === undefined ? PLAIN : { signal })
        : slots.run(task, configuration, signal, { slot, recordName: slotName!, retention, overlap })
    const entry = steps.begin(call)
    try {
      return await call
    } finally {
      steps.end(entry)
    }
  }

  return {
    executeWithLock: execute,
    catchUp: (task, request, catchUpOptions) => catchUp(steps, waiters, task, request, catchUpOptions),
    get closed() {
      return steps.closed()
    },
    close: (closeOptions: CloseOptions = {}) => {
      triggers?.stop()
      return steps.close(parseDuration(closeOptions.timeout ?? '10s'))
    },
  }
}

// The poll's interval in ms; triggers are read through the provider's inspector, so it needs one.
function pollInterval(triggers: TriggerOptions, steps: RunSteps): number {
  const ms = triggers === null || typeof triggers !== 'object' ? Number.NaN : parseDuration(triggers.poll)
  if (!(ms > 0))
    throw new LockConfigurationError(
      `createLockingTaskExecutor(): triggers.poll must be how often to look for triggers, e.g. { triggers: { poll: '10s' } }, got ${JSON.stringify(triggers)}`,
    )
  if (typeof steps.claimer.inspector !== 'function')
    throw new LockConfigurationError(
      `createLockingTaskExecutor(): triggers need a provider with an inspector() to read them (every provider of shedlock but memcached's has one); ${steps.providerName ?? 'this provider'} has none: drop the triggers option`,
    )
  return ms
}

// A plain run without a caller's signal, the common call: one object for all of them.
const PLAIN: RunFor = Object.freeze({})

function checkedOverlap(overlap: unknown, where: string): OverlapPolicy {
  if (isOverlapPolicy(overlap)) return overlap
  throw new LockConfigurationError(`${where}: overlap must be 'all', 'once' or 'skip', got ${JSON.stringify(overlap)}`)
}
