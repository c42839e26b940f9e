import { channel } from 'node:diagnostics_channel'
import type { LockConfiguration } from './lock-configuration.ts'
import type { TaskPause } from './pause.ts'

/**
 * Names of the `node:diagnostics_channel` channels the executor publishes to, one per decision.
 * Each message is a {@link LockEventMessage}. Nothing is built or sent while a channel has no
 * subscriber.
 *
 * ```ts
 * import { subscribe } from 'node:diagnostics_channel'
 * import { type LockEventMessage, diagnosticsChannels } from 'shedlock'
 *
 * subscribe(diagnosticsChannels.lockLost, (message) => {
 *   const { name, error } = message as LockEventMessage
 *   console.error(`lock ${name} lost: ${String(error)}`)
 * })
 * ```
 *
 * A subscriber that throws does not affect the task: Node runs the other subscribers and reports
 * the error as an uncaught exception on the next tick.
 */
export const diagnosticsChannels = {
  /** Before the provider is asked (not for re-entrant calls). */
  lockAttempt: 'shedlock:lock:attempt',
  /** The lock was taken; the task starts next. */
  lockAcquired: 'shedlock:lock:acquired',
  /** Another node holds the lock; the task is skipped. */
  lockNotAcquired: 'shedlock:lock:notAcquired',
  /** The store failed while acquiring; the task did not run. `error` is the `LockProviderError`. */
  lockFailed: 'shedlock:lock:failed',
  /** The task starts (re-entrant calls too, with `execution.reentrant`). */
  taskStarted: 'shedlock:task:started',
  /** The task settled: `durationMs`, `failed`, and `error` when it threw. */
  taskFinished: 'shedlock:task:finished',
  /** The lock was released after the task (or kept until `lockAtLeastUntil`). */
  unlocked: 'shedlock:lock:unlocked',
  /** Releasing failed: `error` is the store's error; the lock expires at `lockAtMostUntil`. */
  unlockFailed: 'shedlock:lock:unlockFailed',
  /** The lock was extended; `configuration` holds the new deadlines. */
  lockExtended: 'shedlock:lock:extended',
  /** The lock can no longer be trusted while its task runs; `error` is the `LockLostError`. */
  lockLost: 'shedlock:lock:lost',
  /** A slot run: this node claimed `slot` and runs it (or records it as skipped). */
  slotClaimed: 'shedlock:slot:claimed',
  /** A slot run: `slot` ran, or was skipped, on some node already. */
  slotDone: 'shedlock:slot:done',
  /** A slot run: this node claimed `slot`, but the lock was held; the slot is recorded as skipped. */
  slotSkipped: 'shedlock:slot:skipped',
  /** A slot run: this node claimed `slot`, but the lock was held; the slot is owed and runs once the lock frees. */
  slotOwed: 'shedlock:slot:owed',
  /** A catch-up found `slot` missed (every node was down when it was due). */
  slotMissed: 'shedlock:slot:missed',
  /** An owed `slot` ran late, under the lock of a catch-up or of the node that took the lock next. */
  slotCaughtUp: 'shedlock:slot:caughtUp',
  /** Writing the run ledger failed (`error`); the run went on. */
  runLedgerFailed: 'shedlock:ledger:failed',
  /** The task is paused (`pause`: who, why, until when); it did not run, and a slot due is not owed. */
  taskPaused: 'shedlock:task:paused',
} as const

/** A key of {@link diagnosticsChannels}. */
export type LockEventName = keyof typeof diagnosticsChannels

/**
 * One `executeWithLock()` call. Every listener hook and diagnostics message of the call carries
 * the same object, so observers can match the events of concurrent calls (use it as a `WeakMap`
 * key, or match `id`).
 */
export interface LockExecution {
  /** Unique within this process, increasing from 1. */
  readonly id: number
  /** The provider's `name` (e.g. `"postgres"`), or `undefined` when the provider has none. */
  readonly provider: string | undefined
  /**
   * True for a nested call with the same name in the same async context: it runs under the
   * outer call's lock, so it has task events but no lock events of its own.
   */
  readonly reentrant: boolean
  /**
   * The fencing token of the lock the call runs under (docs/fencing.md): set when the lock is
   * taken, so `undefined` in `onLockAttempt`, `onLockNotAcquired` and `onLockFailed`; a re-entrant
   * call has the outer lock's. `undefined` too where the store hands out none. Not an own
   * property: spreading or `JSON.stringify` of the execution leaves it out (a bigint has no JSON).
   */
  readonly fencingToken?: bigint | undefined
}

/** What every channel of {@link diagnosticsChannels} publishes. */
export interface LockEventMessage {
  /** The lock's name. */
  readonly name: string
  /**
   * The lock as it stands: durations in milliseconds and absolute deadlines. After an extension,
   * the extended configuration.
   */
  readonly configuration: LockConfiguration
  readonly execution: LockExecution
  /**
   * `lockFailed`: the `LockProviderError`; `unlockFailed`: the store's error; `lockLost`: the
   * `LockLostError`; `taskFinished`: what the task threw, when it failed. Absent otherwise.
   */
  readonly error?: unknown
  /** `taskFinished` only: the task's wall time in milliseconds. */
  readonly durationMs?: number
  /** `taskFinished` only: true when the task threw or rejected. */
  readonly failed?: boolean
  /** The slot events: the slot. */
  readonly slot?: Date
  /** `taskPaused` only: who paused the task, why, and until when. */
  readonly pause?: TaskPause
}

const channels = Object.fromEntries(
  Object.entries(diagnosticsChannels).map(([event, name]) => [event, channel(name)]),
) as Record<LockEventName, ReturnType<typeof channel>>

/** True when the event's diagnostics channel has a subscriber. */
export function hasSubscribers(event: LockEventName): boolean {
  return channels[event].hasSubscribers
}

/**
 * Publishes one event to its channel, when the channel has a subscriber. Internal: the executor
 * is the only publisher.
 */
export function publishLockEvent(
  event: LockEventName,
  execution: LockExecution,
  configuration: LockConfiguration,
  details?: { error?: unknown; durationMs?: number; failed?: boolean; slot?: Date; pause?: TaskPause },
): void {
  const target = channels[event]
  if (!target.hasSubscribers) return
  const message: LockEventMessage = { name: configuration.name, configuration, execution, ...details }
  target.publish(message)
}
