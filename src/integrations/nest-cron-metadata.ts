import { LockConfigurationError } from '../core/errors.ts'
import { cronLatestFireTime } from './fire-times.ts'
import { loadCronTime } from './load-cron-time.ts'
import type { CronTimeLike } from './scheduler-types.ts'

// What @SchedulerLock reads of the decorators of @nestjs/schedule, which store their options on
// the method with reflect-metadata: the @Cron whose fire times `slot: true` and catch-up use.
// Neither package is imported: reflect-metadata's functions are looked up on `Reflect`.

// The metadata keys of @nestjs/schedule.
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS'
const SCHEDULER_TYPE = 'SCHEDULER_TYPE'
const SCHEDULER_TYPE_CRON = 1

interface ReflectMetadata {
  getOwnMetadataKeys?(target: object): unknown[]
  getOwnMetadata?(key: unknown, target: object): unknown
  defineMetadata?(key: unknown, value: unknown, target: object): void
}

/** `@Cron`'s options, as @nestjs/schedule stores them. */
interface NestCronOptions {
  cronTime?: unknown
  timeZone?: string
  utcOffset?: number
}

/**
 * `slot: true` needs `@Cron` metadata: refused where the class is defined when it can never
 * come (standard decorators, no reflect-metadata, `@Interval` or `@Timeout` below). `@Cron`
 * applied above this decorator stores its metadata later, on the locked method: checked at each
 * call, and by `ShedLockModule` when the application starts.
 */
export function checkCronSlot(at: string, method: unknown, legacy: boolean): void {
  const how = 'pass slot: (...args) => Date instead'
  if (!legacy)
    throw new LockConfigurationError(
      `${at}: slot: true reads the fire time of @Cron of @nestjs/schedule, which needs legacy decorators (experimentalDecorators); ${how}`,
    )
  const reflect = Reflect as unknown as ReflectMetadata
  if (typeof reflect.getOwnMetadata !== 'function') {
    throw new LockConfigurationError(
      `${at}: slot: true reads the fire time of @Cron of @nestjs/schedule, and reflect-metadata is not loaded (no @Cron can be there); ${how}`,
    )
  }
  const type = reflect.getOwnMetadata(SCHEDULER_TYPE, method as object)
  if (type !== undefined && type !== SCHEDULER_TYPE_CRON) {
    throw new LockConfigurationError(
      `${at}: slot: true needs @Cron: @Interval and @Timeout have no fire times; ${how} (intervalSlot() for an @Interval)`,
    )
  }
}

// The CronTime of each locked method's @Cron, built once.
const cronTimes = new WeakMap<object, Promise<CronTimeLike>>()

/** The `CronTime` of the `@Cron` on `locked`, as `@nestjs/schedule` builds its `CronJob`. */
export function cronTimeOf(locked: object, where: string): Promise<CronTimeLike> {
  let cronTime = cronTimes.get(locked)
  if (!cronTime) {
    const reflect = Reflect as unknown as ReflectMetadata
    const metadata =
      typeof reflect.getOwnMetadata === 'function'
        ? (reflect.getOwnMetadata(SCHEDULE_CRON_OPTIONS, locked) as NestCronOptions | undefined)
        : undefined
    if (!metadata || metadata.cronTime === undefined) {
      return Promise.reject(
        new LockConfigurationError(
          `${where}: slot: true and catch-up need @Cron(expression) of @nestjs/schedule on the method (its fire times); pass slot: (...args) => Date, or a schedule to catchUpSchedulerLock()`,
        ),
      )
    }
    cronTime = loadCronTime().then(
      (CronTime) =>
        new CronTime(
          metadata.cronTime,
          metadata.timeZone ?? null,
          metadata.timeZone == null ? (metadata.utcOffset ?? null) : null,
        ),
    )
    cronTime.catch(() => cronTimes.delete(locked))
    cronTimes.set(locked, cronTime)
  }
  return cronTime
}

/** The `CronTime` of the `@Cron` on `locked`, or `undefined` where it has none (an `@Interval`, a method called by hand, no reflect-metadata). */
export async function cronTimeIfAny(locked: object): Promise<CronTimeLike | undefined> {
  const reflect = Reflect as unknown as ReflectMetadata
  if (typeof reflect.getOwnMetadata !== 'function') return undefined
  const metadata = reflect.getOwnMetadata(SCHEDULE_CRON_OPTIONS, locked) as NestCronOptions | undefined
  if (metadata?.cronTime === undefined) return undefined
  return cronTimeOf(locked, '').catch(() => undefined)
}

/** The nominal fire time of a call of a `@Cron` method: the latest fire time at or before `calledAt`. */
export async function cronSlot(locked: object, calledAt: Date, where: string): Promise<Date> {
  const slot = cronLatestFireTime(await cronTimeOf(locked, where), calledAt)
  if (!slot)
    throw new LockConfigurationError(
      `${where}: slot: true: @Cron has no fire time at or before ${calledAt.toISOString()}`,
    )
  return slot
}

/**
 * Copies the `reflect-metadata` of `from` to `to`, when `reflect-metadata` is loaded: decorators
 * applied before this one (NestJS's `@Cron`, `@Interval`, `@Timeout`) store theirs on the
 * original function, which the locked one replaces.
 */
export function copyMetadata(from: object, to: object): void {
  const reflect = Reflect as unknown as ReflectMetadata
  if (
    typeof reflect.getOwnMetadataKeys !== 'function' ||
    typeof reflect.getOwnMetadata !== 'function' ||
    typeof reflect.defineMetadata !== 'function'
  )
    return
  for (const key of reflect.getOwnMetadataKeys(from)) reflect.defineMetadata(key, reflect.getOwnMetadata(key, from), to)
}
