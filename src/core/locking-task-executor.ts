import { performance } from 'node:perf_hooks'
import { debuglog } from 'node:util'
import { type Clock, systemClock } from './clock.ts'
import { type LockEventName, type LockExecution, publishLockEvent } from './diagnostics.ts'
import { LockConfigurationError, type LockLostError, LockProviderError } from './errors.ts'
import { isLockConfiguration, type LockConfiguration, type LockConfigurationOptions, lockConfiguration } from './lock-configuration.ts'
import { ActiveLock, findActiveLock, runWithActiveLock } from './lock-context.ts'
import type { LockProvider, SimpleLock } from './lock-provider.ts'

const debug = debuglog('shedlock')

/** What a locked task receives. */
export interface TaskContext {
  /**
   * Aborts, with a `LockLostError` reason, when the lock can no longer be trusted:
   * `lockAtMostUntil` passed without an extension, or a keep-alive extension failed.
   * Long tasks should stop when it aborts.
   */
  readonly signal: AbortSignal
  /** The lock the task runs under. */
  readonly configuration: LockConfiguration
}

/** A task to run under a lock. */
export type LockedTask<T> = (context: TaskContext) => T | Promise<T>

/** The outcome of `executeWithLock()`: the task's result, or `{ executed: false }` when another node held the lock. */
export type TaskResult<T> = { executed: true; result: T } | { executed: false }

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
   * same async context runs the task directly (re-entrant).
   *
   * @throws LockConfigurationError for invalid options, before the store is touched.
   * @throws LockProviderError when the store fails; the task did not run.
   */
  executeWithLock<T>(task: LockedTask<T>, configuration: LockConfiguration | LockConfigurationOptions): Promise<TaskResult<T>>
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
    throw new LockConfigurationError('createLockingTaskExecutor() needs a LockProvider: an object with a lock(configuration) method, such as postgresLockProvider({ client })')
  }
  const clock = options.clock ?? systemClock
  const { listener } = options
  const providerName = providerNameOf(provider)
  const emit = eventEmitter(listener)

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
      await beforeExpiry(handle.unlock(), active.configuration, clock)
      if (debug.enabled) {
        const keptUntil = configuration.lockAtLeastUntil.getTime() > clock.now() ? `; held until ${configuration.lockAtLeastUntil.toISOString()} (lockAtLeastFor)` : ''
        debug('Lock "%s" released after the task%s', configuration.name, keptUntil)
      }
      emit('onUnlocked', execution, configuration)
    } catch (error) {
      if (debug.enabled) debug('Lock "%s" could not be released, it expires at %s: %s', configuration.name, configuration.lockAtMostUntil.toISOString(), messageOf(error))
      emit('onUnlockFailed', execution, configuration, error)
      if (!listener?.onUnlockFailed) {
        process.emitWarning(`shedlock: could not release lock "${configuration.name}" (${messageOf(error)}); it expires at ${configuration.lockAtMostUntil.toISOString()}`, 'ShedLockWarning')
      }
    }
  }

  return {
    async executeWithLock<T>(task: LockedTask<T>, input: LockConfiguration | LockConfigurationOptions): Promise<TaskResult<T>> {
      if (typeof task !== 'function') {
        throw new LockConfigurationError(`executeWithLock() needs a task function as its first argument, got ${typeof task}`)
      }
      const configuration = isLockConfiguration(input) ? input : lockConfiguration({ ...input, createdAt: input?.createdAt ?? new Date(clock.now()) })
      const { name } = configuration

      const outer = findActiveLock(name)
      if (outer) {
        debug('Lock "%s" is already held in this async context; the nested task runs under it', name)
        return runTask(task, { signal: outer.signal, configuration: outer.configuration }, newExecution(providerName, true))
      }

      const execution = newExecution(providerName, false)
      emit('onLockAttempt', execution, configuration)
      let handle: SimpleLock | undefined
      try {
        handle = await provider.lock(configuration)
      } catch (error) {
        const failure =
          error instanceof LockProviderError ? error : new LockProviderError(`Could not acquire lock "${name}": ${messageOf(error)}`, { cause: error, lockName: name })
        debug('Lock "%s" could not be acquired, the task does not run: %s', name, failure.message)
        emit('onLockFailed', execution, configuration, failure)
        throw failure
      }
      if (!handle) {
        debug('Lock "%s" not acquired: another node holds it; the task is skipped', name)
        emit('onLockNotAcquired', execution, configuration)
        return { executed: false }
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
      try {
        return await runWithActiveLock(active, () => runTask(task, { signal: active.signal, configuration }, execution))
      } finally {
        active.finish()
        await release(active, execution)
      }
    },
  }
}

let lastExecutionId = 0

function newExecution(provider: string | undefined, reentrant: boolean): LockExecution {
  lastExecutionId += 1
  return Object.freeze({ id: lastExecutionId, provider, reentrant })
}

// The largest delay setTimeout accepts; later deadlines are re-armed in steps.
const MAX_TIMER_MS = 2 ** 31 - 1
// How long a release may take at least, even when it starts after lockAtMostUntil.
const RELEASE_GRACE_MS = 5_000

/**
 * Waits for a release until `lockAtMostUntil` (and at least 5 s), then rejects: a store that
 * never answers (a partitioned network, a client without a timeout) must not keep
 * `executeWithLock()` pending forever, and past that deadline the lock has expired anyway.
 */
async function beforeExpiry(release: Promise<void>, configuration: LockConfiguration, clock: Clock): Promise<void> {
  const deadline = Math.max(configuration.lockAtMostUntil.getTime(), clock.now() + RELEASE_GRACE_MS)
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    const arm = (): void => {
      timer = setTimeout(() => {
        if (clock.now() < deadline) return arm()
        reject(new LockProviderError(`Could not release lock "${configuration.name}": the store did not answer by ${new Date(deadline).toISOString()}; the lock expires at ${configuration.lockAtMostUntil.toISOString()}`, { lockName: configuration.name }))
      }, Math.min(Math.max(deadline - clock.now(), 0), MAX_TIMER_MS))
      timer.unref()
    }
    arm()
  })
  try {
    await Promise.race([release, expired])
  } finally {
    clearTimeout(timer)
  }
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
}

/** Reports one event to the listener's hook (if any) and to its diagnostics channel (if observed). */
function eventEmitter(listener: LockingTaskExecutorListener | undefined) {
  return <K extends EventHook>(hook: K, execution: LockExecution, configuration: LockConfiguration, ...detail: DetailOf<K>): void => {
    const hasDetail = detail.length > 0
    callHook(listener, hook, hasDetail ? [configuration, detail[0], execution] : [configuration, execution])
    if (!hasDetail) publishLockEvent(CHANNEL_OF[hook], execution, configuration)
    else if (hook === 'onTaskFinished') publishLockEvent(CHANNEL_OF[hook], execution, configuration, detail[0] as TaskOutcome)
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
