import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { ShedlockLogger } from '../core/logger.ts'
import type {
  CatchUpResult,
  CloseOptions,
  LockingTaskExecutor,
  LockingTaskExecutorListener,
  LockRequest,
} from '../core/locking-task-executor.ts'
import {
  type CatchUpSettings,
  checkDurations,
  checkName,
  checkSlotSettings,
  type ExecutorOrProvider,
  isExecutorOrProvider,
  kindOf,
  type SlotSettings,
  skippedCatchUp,
  slotFromFunction,
  toExecutor,
  withContext,
} from './lock-options.ts'
import { type CatchUpSchedule, cronLatestFireTime, type CronTimeLike, fireTimesOf, loadCronTime } from './schedules.ts'
import { isShutdownStop, runInTaskContext } from './task-context.ts'

/** Options of {@link configureSchedulerLock} (Java ShedLock's `@EnableSchedulerLock`). */
export interface ConfigureSchedulerLockOptions {
  /**
   * The provider (or executor) of every `@SchedulerLock` method that names none. Optional when
   * `providers` holds exactly one entry, which is then the default.
   */
  provider?: ExecutorOrProvider
  /**
   * Named providers (or executors), chosen per method with `@SchedulerLock({ provider: 'name' })`
   * (ShedLock's `@LockProviderToUse`).
   */
  providers?: Readonly<Record<string, ExecutorOrProvider>>
  /** `lockAtMostFor` of methods that set none. Required. Milliseconds or a duration string (`"10m"`). */
  defaultLockAtMostFor: Duration
  /** `lockAtLeastFor` of methods that set none. @default 0 */
  defaultLockAtLeastFor?: Duration
  /** Listener of the executors built for the providers given as `LockProvider`s (executors keep their own). */
  listener?: LockingTaskExecutorListener
  /** Logger of the executors built for the providers given as `LockProvider`s (`console` or pino): runs, skips, lock losses, store errors. @default none */
  logger?: ShedlockLogger
}

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

/**
 * What {@link configureSchedulerLock} returns: the executors of the configuration, for code that
 * locks outside decorators, and their shutdown.
 */
export interface SchedulerLockConfiguration {
  /**
   * The executor of the provider named `provider` (one of `providers`), or of the default
   * provider: the one `@SchedulerLock` methods run on, with the configured listener.
   *
   * @throws LockConfigurationError when no such provider is configured.
   */
  executor(provider?: string): LockingTaskExecutor
  /** Closes every executor of this configuration, those built over providers and those passed in (see `executor.close()`). */
  close(options?: CloseOptions): Promise<void>
  /** True once `close()` was called. */
  readonly closed: boolean
}

type AnyMethod = (...args: unknown[]) => unknown
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

interface Registry {
  readonly byName: ReadonlyMap<string, LockingTaskExecutor>
  readonly fallback: LockingTaskExecutor | undefined
  readonly lockAtMostFor: number
  readonly lockAtLeastFor: number
  readonly configuration: SchedulerLockConfiguration
}

/** What a locked method knows of itself: for {@link catchUpSchedulerLock}. */
interface LockedMethodInfo {
  readonly method: AnyMethod
  readonly name: SchedulerLockOptions['name']
  readonly durations: { lockAtMostFor?: number; lockAtLeastFor?: number }
  readonly providerName: string | undefined
  readonly settings: SlotSettings
  readonly at: (self: unknown) => string
}

// One per process, like the async lock context: decorators are applied when classes are
// defined, long before any configuration exists, so they look it up at each call.
let registry: Registry | undefined
const lockedMethods = new WeakMap<object, LockedMethodInfo>()

// The metadata keys of @nestjs/schedule (its decorators store them with reflect-metadata).
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS'
const SCHEDULER_TYPE = 'SCHEDULER_TYPE'
const SCHEDULER_TYPE_CRON = 1

const CONFIGURE = 'configureSchedulerLock()'
const HOW_TO_CONFIGURE =
  "call configureSchedulerLock({ provider, defaultLockAtMostFor: '10m' }) once at startup, before the first call (NestJS: import ShedLockModule.forRoot() from @shedlock/nestjs)"

/**
 * Sets the providers and default durations of every `@SchedulerLock` method: call it once at
 * startup (the counterpart of Java ShedLock's `@EnableSchedulerLock`). A later call replaces the
 * configuration for the calls that follow. Returns the configuration's executors (for code that
 * locks outside decorators) and their `close()`; {@link closeSchedulerLock} closes the current one.
 *
 * ```ts
 * configureSchedulerLock({ provider: postgresLockProvider({ client: pool }), defaultLockAtMostFor: '10m' })
 * configureSchedulerLock({ providers: { main: pgProvider, cache: redisProvider }, provider: pgProvider, defaultLockAtMostFor: '10m', defaultLockAtLeastFor: '5s' })
 * ```
 *
 * @throws LockConfigurationError without `defaultLockAtMostFor`, for bad durations, without a
 *   provider, or for a provider that is neither a `LockProvider` nor a `LockingTaskExecutor`.
 */
export function configureSchedulerLock(options: ConfigureSchedulerLockOptions): SchedulerLockConfiguration {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError(
      `${CONFIGURE}: options are missing; pass { provider, defaultLockAtMostFor: '10m' }`,
    )
  }
  const { provider, providers = {}, defaultLockAtMostFor, defaultLockAtLeastFor, listener, logger } = options
  if (defaultLockAtMostFor === undefined || defaultLockAtMostFor === null) {
    throw new LockConfigurationError(
      `${CONFIGURE}: defaultLockAtMostFor is required; set it well above your tasks' normal duration, e.g. '10m'`,
    )
  }
  const durations = checkDurations(CONFIGURE, defaultLockAtMostFor, defaultLockAtLeastFor)
  if (providers === null || typeof providers !== 'object' || Array.isArray(providers)) {
    throw new LockConfigurationError(
      `${CONFIGURE}: providers must be an object of named providers, e.g. { main: postgresLockProvider({ client }) }`,
    )
  }
  const entries = Object.entries(providers)
  if (provider === undefined && entries.length === 0) {
    throw new LockConfigurationError(
      `${CONFIGURE}: no lock provider given; pass provider (the default) or providers (named ones)`,
    )
  }

  const executors = new Map<object, LockingTaskExecutor>()
  const executorOf = (where: string, value: unknown): LockingTaskExecutor => {
    if (isExecutorOrProvider(value) && executors.has(value)) return executors.get(value)!
    const executor = toExecutor(where, value, listener, logger)
    executors.set(value as object, executor)
    return executor
  }
  const byName = new Map<string, LockingTaskExecutor>()
  for (const [name, value] of entries) {
    if (name.trim() === '')
      throw new LockConfigurationError(`${CONFIGURE}: a provider name is blank; give every entry of providers a name`)
    byName.set(name, executorOf(`${CONFIGURE}: providers.${name}`, value))
  }
  let fallback: LockingTaskExecutor | undefined
  if (provider !== undefined) fallback = executorOf(`${CONFIGURE}: provider`, provider)
  else if (entries.length === 1) fallback = byName.values().next().value
  const all = [...new Set(executors.values())]
  const partial = {
    byName,
    fallback,
    lockAtMostFor: durations.lockAtMostFor!,
    lockAtLeastFor: durations.lockAtLeastFor ?? 0,
  }
  let closing: Promise<void> | undefined
  const configuration: SchedulerLockConfiguration = {
    executor: (name) => pickExecutor(partial, name, CONFIGURE),
    close: (closeOptions) => {
      closing ??= Promise.all(all.map((executor) => executor.close(closeOptions))).then(() => undefined)
      return closing
    },
    get closed() {
      return closing !== undefined
    },
  }
  registry = { ...partial, configuration }
  return configuration
}

/**
 * Closes the executors of the current configuration (see {@link SchedulerLockConfiguration.close}),
 * on a shutdown: running `@SchedulerLock` methods' signals abort (`taskContext().signal`), later
 * calls resolve to `undefined`, and it resolves once the running ones released their locks.
 * Resolves at once when nothing is configured. `ShedLockModule` of `@shedlock/nestjs` calls it
 * when the application shuts down.
 */
export function closeSchedulerLock(options?: CloseOptions): Promise<void> {
  return registry ? registry.configuration.close(options) : Promise.resolve()
}

/**
 * Forgets the configuration, as before the first {@link configureSchedulerLock}. For tests; not
 * exported from the package root.
 */
export function resetSchedulerLock(): void {
  registry = undefined
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
    if (lockedMethods.has(method))
      throw new LockConfigurationError(`${at}: the method already has a @SchedulerLock; keep one`)
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
    const settings = checkSlotSettings(at, options)
    if (slot === true) checkCronSlot(at, method, legacy)
    return lockedMethod(
      method as AnyMethod,
      options.name,
      durations,
      providerName,
      settings,
      slot,
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
 * `slot: true` needs `@Cron` metadata: refused where the class is defined when it can never
 * come (standard decorators, no reflect-metadata, `@Interval` or `@Timeout` below). `@Cron`
 * applied above this decorator stores its metadata later, on the locked method: checked at each
 * call, and by `ShedLockModule` when the application starts.
 */
function checkCronSlot(at: string, method: unknown, legacy: boolean): void {
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

function lockedMethod(
  method: AnyMethod,
  name: SchedulerLockOptions['name'],
  durations: { lockAtMostFor?: number; lockAtLeastFor?: number },
  providerName: string | undefined,
  settings: SlotSettings,
  slot: SchedulerLockOptions['slot'],
  at: (self: unknown) => string,
): AnyMethod {
  const run = async (self: unknown, args: unknown[], calledAt: Date): Promise<unknown> => {
    const where = at(self)
    const current = registry
    if (!current) throw new LockConfigurationError(`${where}: @SchedulerLock is not configured; ${HOW_TO_CONFIGURE}`)
    const executor = pickExecutor(current, providerName, where)
    const { lockName, lockAtMostFor, lockAtLeastFor } = lockOf(current, self, args, where)
    let slotOptions: Pick<LockRequest, 'slot' | 'slotRetention'> = {}
    if (slot !== undefined) {
      const retention = settings.slotRetention === undefined ? {} : { slotRetention: settings.slotRetention }
      slotOptions = {
        slot: slot === true ? await cronSlot(locked, calledAt, where) : slotFromFunction(slot, self, args, where),
        ...retention,
      }
    }
    try {
      const outcome = await executor.executeWithLock(
        (context) => runInTaskContext(context, () => method.apply(self, args)),
        {
          name: lockName,
          lockAtMostFor,
          lockAtLeastFor,
          ...slotOptions,
        },
      )
      return outcome.executed ? outcome.result : undefined
    } catch (error) {
      // Stopped by a shutdown (closeSchedulerLock(), ShedLockModule): skipped, not failed.
      if (isShutdownStop(error, executor, undefined)) return undefined
      throw error
    }
  }
  // The lock's name and durations for one call, checked where the class and method can be named.
  const lockOf = (current: Registry, self: unknown, args: unknown[], where: string) => {
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
  const locked = function (this: unknown, ...args: unknown[]): Promise<unknown> {
    // The call's time, before anything awaits: the slot is the latest fire time at or before it.
    return run(this, args, new Date())
  }
  Object.defineProperty(locked, 'name', { value: method.name, configurable: true })
  copyMetadata(method, locked)
  lockedMethods.set(locked, { method, name, durations, providerName, settings, at })
  return locked
}

// The CronTime of each locked method's @Cron, built once.
const cronTimes = new WeakMap<object, Promise<CronTimeLike>>()

/** The `CronTime` of the `@Cron` on `locked`, as `@nestjs/schedule` builds its `CronJob`. */
function cronTimeOf(locked: object, where: string): Promise<CronTimeLike> {
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

/** `@Cron`'s options, as @nestjs/schedule stores them. */
interface NestCronOptions {
  cronTime?: unknown
  timeZone?: string
  utcOffset?: number
}

/** The nominal fire time of a call of a `@Cron` method: the latest fire time at or before `calledAt`. */
async function cronSlot(locked: object, calledAt: Date, where: string): Promise<Date> {
  const slot = cronLatestFireTime(await cronTimeOf(locked, where), calledAt)
  if (!slot)
    throw new LockConfigurationError(
      `${where}: slot: true: @Cron has no fire time at or before ${calledAt.toISOString()}`,
    )
  return slot
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
  const info = typeof locked === 'function' ? lockedMethods.get(locked) : undefined
  if (!info) {
    throw new LockConfigurationError(
      `catchUpSchedulerLock(): ${nameOfClass(instance)}.${String(method)} is not a method with @SchedulerLock`,
    )
  }
  const where = info.at(instance)
  const catchUp = info.settings.catchUp
  if (!catchUp) return skippedCatchUp()
  const current = registry
  if (!current) throw new LockConfigurationError(`${where}: @SchedulerLock is not configured; ${HOW_TO_CONFIGURE}`)
  const executor = pickExecutor(current, info.providerName, where)
  if (executor.closed) return skippedCatchUp()
  const fireTimes = fireTimesOf(schedule ?? (await cronTimeOf(locked as object, where)))
  const lockAtMostFor = info.durations.lockAtMostFor ?? current.lockAtMostFor
  const lockAtLeastFor = info.durations.lockAtLeastFor ?? current.lockAtLeastFor
  const retention = info.settings.slotRetention === undefined ? {} : { slotRetention: info.settings.slotRetention }
  try {
    return await executor.catchUp(
      (context) => runInTaskContext(context, () => info.method.apply(instance, [])),
      { name: info.name as string, lockAtMostFor, lockAtLeastFor, ...retention },
      { policy: catchUp.policy, within: catchUp.within, fireTimes },
    )
  } catch (error) {
    throw withContext(where, error)
  }
}

function pickExecutor(
  current: Pick<Registry, 'byName' | 'fallback'>,
  providerName: string | undefined,
  where: string,
): LockingTaskExecutor {
  const configured = [...current.byName.keys()].map((n) => JSON.stringify(n)).join(', ')
  if (providerName !== undefined) {
    const executor = current.byName.get(providerName)
    if (executor) return executor
    throw new LockConfigurationError(
      `${where}: no lock provider named ${JSON.stringify(providerName)} is configured (${configured === '' ? 'no named providers' : `configured: ${configured}`}); add it to providers in ${CONFIGURE} or ShedLockModule.forRoot(), or fix the name`,
    )
  }
  if (current.fallback) return current.fallback
  throw new LockConfigurationError(
    `${where}: several lock providers are configured (${configured}) and none is the default; choose one with @SchedulerLock({ provider: ${[...current.byName.keys()].map((n) => JSON.stringify(n))[0]} }) or pass a default provider to ${CONFIGURE}`,
  )
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

interface ReflectMetadata {
  getOwnMetadataKeys?(target: object): unknown[]
  getOwnMetadata?(key: unknown, target: object): unknown
  defineMetadata?(key: unknown, value: unknown, target: object): void
}

/**
 * Copies the `reflect-metadata` of `from` to `to`, when `reflect-metadata` is loaded: decorators
 * applied before this one (NestJS's `@Cron`, `@Interval`, `@Timeout`) store theirs on the
 * original function, which the locked one replaces.
 */
function copyMetadata(from: object, to: object): void {
  const reflect = Reflect as unknown as ReflectMetadata
  if (
    typeof reflect.getOwnMetadataKeys !== 'function' ||
    typeof reflect.getOwnMetadata !== 'function' ||
    typeof reflect.defineMetadata !== 'function'
  )
    return
  for (const key of reflect.getOwnMetadataKeys(from)) reflect.defineMetadata(key, reflect.getOwnMetadata(key, from), to)
}
