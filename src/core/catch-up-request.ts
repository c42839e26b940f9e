import type { CatchUpOptions, CatchUpResult, CatchUpRuntime } from './catch-up.ts'
import { CatchUpRun, nothing } from './catch-up-run.ts'
import { parseDuration } from './duration.ts'
import type { OwedWaiters } from './owed-waiters.ts'
import { LockConfigurationError } from './errors.ts'
import { lockConfiguration } from './lock-configuration.ts'
import { callerSignal, type LockedTask, type LockRequest } from './task.ts'

// The entry of a catch-up: its options checked, then one CatchUpRun (catch-up-run.ts).

/** Checks the options; resolves what a catch-up runs with. Throws `LockConfigurationError` on bad input. */
function validated<T>(runtime: CatchUpRuntime, task: LockedTask<T>, request: LockRequest, options: CatchUpOptions) {
  if (typeof task !== 'function')
    throw new LockConfigurationError(`catchUp() needs a task function as its first argument, got ${typeof task}`)
  // Its lockAtLeastFor is dropped: slot claims keep late fires of a slot from running it again, and
  // a lock kept after the catch-up would make the slots fired during it wait for nothing.
  const configuration = lockConfiguration({
    ...request,
    lockAtLeastFor: 0,
    createdAt: request?.createdAt ?? new Date(runtime.clock.now()),
  })
  const { name } = configuration
  const policy = options?.policy
  if (policy !== 'skip' && policy !== 'once' && policy !== 'all') {
    throw new LockConfigurationError(
      `Lock "${name}": catchUp policy must be 'skip', 'once' or 'all', got ${JSON.stringify(policy)}`,
    )
  }
  if (typeof options.fireTimes !== 'function')
    throw new LockConfigurationError(`Lock "${name}": catchUp needs fireTimes(from, to), the schedule's fire times`)
  const within = parseDuration(options.within)
  const retention =
    request.slotRetention === undefined ? runtime.defaultRetention : parseDuration(request.slotRetention)
  if (within > retention) {
    throw new LockConfigurationError(
      `Lock "${name}": catchUp within (${within}ms) is longer than the slot retention (${retention}ms), so missed slots could not be told from run ones; raise slotRetention or shorten within`,
    )
  }
  return { configuration, policy, within, retention, signal: callerSignal(request.signal) }
}

/**
 * Runs the slots of `request.name` that every node missed, by `options.policy` (see
 * `LockingTaskExecutor.catchUp()` and docs/slots.md). In order:
 *
 * 1. the task's slot and owed records, in one listing; from the latest held slot record, the
 *    missed fire times;
 * 2. each missed slot to run is claimed and owed (`'all'` each, `'once'` the latest): from then
 *    on the store remembers it, whatever happens to this node;
 * 3. the catch-up marker `<name>@catch-up`, then the task's lock; under it every owed slot of the
 *    task runs, oldest first (those owed before too), each on a lock made fresh; either held
 *    elsewhere, this node waits for the lock in the background;
 * 4. the lock and the marker are released; the skipped records of `'once'` are written last.
 */
export async function catchUp<T>(
  runtime: CatchUpRuntime,
  waiters: OwedWaiters,
  task: LockedTask<T>,
  request: LockRequest,
  options: CatchUpOptions,
): Promise<CatchUpResult> {
  const { configuration, policy, within, retention, signal } = validated(runtime, task, request, options)
  if (policy === 'skip' || runtime.closed()) return nothing('skipped')
  const inspector = runtime.inspector()
  if (!inspector) {
    throw new LockConfigurationError(
      `Lock "${configuration.name}": catching up needs a provider with an inspector (to read the task's slot records); ${runtime.providerName ?? 'this provider'} has none`,
    )
  }
  signal?.throwIfAborted()
  const run = new CatchUpRun(
    runtime,
    waiters,
    inspector,
    task,
    configuration,
    { policy, within, retention, fireTimes: options.fireTimes },
    signal,
  )
  return runtime.track(run.run())
}
