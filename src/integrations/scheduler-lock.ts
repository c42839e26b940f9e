import { LockConfigurationError } from '../core/errors.ts'
import type { CatchUpResult } from '../core/locking-task-executor.ts'
import { fireTimesOf } from './fire-times.ts'
import { kindOf, skippedCatchUp, withContext } from './lock-options.ts'
import { type AnyMethod, lockedMethod, lockedMethodInfo } from './locked-method.ts'
import { cronTimeOf } from './nest-cron-metadata.ts'
import { currentRegistry, pickExecutor } from './scheduler-lock-configuration.ts'
import { checkSchedulerLockOptions, type SchedulerLockOptions } from './scheduler-lock-options.ts'
import type { CatchUpSchedule } from './scheduler-types.ts'
import { runInTaskContext } from './task-context.ts'

// The decorator itself: where it is applied (standard or legacy decorators, a method or not) and
// what it makes of the method. Its options are checked in scheduler-lock-options.ts, the locked
// method is built in locked-method.ts, and the configuration it runs with is in
// scheduler-lock-configuration.ts.

export {
  type ConfigureSchedulerLockOptions,
  closeSchedulerLock,
  configureSchedulerLock,
  resetSchedulerLock,
  type SchedulerLockConfiguration,
} from './scheduler-lock-configuration.ts'
export type { SchedulerLockOptions } from './scheduler-lock-options.ts'

/** The methods `@SchedulerLock` accepts: they return a promise (or nothing), since a locked call is asynchronous. */
// biome-ignore lint/suspicious/noExplicitAny: any method's parameters must match; `unknown[]` would refuse `(id: number) => ...`.
// biome-ignore lint/suspicious/noConfusingVoidType: `void` accepts a method declared `(): void`, which `undefined` would refuse.
export type LockableMethod = (...args: any[]) => PromiseLike<unknown> | void

/**
 * The decorator {@link SchedulerLock} returns. It works as a standard (TC39) method decorator and
 * as a legacy `experimentalDecorators` one (NestJS); both forms are typed, so that decorating a
 * method that returns a plain value is a compile error.
 */
export interface SchedulerLockDecorator {
  /** Standard (TC39) decorators. */
  <This, Method extends LockableMethod>(method: Method, context: ClassMethodDecoratorContext<This, Method>): Method
  /** Legacy decorators (`experimentalDecorators`). */
  <Method extends LockableMethod>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<Method>,
  ): TypedPropertyDescriptor<Method>
}

/**
 * Runs the decorated method under a lock, the counterpart of Java ShedLock's `@SchedulerLock`:
 * when another node holds the lock the call is skipped at once and resolves to `undefined`; else
 * it resolves to the method's result. It applies to every call, from a scheduler or direct.
 * Inside the method `assertLocked()` and `extendActiveLock()` work.
 *
 * Works as a standard (TC39) decorator and as a legacy `experimentalDecorators` one, and keeps
 * the `reflect-metadata` of decorators applied before it (NestJS's `@Cron`), so the order of
 * decorators does not matter. Providers and default durations come from
 * {@link configureSchedulerLock}, looked up at each call.
 *
 * With `slot`, each scheduled fire runs at most once across nodes (`slot: true` reads it from the
 * method's `@Cron` of `@nestjs/schedule`); `catchUp` runs the fires every node missed
 * ({@link catchUpSchedulerLock}, or `ShedLockModule` when the application starts). Inside the
 * method, `taskContext()` gives its signal and slot; a call stopped by {@link closeSchedulerLock}
 * resolves to `undefined`.
 *
 * ```ts
 * class Reports {
 *   @SchedulerLock({ name: 'nightly-report', lockAtMostFor: '10m', lockAtLeastFor: '30s' })
 *   async nightly(): Promise<void> { … }
 * }
 * ```
 *
 * @throws LockConfigurationError where the class is defined, for a missing or blank name, bad
 *   durations, `lockAtLeastFor` above `lockAtMostFor`, a blank provider name, bad `slot`,
 *   `slotRetention` or `catchUp` options, `slot: true` where no `@Cron` can be (standard
 *   decorators, `@Interval` or `@Timeout` below), or a decorator on something other than a
 *   method. The message names the class (legacy decorators only: standard
 *   ones are not told the class), the method and the lock.
 * @returns a decorator whose method's promise rejects with `LockConfigurationError` when
 *   {@link configureSchedulerLock} was not called, the named provider is not configured, or the
 *   call's slot cannot be known (`slot: true` without `@Cron`, a slot function's bad result), with
 *   `LockProviderError` when the store fails (the method did not run), and with the method's
 *   own errors.
 */
export function SchedulerLock(options: SchedulerLockOptions): SchedulerLockDecorator {
  const lockLabel =
    typeof options?.name === 'string'
      ? ` (lock ${JSON.stringify(options.name)})`
      : typeof options?.name === 'function'
        ? ' (lock name from a function)'
        : ''

  const decorate = (method: unknown, where: string, classOf: (self: unknown) => string, legacy: boolean): AnyMethod => {
    const at = `@SchedulerLock on ${where}${lockLabel}`
    if (typeof method !== 'function')
      throw new LockConfigurationError(`${at}: it decorates methods only, not ${kindOf(method)}; put it on a method`)
    if (lockedMethodInfo(method))
      throw new LockConfigurationError(`${at}: the method already has a @SchedulerLock; keep one`)
    return lockedMethod(
      method as AnyMethod,
      checkSchedulerLockOptions(at, options, method, legacy),
      (self) => `@SchedulerLock on ${classOf(self)}${lockLabel}`,
    )
  }

  const decorator = (...args: unknown[]): unknown => {
    const [first, second, third] = args
    if (isMethodContext(second)) {
      // Standard decorator: (value, context). The class is not known until the method is called.
      const name = typeof second.name === 'symbol' ? `[${second.name.description ?? ''}]` : second.name
      const where = `${second.static ? 'static ' : ''}method ${name}()`
      if (second.kind !== 'method') {
        throw new LockConfigurationError(
          `@SchedulerLock on ${second.kind} ${name}${lockLabel}: it decorates methods only, not a ${second.kind}; put it on a method`,
        )
      }
      return decorate(first, where, (self) => `${nameOfClass(self)}.${name}()`, false)
    }
    const legacy =
      (typeof second === 'string' || typeof second === 'symbol') &&
      (typeof first === 'function' || (typeof first === 'object' && first !== null))
    if (legacy) {
      // Legacy decorator: (prototype or class, key, descriptor).
      const key = typeof second === 'symbol' ? `[${second.description ?? ''}]` : String(second)
      const owner =
        typeof first === 'function'
          ? `${(first as { name: string }).name}.${key}`
          : `${(first as { constructor: { name: string } }).constructor.name}.${key}`
      const descriptor = third as PropertyDescriptor | undefined
      if (!descriptor || typeof descriptor.value !== 'function') {
        const what = !descriptor ? 'a property' : descriptor.get || descriptor.set ? 'an accessor' : 'a property'
        throw new LockConfigurationError(
          `@SchedulerLock on ${owner}${lockLabel}: it decorates methods only, not ${what}; put it on a method`,
        )
      }
      descriptor.value = decorate(descriptor.value, `${owner}()`, () => `${owner}()`, true)
      return descriptor
    }
    throw new LockConfigurationError(
      `@SchedulerLock${lockLabel}: it decorates methods only${typeof first === 'function' ? `, not the class ${(first as { name: string }).name}` : ''}; put it on a method`,
    )
  }
  return decorator as SchedulerLockDecorator
}

/**
 * Runs the catch-up of a `@SchedulerLock` method of `instance`: the slots every node missed, by
 * its `catchUp` option, under its lock, on its provider. Each run calls the method without
 * arguments (`this` = `instance`); `taskContext().slot` says which slot it is for. Fire times
 * come from `schedule`, else from the method's `@Cron` (with cron's `CronTime`).
 * `ShedLockModule` of `@shedlock/nestjs` calls it for every `@Cron` method with
 * `slot: true` and `catchUp` when the application starts.
 *
 * ```ts
 * const reports = new Reports()
 * await catchUpSchedulerLock(reports, 'nightly', new Cron('0 3 * * *', { paused: true }))
 * ```
 *
 * Resolves to `{ outcome: 'skipped' }` for a method without `catchUp`, or once its executor closed.
 *
 * @throws LockConfigurationError when the method is not a `@SchedulerLock` method, nothing is
 *   configured, its provider is not, it has no schedule, or the provider has no inspector.
 * @throws LockProviderError when the store fails.
 */
export async function catchUpSchedulerLock(
  instance: object,
  method: string | symbol,
  schedule?: CatchUpSchedule,
): Promise<CatchUpResult> {
  const locked = (instance as Record<string | symbol, unknown> | null)?.[method]
  const info = lockedMethodInfo(locked)
  if (!info) {
    throw new LockConfigurationError(
      `catchUpSchedulerLock(): ${nameOfClass(instance)}.${String(method)} is not a method with @SchedulerLock`,
    )
  }
  const where = info.at(instance)
  const { durations, slotSettings } = info.options
  const catchUp = slotSettings.catchUp
  if (!catchUp) return skippedCatchUp()
  const current = currentRegistry(where)
  const executor = pickExecutor(current, info.options.providerName, where)
  if (executor.closed) return skippedCatchUp()
  const fireTimes = fireTimesOf(schedule ?? (await cronTimeOf(locked as object, where)))
  const lockAtMostFor = durations.lockAtMostFor ?? current.lockAtMostFor
  const lockAtLeastFor = durations.lockAtLeastFor ?? current.lockAtLeastFor
  const retention = slotSettings.slotRetention === undefined ? {} : { slotRetention: slotSettings.slotRetention }
  try {
    return await executor.catchUp(
      (context) => runInTaskContext(context, () => info.method.apply(instance, [])),
      { name: info.options.name as string, lockAtMostFor, lockAtLeastFor, ...retention },
      { policy: catchUp.policy, within: catchUp.within, fireTimes },
    )
  } catch (error) {
    throw withContext(where, error)
  }
}

interface MethodContextLike {
  kind: string
  name: string | symbol
  static?: boolean
}

function isMethodContext(value: unknown): value is MethodContextLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as MethodContextLike).kind === 'string' &&
    'name' in value
  )
}

function nameOfClass(self: unknown): string {
  if (typeof self === 'function') return self.name || '(anonymous class)'
  if (typeof self === 'object' && self !== null)
    return (self as { constructor?: { name?: string } }).constructor?.name || '(anonymous class)'
  return '(unknown class)'
}
