import { debuglog } from 'node:util'
import { type Clock, systemClock } from './clock.ts'
import { atDeadline, beforeDeadline, type CancelDeadline } from './deadline.ts'
import { type Duration, parseDuration } from './duration.ts'
import { LockConfigurationError, LockLostError, LockProviderError, LockStateError } from './errors.ts'
import { type LockConfiguration, lockConfiguration } from './lock-configuration.ts'
import {
  type ExtensibleLock,
  type ExtensibleLockProvider,
  type KeepAliveLock,
  type LockProvider,
  markWrapper,
} from './lock-provider.ts'

const debug = debuglog('shedlock')
// How long unlock() waits for an extension in flight at least, even after lockAtMostUntil.
const RELEASE_GRACE_MS = 5_000

/** Options of {@link keepAliveLockProvider}. */
export interface KeepAliveOptions {
  /**
   * Shortest `lockAtMostFor` accepted. Extensions run every `lockAtMostFor / 2`, so a short
   * lock would mean a stream of writes to the store. @default "30s"
   */
  minLockAtMostFor?: Duration
  /** @default systemClock */
  clock?: Clock
}

/**
 * Wraps an extensible provider so that a lock stays held while its task runs: every
 * `lockAtMostFor / 2` the lock is extended by `lockAtMostFor`, and what remains of
 * `lockAtLeastFor` is counted down. If an extension fails, or comes after the lock expired, the
 * task's `AbortSignal` aborts with a `LockLostError` and extensions stop.
 *
 * `lockAtMostFor` then only matters when the process dies: set it short (a minute or so) so a
 * crashed node frees the lock soon, however long the task runs.
 *
 * @throws LockConfigurationError (from `lock()`) when `lockAtMostFor` is below `minLockAtMostFor`.
 */
export function keepAliveLockProvider(provider: ExtensibleLockProvider, options: KeepAliveOptions = {}): LockProvider {
  const minimum = parseDuration(options.minLockAtMostFor ?? '30s')
  const clock = options.clock ?? systemClock
  const inspector = provider.inspector
  return markWrapper(
    {
      name: provider.name,
      ...(inspector ? { inspector: () => inspector.call(provider) } : {}),
      async lock(configuration) {
        if (configuration.lockAtMostFor < minimum) {
          throw new LockConfigurationError(
            `Lock "${configuration.name}": lockAtMostFor (${configuration.lockAtMostFor}ms) is shorter than the keep-alive minimum (${minimum}ms); raise lockAtMostFor or pass a smaller minLockAtMostFor`,
          )
        }
        const lock = await provider.lock(configuration)
        return lock && keepAlive(lock, configuration, clock)
      },
    },
    provider,
  )
}

function keepAlive(initial: ExtensibleLock, configuration: LockConfiguration, clock: Clock): KeepAliveLock {
  const { name, lockAtMostFor } = configuration
  const period = Math.max(1, Math.floor(lockAtMostFor / 2))
  const controller = new AbortController()
  let current: ExtensibleLock | undefined = initial
  let lockAtMostUntil = configuration.lockAtMostUntil.getTime()
  let remainingAtLeast = configuration.lockAtLeastFor
  let stopped = false
  let inflight: Promise<void> | undefined
  let timer: NodeJS.Timeout | undefined
  let cancelWatchdog: CancelDeadline | undefined

  const lose = (message: string, cause?: unknown): void => {
    stopped = true
    if (!controller.signal.aborted)
      controller.abort(new LockLostError(message, cause === undefined ? undefined : { cause }))
  }

  // An extension that never answers (a partitioned network, a client without a timeout) must not
  // keep the signal quiet past lockAtMostUntil: from then on another node may hold the lock.
  const watch = (): void => {
    cancelWatchdog?.()
    const until = lockAtMostUntil
    cancelWatchdog = atDeadline(until, clock, () => {
      if (!stopped)
        lose(
          `Lock "${name}" was lost: no keep-alive extension succeeded before lockAtMostUntil (${new Date(until).toISOString()})`,
        )
    })
  }

  const tick = async (): Promise<void> => {
    const handle = current
    if (stopped || !handle) return
    const now = clock.now()
    if (now > lockAtMostUntil) {
      // Too late: another node may hold the lock now, so extending could steal it.
      return lose(`Lock "${name}" was lost: the keep-alive extension came after lockAtMostUntil`)
    }
    remainingAtLeast = Math.max(0, remainingAtLeast - period)
    let next: ExtensibleLock | undefined
    try {
      next = await handle.extend(lockAtMostFor, remainingAtLeast)
    } catch (error) {
      return lose(`Lock "${name}" was lost: the keep-alive extension failed`, error)
    }
    if (!next) {
      current = undefined
      return lose(`Lock "${name}" was lost: it had expired when keep-alive tried to extend it`)
    }
    current = next
    lockAtMostUntil = now + lockAtMostFor
    if (!stopped) watch()
    try {
      lock.onExtended?.(
        lockConfiguration({ name, lockAtMostFor, lockAtLeastFor: remainingAtLeast, createdAt: new Date(now) }),
      )
    } catch (error) {
      // A reporting callback must not stop the lock from being kept alive.
      debug('onExtended of lock "%s" threw: %s', name, error instanceof Error ? error.message : String(error))
    }
    schedule()
  }

  const schedule = (): void => {
    if (stopped) return
    timer = setTimeout(() => {
      inflight = tick().finally(() => {
        inflight = undefined
      })
    }, period)
    // The task itself keeps the process alive; a forgotten lock must not.
    timer.unref()
  }

  let releasing = false
  const lock: KeepAliveLock = {
    // Extensions keep the acquisition's token, and so does the wrapper.
    ...(initial.fencingToken === undefined ? {} : { fencingToken: initial.fencingToken }),
    ...(initial.lockedBy === undefined ? {} : { lockedBy: initial.lockedBy }),
    signal: controller.signal,
    onExtended: undefined,
    async [Symbol.asyncDispose]() {
      if (!releasing) await lock.unlock()
    },
    async unlock() {
      if (releasing) {
        throw new LockStateError(`Cannot unlock lock "${name}": it was already unlocked. Unlock each handle once`)
      }
      releasing = true
      stopped = true
      if (timer) clearTimeout(timer)
      cancelWatchdog?.()
      try {
        if (inflight) {
          // Which handle is current depends on that extension; past lockAtMostUntil the lock has expired anyway.
          const expired = (): LockProviderError =>
            new LockProviderError(
              `Could not release lock "${name}": its keep-alive extension got no answer from the store; the lock expires at ${new Date(lockAtMostUntil).toISOString()}`,
              { lockName: name },
            )
          await beforeDeadline(inflight, Math.max(lockAtMostUntil, clock.now() + RELEASE_GRACE_MS), clock, expired)
        }
        // After a rejected extension the old handle is still valid: release it (owner-checked).
        if (current) await current.unlock()
      } catch (error) {
        releasing = false
        throw error
      }
    },
  }
  schedule()
  watch()
  return lock
}
