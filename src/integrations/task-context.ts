import { ExecutorClosedError, NotLockedError } from '../core/errors.ts'
import { currentTaskContext as frameContext, runWithTaskContext } from '../core/lock-context.ts'
import type { LockingTaskExecutor, TaskContext } from '../core/locking-task-executor.ts'

// The integrations call functions with the scheduler's arguments, not with the executor's task
// context: it travels in the async context instead, the lock context's (core/lock-context.ts).

/** Runs `fn` with `context` as the task context of its async context. */
export const runInTaskContext: <T>(context: TaskContext, fn: () => T) => T = runWithTaskContext

/** The task context of this async context, if any (what {@link taskContext} returns, without its throw). */
export function currentTaskContext(): TaskContext | undefined {
  return frameContext() as TaskContext | undefined
}

/**
 * The context of the locked task this code runs in, inside a `withLock()` function, a
 * `@SchedulerLock` method, or a run of a node-cron catch-up: its `signal` (aborts on a shutdown,
 * when the lock is lost, or with the reason of `withLock`'s `signal`), its lock `configuration`,
 * its `slot` (the scheduled fire time of a slot run or a catch-up run; `undefined` otherwise) and
 * its lock's `fencingToken` (docs/fencing.md; `undefined` where the store hands out none).
 * Inside an `executeWithLock()` task it is the object the task gets as its argument;
 * `activeFencingToken()` gives the token in any locked task.
 *
 * ```ts
 * const sync = withLock(provider, { name: 'sync', lockAtMostFor: '10m', slot: true }, async () => {
 *   const { signal, slot, fencingToken } = taskContext()
 *   await syncOrders({ until: slot, signal, fencingToken })
 * })
 * ```
 *
 * @throws NotLockedError outside such a function.
 */
export function taskContext(): TaskContext {
  const context = currentTaskContext()
  if (!context) {
    throw new NotLockedError(
      'taskContext() is only known inside a locked run: a withLock() function, a @SchedulerLock method or an executeWithLock() task; call it there, or pass the context on',
    )
  }
  return context
}

/**
 * True when `error` is how a task stopped for a shutdown: the reason its signal aborted with,
 * `ExecutorClosedError` from a closed executor, or the reason of the integration's own shutdown
 * `signal`. Such a run counts as skipped, not failed: it resolves to `undefined`.
 */
export function isShutdownStop(
  error: unknown,
  executor: LockingTaskExecutor,
  signal: AbortSignal | undefined,
): boolean {
  if (signal?.aborted && error === signal.reason) return true
  return error instanceof ExecutorClosedError && executor.closed
}
