import { debuglog } from 'node:util'
import { hasSubscribers, type LockEventName, type LockExecution, publishLockEvent } from './diagnostics.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import type { LockLostError, LockProviderError } from './errors.ts'
import type { TaskPause } from './pause.ts'
import { messageOf } from './task.ts'

const debug = debuglog('shedlock')

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
  /** A slot run with `overlap: 'skip'`: this node claimed `slot` but the lock was held (a long run of an earlier slot, not a catch-up, which the slot waits for); the slot is recorded as skipped and never runs. */
  onSlotSkipped?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** A slot run: this node claimed `slot` but the lock was held; the slot is owed, and runs once the lock frees (`reason: 'owed'`). */
  onSlotOwed?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** A catch-up found `slot` missed: every node was down when it was due. */
  onSlotMissed?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** An owed `slot` (missed, or due while the lock was held) ran late, under a catch-up's lock or the next holder's (its task ended, failed or not). */
  onSlotCaughtUp?(configuration: LockConfiguration, slot: Date, execution: LockExecution): void
  /** Writing the run ledger failed; the run went on. */
  onRunLedgerFailed?(configuration: LockConfiguration, error: unknown, execution: LockExecution): void
  /**
   * The task is paused (`shedlock pause`): its lock is held by the pause, the task is skipped
   * (`reason: 'paused'`), and a slot due meanwhile is recorded as skipped, not owed.
   */
  onTaskPaused?(configuration: LockConfiguration, pause: TaskPause, execution: LockExecution): void
  /**
   * Wraps the start of the task, after `onTaskStarted`: call `start()` inside a context of your
   * own, e.g. an OpenTelemetry context with the lock's span active, and the task (with every
   * `await` in it) runs in that context. Call `start()` once and synchronously; it returns when
   * the task first awaits and never throws. If the hook does not call it, or throws before it
   * does, the executor starts the task itself, and later calls do nothing.
   */
  aroundTask?(configuration: LockConfiguration, start: () => void, execution: LockExecution): void
}

type EventHooks = Required<Omit<LockingTaskExecutorListener, 'aroundTask'>>
type EventHook = keyof EventHooks
/** The argument between the configuration and the execution, for the hooks that have one. */
type DetailOf<K extends EventHook> =
  Parameters<EventHooks[K]> extends [LockConfiguration, infer D, LockExecution] ? [detail: D] : []

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
  onSlotOwed: 'slotOwed',
  onSlotMissed: 'slotMissed',
  onSlotCaughtUp: 'slotCaughtUp',
  onRunLedgerFailed: 'runLedgerFailed',
  onTaskPaused: 'taskPaused',
}

/** Reports one event to the listener's hook (if any) and to its diagnostics channel (if observed). */
export function eventEmitter(listener: LockingTaskExecutorListener | undefined) {
  return <K extends EventHook>(
    hook: K,
    execution: LockExecution,
    configuration: LockConfiguration,
    ...detail: DetailOf<K>
  ): void => {
    // Most executors have no listener and no subscriber: nothing to build then.
    if (typeof listener?.[hook] !== 'function' && !hasSubscribers(CHANNEL_OF[hook])) return
    const hasDetail = detail.length > 0
    callHook(listener, hook, hasDetail ? [configuration, detail[0], execution] : [configuration, execution])
    if (!hasDetail) publishLockEvent(CHANNEL_OF[hook], execution, configuration)
    else if (hook === 'onTaskFinished')
      publishLockEvent(CHANNEL_OF[hook], execution, configuration, detail[0] as TaskOutcome)
    else if (detail[0] instanceof Date)
      publishLockEvent(CHANNEL_OF[hook], execution, configuration, { slot: detail[0] })
    else if (hook === 'onTaskPaused')
      publishLockEvent(CHANNEL_OF[hook], execution, configuration, { pause: detail[0] as TaskPause })
    else publishLockEvent(CHANNEL_OF[hook], execution, configuration, { error: detail[0] })
  }
}

/** Calls `listener[hook](...args)` if present; a throw or a rejected promise is logged, never raised. */
export function callHook(
  listener: LockingTaskExecutorListener | undefined,
  hook: keyof LockingTaskExecutorListener,
  args: unknown[],
): void {
  const fn = listener?.[hook] as ((...a: unknown[]) => unknown) | undefined
  if (typeof fn !== 'function') return
  try {
    const returned = fn.apply(listener, args)
    if (returned instanceof Promise)
      returned.catch((error: unknown) => debug('Listener %s failed: %s', hook, messageOf(error)))
  } catch (error) {
    debug('Listener %s failed: %s', hook, messageOf(error))
  }
}

/** What {@link eventEmitter} returns: reports one event to the listener and its diagnostics channel. */
export type Emit = ReturnType<typeof eventEmitter>
