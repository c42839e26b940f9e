import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import {
  type CatchUpSettings,
  checkDurations,
  checkName,
  checkSlotSettings,
  kindOf,
  type SlotSettings,
} from './lock-options.ts'
import { checkCronSlot } from './nest-cron-metadata.ts'
import { CONFIGURE } from './scheduler-lock-configuration.ts'

/** Options of {@link SchedulerLock}. */
export interface SchedulerLockOptions {
  /**
   * The lock's name, the same on every node. A function computes it from each call's arguments,
   * with the instance as `this` (ShedLock's lock names with method arguments).
   */
  // biome-ignore lint/suspicious/noExplicitAny: the arguments are the decorated method's, which the options cannot know (`unknown[]` would refuse `(id: number) => string`).
  name: string | ((...args: any[]) => string)
  /** @default the `defaultLockAtMostFor` of {@link configureSchedulerLock} */
  lockAtMostFor?: Duration
  /** @default the `defaultLockAtLeastFor` of {@link configureSchedulerLock}, else 0 */
  lockAtLeastFor?: Duration
  /** Name of one of the configured `providers`. @default the configured default provider */
  provider?: string
  /**
   * Makes each call a slot run: at most once per (name, scheduled fire time) across all nodes,
   * however late a node fires it (see docs/slots.md).
   *
   * - `true`: the fire time of the method's `@Cron(expression, { timeZone?, utcOffset? })` of
   *   `@nestjs/schedule` that the call is for: the latest fire time at or before the call,
   *   computed with cron's `CronTime` (the `cron` package, which `@nestjs/schedule` runs on).
   *   Needs `@Cron` on the method (legacy decorators, as NestJS uses): a method with `@Interval`
   *   or `@Timeout` below, or standard decorators, is refused where the class is defined; with
   *   `@Cron` missing altogether, the first call rejects (and `ShedLockModule` refuses to start).
   * - a function of the call's arguments (`this` = the instance) that returns the slot. Anything
   *   but a valid `Date` rejects the call with `LockConfigurationError`.
   */
  // biome-ignore lint/suspicious/noExplicitAny: the arguments are the decorated method's, as for `name`.
  slot?: true | ((...args: any[]) => Date | undefined)
  /** How long a slot's record is kept (with `slot`). @default the executor's, else "24h" */
  slotRetention?: Duration
  /**
   * What a catch-up does about the slots every node missed: `ShedLockModule` runs it when the
   * application starts (for methods with `slot: true` and `@Cron`), or call
   * {@link catchUpSchedulerLock}. Needs `slot` and a fixed `name`. @default no catch-up
   */
  catchUp?: CatchUpSettings
}

/** A method's {@link SchedulerLockOptions}, checked and parsed (durations in milliseconds). */
export interface CheckedSchedulerLockOptions {
  readonly name: SchedulerLockOptions['name']
  readonly durations: { lockAtMostFor?: number; lockAtLeastFor?: number }
  readonly providerName: string | undefined
  readonly slot: SchedulerLockOptions['slot']
  readonly slotSettings: SlotSettings
}

/**
 * Checks the options of a `@SchedulerLock` on `method` where the class is defined, so that a
 * mistake fails at startup rather than at the first call. `legacy` is true for
 * `experimentalDecorators`, the only kind `slot: true` works with.
 *
 * @throws LockConfigurationError naming `at`.
 */
export function checkSchedulerLockOptions(
  at: string,
  options: SchedulerLockOptions,
  method: unknown,
  legacy: boolean,
): CheckedSchedulerLockOptions {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError(
      `${at}: options are missing; pass { name, lockAtMostFor?, lockAtLeastFor?, provider? }`,
    )
  }
  checkName(at, options.name)
  const durations = checkDurations(at, options.lockAtMostFor, options.lockAtLeastFor)
  const providerName = options.provider
  if (providerName !== undefined && (typeof providerName !== 'string' || providerName.trim() === '')) {
    throw new LockConfigurationError(
      `${at}: provider must be the name of one of the providers given to ${CONFIGURE}, got ${kindOf(providerName)}`,
    )
  }
  const slot = options.slot
  if (slot !== undefined && slot !== true && typeof slot !== 'function') {
    throw new LockConfigurationError(
      `${at}: slot must be true (the fire time of the method's @Cron) or a function that returns the slot, got ${kindOf(slot)}`,
    )
  }
  const slotSettings = checkSlotSettings(at, options)
  if (slot === true) checkCronSlot(at, method, legacy)
  return { name: options.name, durations, providerName, slot, slotSettings }
}
