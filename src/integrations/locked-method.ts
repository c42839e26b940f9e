import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockRequest } from '../core/locking-task-executor.ts'
import { slotFromFunction, withContext } from './lock-options.ts'
import { copyMetadata, cronSlot, cronTimeIfAny } from './nest-cron-metadata.ts'
import { nextFireOfCronTime } from './next-fire.ts'
import { currentRegistry, pickExecutor, type SchedulerLockRegistry } from './scheduler-lock-configuration.ts'
import type { CheckedSchedulerLockOptions } from './scheduler-lock-options.ts'
import { isShutdownStop, runInTaskContext } from './task-context.ts'

/** A method, as the decorator sees it. */
export type AnyMethod = (...args: unknown[]) => unknown

/** What a locked method knows of itself: for `catchUpSchedulerLock()`. */
export interface LockedMethodInfo {
  /** The decorated method, which the locked one calls. */
  readonly method: AnyMethod
  readonly options: CheckedSchedulerLockOptions
  /** The start of messages about a call: the class, the method and the lock, given the instance. */
  readonly at: (self: unknown) => string
}

const lockedMethods = new WeakMap<object, LockedMethodInfo>()

/** What the locked method `value` knows of itself, or `undefined` when it is no locked method. */
export function lockedMethodInfo(value: unknown): LockedMethodInfo | undefined {
  return typeof value === 'function' ? lockedMethods.get(value) : undefined
}

/**
 * `method` under a lock: each call looks the configuration up (it may come after the class is
 * defined, or change), then runs the method through the executor of its provider. The locked
 * method keeps the original's name and reflect-metadata.
 */
export function lockedMethod(
  method: AnyMethod,
  options: CheckedSchedulerLockOptions,
  at: (self: unknown) => string,
): AnyMethod {
  const { providerName, slot, slotSettings } = options
  const run = async (self: unknown, args: unknown[], calledAt: Date): Promise<unknown> => {
    const where = at(self)
    const current = currentRegistry(where)
    const executor = pickExecutor(current, providerName, where)
    const { lockName, lockAtMostFor, lockAtLeastFor } = lockOf(options, current, self, args, where)
    let slotOptions: Pick<LockRequest, 'slot' | 'slotRetention'> = {}
    if (slot !== undefined) {
      const retention = slotSettings.slotRetention === undefined ? {} : { slotRetention: slotSettings.slotRetention }
      slotOptions = {
        slot: slot === true ? await cronSlot(locked, calledAt, where) : slotFromFunction(slot, self, args, where),
        ...retention,
      }
    }
    // A @Cron method's schedule, for the ledger's next fire time (overdue tasks).
    const cronTime = await cronTimeIfAny(locked)
    try {
      const outcome = await executor.executeWithLock(
        (context) => runInTaskContext(context, () => method.apply(self, args)),
        {
          name: lockName,
          lockAtMostFor,
          lockAtLeastFor,
          ...slotOptions,
          ...(cronTime ? { nextFireAt: nextFireOfCronTime(cronTime) } : {}),
        },
      )
      return outcome.executed ? outcome.result : undefined
    } catch (error) {
      // Stopped by a shutdown (closeSchedulerLock(), ShedLockModule): skipped, not failed.
      if (isShutdownStop(error, executor, undefined)) return undefined
      throw error
    }
  }
  const locked = function (this: unknown, ...args: unknown[]): Promise<unknown> {
    // The call's time, before anything awaits: the slot is the latest fire time at or before it.
    return run(this, args, new Date())
  }
  Object.defineProperty(locked, 'name', { value: method.name, configurable: true })
  copyMetadata(method, locked)
  lockedMethods.set(locked, { method, options, at })
  return locked
}

/** The lock's name and durations for one call, checked where the class and method can be named. */
function lockOf(
  options: CheckedSchedulerLockOptions,
  current: SchedulerLockRegistry,
  self: unknown,
  args: unknown[],
  where: string,
): { lockName: string; lockAtMostFor: number; lockAtLeastFor: number } {
  const { name, durations } = options
  const lockAtMostFor = durations.lockAtMostFor ?? current.lockAtMostFor
  const lockAtLeastFor = durations.lockAtLeastFor ?? current.lockAtLeastFor
  let lockName: string
  try {
    lockName = typeof name === 'function' ? name.apply(self, args) : name
  } catch (error) {
    throw new LockConfigurationError(
      `${where}: the name function threw: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    )
  }
  try {
    // Validated here, where the class and method can be named; the executor validates again.
    lockConfiguration({ name: lockName, lockAtMostFor, lockAtLeastFor })
  } catch (error) {
    throw withContext(where, error)
  }
  return { lockName, lockAtMostFor, lockAtLeastFor }
}
