import { AsyncLocalStorage } from 'node:async_hooks'
import type { ActiveLock } from './active-lock.ts'
import type { Duration } from './duration.ts'
import { NoActiveLockError, NotLockedError } from './errors.ts'

// A frame of the async context: an active lock, the task context the integrations hand to their
// functions (taskContext()), or both. One storage for the two: on Node 20 each AsyncLocalStorage
// in use costs every promise of the process a propagation step (a second storage's steps were 3 %
// of a profile of slot runs).
interface Frame {
  /** `undefined` in a frame that only sets the task context. */
  readonly lock: ActiveLock | undefined
  // A TaskContext (task.ts, which imports this module's types): opaque here.
  readonly context: object | undefined
  readonly parent: Frame | undefined
}

// One per process: a second copy of this module would split the context, which is why the
// package is ESM-only and providers never bundle the core.
const storage = new AsyncLocalStorage<Frame>()

/**
 * Runs `fn` with `lock` as the innermost active lock of its async context, and `context` (else
 * the enclosing one) as its task context.
 */
export function runWithActiveLock<T>(lock: ActiveLock, fn: () => T, context?: object): T {
  const parent = storage.getStore()
  return storage.run({ lock, context: context ?? parent?.context, parent }, fn)
}

/** Runs `fn` with `context` as the task context of its async context; the active locks stay as they are. */
export function runWithTaskContext<T>(context: object, fn: () => T): T {
  const frame = storage.getStore()
  // The executor's runs put their context in the lock's frame already.
  if (frame !== undefined && frame.context === context) return fn()
  return storage.run({ lock: undefined, context, parent: frame }, fn)
}

/** The task context of this async context, if any. */
export function currentTaskContext(): object | undefined {
  return storage.getStore()?.context
}

/**
 * The innermost active lock named `name` in this async context that a same-name call may join
 * (re-entrancy check): one whose task has ended and whose joined runs have settled is released or
 * about to be, and one that was lost no longer excludes other nodes.
 */
export function findActiveLock(name: string): ActiveLock | undefined {
  for (let frame = storage.getStore(); frame; frame = frame.parent) {
    const { lock } = frame
    if (lock !== undefined && lock.name === name && lock.joinable) return lock
  }
  return undefined
}

// The innermost frame whose task still runs: the async context outlives the task in work the
// task started (timers, promises), and that work must not count as locked.
function innermostLock(): ActiveLock | undefined {
  for (let frame = storage.getStore(); frame; frame = frame.parent) {
    const { lock } = frame
    if (lock !== undefined && !lock.finished) return lock
  }
  return undefined
}

/**
 * Throws unless the caller runs inside a locked task (any lock), across `await`s. Put it at the
 * top of a task to catch a scheduler that calls it without the lock.
 *
 * @throws NotLockedError outside a locked task.
 */
export function assertLocked(): void {
  if (!innermostLock()) {
    throw new NotLockedError(
      'The task is not locked. Call assertLocked() only inside executeWithLock(), withLock() or a @SchedulerLock method; in unit tests wrap the call in runLocked() from shedlock/testing',
    )
  }
}

/**
 * Extends the innermost lock of the running task: holds it `lockAtMostFor` more from now, and at
 * least `lockAtLeastFor` from now after unlock. Durations are milliseconds or strings.
 *
 * @throws NoActiveLockError outside a locked task.
 * @throws LockCannotBeExtendedError when the lock expired (the task's signal aborts too), or its
 *   provider cannot extend locks.
 * @throws LockProviderError when the store fails; the lock is then unchanged.
 */
export async function extendActiveLock(lockAtMostFor: Duration, lockAtLeastFor: Duration = 0): Promise<void> {
  const lock = innermostLock()
  if (!lock) {
    throw new NoActiveLockError(
      'No active lock in this async context; call extendActiveLock() inside the locked task (executeWithLock(), withLock() or a @SchedulerLock method)',
    )
  }
  await lock.extend(lockAtMostFor, lockAtLeastFor)
}

/**
 * The fencing token of the innermost lock of the running task (docs/fencing.md), across
 * `await`s: what `TaskContext.fencingToken` holds, for code that does not get the task's context
 * (a repository called deep in the task). Pass it with each write to a resource that checks it.
 * `undefined` where the store hands out no tokens, and in `runLocked()` of `shedlock/testing`
 * unless it is given one.
 *
 * @throws NoActiveLockError outside a locked task: a write meant to be fenced must not go out
 *   without its lock.
 */
export function activeFencingToken(): bigint | undefined {
  const lock = innermostLock()
  if (!lock) {
    throw new NoActiveLockError(
      'No active lock in this async context; call activeFencingToken() inside the locked task (executeWithLock(), withLock() or a @SchedulerLock method)',
    )
  }
  return lock.fencingToken
}
