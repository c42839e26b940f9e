import { debuglog } from 'node:util'
import type { Clock } from './clock.ts'
import { beforeDeadline } from './deadline.ts'
import type { LockExecution } from './diagnostics.ts'
import { LockProviderError } from './errors.ts'
import type { Emit, LockingTaskExecutorListener } from './executor-events.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import type { ActiveLock } from './active-lock.ts'
import { messageOf } from './task.ts'

const debug = debuglog('shedlock')

// How long a release may take at least, even when it starts after lockAtMostUntil.
const RELEASE_GRACE_MS = 5_000

/**
 * Releases a task lock after its task, bounded in time; a failure is reported to the listener
 * (or, without an `onUnlockFailed`, as a process warning), never thrown.
 */
export async function releaseTaskLock(
  active: ActiveLock,
  execution: LockExecution,
  clock: Clock,
  emit: Emit,
  listener: LockingTaskExecutorListener | undefined,
): Promise<void> {
  const { configuration } = active
  // A lease renewal in flight spends the handle: release the one it makes, unless the lock was
  // lost meanwhile (a renewal that never answered), which leaves nothing of ours to release.
  const pending = active.pendingExtension
  if (pending && active.lost) {
    debug('Lock "%s" not released: it was lost during the task', configuration.name)
    return
  }
  try {
    if (pending)
      await beforeDeadline(pending, clock.now() + RELEASE_GRACE_MS, clock, () => {
        return new LockProviderError(
          `Could not release lock "${configuration.name}": its lease renewal got no answer from the store; the lock lapses at the end of its lease`,
          { lockName: configuration.name },
        )
      })
  } catch (error) {
    releaseFailed(configuration, execution, error, emit, listener)
    return
  }
  const handle = active.handle
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
        configuration.lockAtLeastUntil.getTime() > clock.now()
          ? `; held until ${configuration.lockAtLeastUntil.toISOString()} (lockAtLeastFor)`
          : ''
      debug('Lock "%s" released after the task%s', configuration.name, keptUntil)
    }
    emit('onUnlocked', execution, configuration)
  } catch (error) {
    releaseFailed(configuration, execution, error, emit, listener)
  }
}

function releaseFailed(
  configuration: LockConfiguration,
  execution: LockExecution,
  error: unknown,
  emit: Emit,
  listener: LockingTaskExecutorListener | undefined,
): void {
  if (debug.enabled)
    debug(
      'Lock "%s" could not be released, it expires at %s: %s',
      configuration.name,
      configuration.lockAtMostUntil.toISOString(),
      messageOf(error),
    )
  emit('onUnlockFailed', execution, configuration, error)
  if (!listener?.onUnlockFailed) {
    process.emitWarning(
      `shedlock: could not release lock "${configuration.name}" (${messageOf(error)}); it expires at ${configuration.lockAtMostUntil.toISOString()}`,
      'ShedLockWarning',
    )
  }
}
