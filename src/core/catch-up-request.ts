import type { CatchUpOptions, CatchUpResult, CatchUpRuntime } from './catch-up.ts'
import { CatchUpRun, nothing } from './catch-up-run.ts'
import { parseDuration } from './duration.ts'
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
 * 1. the catch-up marker `<name>@catch-up`, then the task's lock: two catch-ups never run at once,
 *    and a node whose scheduler fires a slot meanwhile finds the marker and waits for the catch-up
 *    to end instead of recording its slot as skipped;
 * 2. the task's slot records that are held (a claim given back is not a run), and from the latest
 *    of them the missed fire times;
 * 3. each slot to run is claimed just before its run, with the lock made fresh first, so that
 *    neither many slots nor long runs eat the lock's lifetime: `'all'` claims each missed slot in
 *    turn, `'once'` only the latest (the older ones are recorded as skipped);
 * 4. the task's lock, then the marker, are released; the skipped records are written last.
 */
export async function catchUp<T>(
  runtime: CatchUpRuntime,
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
    inspector,
    task,
    configuration,
    { policy, within, retention, fireTimes: options.fireTimes },
    signal,
  )
  return runtime.track(run.run())
}
