import type { Clock } from '../../src/core/clock.ts'
import type { LockConfiguration } from '../../src/core/lock-configuration.ts'
import type { LockingTaskExecutorListener } from '../../src/core/locking-task-executor.ts'

/** A clock that only moves when told to. */
export interface ManualClock extends Clock {
  set(ms: number): void
  advance(ms: number): void
}

export function manualClock(start = Date.UTC(2024, 0, 1)): ManualClock {
  let now = start
  return {
    now: () => now,
    set: (ms) => {
      now = ms
    },
    advance: (ms) => {
      now += ms
    },
  }
}

/** A clock that reads `Date.now()` on every call, so that `vi.useFakeTimers()` moves it. */
export const dateClock: Clock = { now: () => Date.now() }

export interface Deferred<T> {
  promise: Promise<T>
  resolve(value: T): void
  reject(reason: unknown): void
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (reason: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

const HOOKS = [
  'onLockAttempt',
  'onLockAcquired',
  'onLockNotAcquired',
  'onLockFailed',
  'onTaskStarted',
  'onTaskFinished',
  'onUnlocked',
  'onUnlockFailed',
  'onLockExtended',
  'onLockLost',
  'onSlotClaimed',
  'onSlotDone',
  'onSlotSkipped',
  'onSlotOwed',
  'onSlotMissed',
  'onSlotCaughtUp',
  'onRunLedgerFailed',
] as const

export type Hook = (typeof HOOKS)[number]

export interface RecordedEvent {
  hook: Hook
  name: string
  configuration: LockConfiguration
  extra: unknown
}

/**
 * A listener that records every hook as `"<hook> <lock name>"` into `log` (shared, so several
 * executors or a test's own marks can interleave) and keeps the arguments in `events`.
 */
export function recordingListener(
  log: string[] = [],
  only?: readonly Hook[],
): LockingTaskExecutorListener & { log: string[]; events: RecordedEvent[] } {
  const events: RecordedEvent[] = []
  const listener: LockingTaskExecutorListener & { log: string[]; events: RecordedEvent[] } = { log, events }
  for (const hook of only ?? HOOKS) {
    ;(listener as unknown as Record<string, unknown>)[hook] = (configuration: LockConfiguration, extra?: unknown) => {
      log.push(`${hook} ${configuration.name}`)
      events.push({ hook, name: configuration.name, configuration, extra })
    }
  }
  return listener
}

/**
 * A hand-made lock handle for tests that bypass `defineLock()`: `handle` with the
 * `Symbol.asyncDispose` every `SimpleLock` has (it unlocks).
 */
export function fakeHandle<T extends { unlock(): Promise<void> }>(handle: T): T & AsyncDisposable {
  return Object.assign(handle, { [Symbol.asyncDispose]: () => handle.unlock() })
}
