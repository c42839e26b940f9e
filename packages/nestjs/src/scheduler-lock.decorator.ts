import { SetMetadata } from '@nestjs/common'
import { type LockableMethod, SchedulerLock as schedulerLock, type SchedulerLockOptions } from 'shedlock'

/** Metadata key under which {@link SchedulerLock} stores its options on the locked method (read it with Nest's `Reflector`). */
export const SCHEDULER_LOCK_OPTIONS = 'shedlock:scheduler-lock-options'

/** The method decorator {@link SchedulerLock} returns (legacy `experimentalDecorators`, as NestJS uses). */
export type SchedulerLockMethodDecorator = <Method extends LockableMethod>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<Method>,
) => TypedPropertyDescriptor<Method>

/**
 * Runs the decorated method under a lock: on the node that takes it; every other node skips the
 * call at once, which then resolves to `undefined`. Composes with `@Cron`, `@Interval` and
 * `@Timeout` of `@nestjs/schedule` in either order (their metadata is kept), and applies to
 * direct calls too. Inside the method, `assertLocked()` and `extendActiveLock()` of `shedlock`
 * work. Providers and default durations come from {@link ShedLockModule}; `provider` picks one of
 * its named `providers`.
 *
 * ```ts
 * @Injectable()
 * export class ReportService {
 *   @Cron('0 3 * * *')
 *   @SchedulerLock({ name: 'nightly-report', lockAtMostFor: '10m', lockAtLeastFor: '1m' })
 *   async nightly(): Promise<void> { … }
 * }
 * ```
 *
 * @throws LockConfigurationError where the class is defined, for a missing or blank name, bad
 *   durations, `lockAtLeastFor` above `lockAtMostFor`, or a decorator on something other than a
 *   method; the message names the class, the method and the lock.
 */
export function SchedulerLock(options: SchedulerLockOptions): SchedulerLockMethodDecorator {
  const lock = schedulerLock(options)
  return (target, propertyKey, descriptor) => {
    const locked = lock(target, propertyKey, descriptor)
    SetMetadata(SCHEDULER_LOCK_OPTIONS, options)(target, propertyKey, locked)
    return locked
  }
}
