import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockingTaskExecutor, LockingTaskExecutorListener } from '../core/locking-task-executor.ts'
import { checkDurations, checkName, type ExecutorOrProvider, isExecutorOrProvider, kindOf, toExecutor, withContext } from './lock-options.ts'

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
}

/** Options of {@link SchedulerLock}. */
export interface SchedulerLockOptions {
  /**
   * The lock's name, the same on every node. A function computes it from each call's arguments,
   * with the instance as `this` (ShedLock's lock names with method arguments).
   */
  // `any`: the arguments are the decorated method's, which the options cannot know.
  name: string | ((...args: any[]) => string)
  /** @default the `defaultLockAtMostFor` of {@link configureSchedulerLock} */
  lockAtMostFor?: Duration
  /** @default the `defaultLockAtLeastFor` of {@link configureSchedulerLock}, else 0 */
  lockAtLeastFor?: Duration
  /** Name of one of the configured `providers`. @default the configured default provider */
  provider?: string
}

type AnyMethod = (...args: any[]) => any
/** The methods `@SchedulerLock` accepts: they return a promise (or nothing), since a locked call is asynchronous. */
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
  <Method extends LockableMethod>(target: object, propertyKey: string | symbol, descriptor: TypedPropertyDescriptor<Method>): TypedPropertyDescriptor<Method>
}

interface Registry {
  readonly byName: ReadonlyMap<string, LockingTaskExecutor>
  readonly fallback: LockingTaskExecutor | undefined
  readonly lockAtMostFor: number
  readonly lockAtLeastFor: number
}

// One per process, like the async lock context: decorators are applied when classes are
// defined, long before any configuration exists, so they look it up at each call.
let registry: Registry | undefined
const lockedMethods = new WeakSet<object>()

const CONFIGURE = 'configureSchedulerLock()'
const HOW_TO_CONFIGURE = "call configureSchedulerLock({ provider, defaultLockAtMostFor: '10m' }) once at startup, before the first call (NestJS: import ShedLockModule.forRoot() from @shedlock/nestjs)"

/**
 * Sets the providers and default durations of every `@SchedulerLock` method: call it once at
 * startup (the counterpart of Java ShedLock's `@EnableSchedulerLock`). A later call replaces the
 * configuration for the calls that follow.
 *
 * ```ts
 * configureSchedulerLock({ provider: postgresLockProvider({ client: pool }), defaultLockAtMostFor: '10m' })
 * configureSchedulerLock({ providers: { main: pgProvider, cache: redisProvider }, provider: pgProvider, defaultLockAtMostFor: '10m', defaultLockAtLeastFor: '5s' })
 * ```
 *
 * @throws LockConfigurationError without `defaultLockAtMostFor`, for bad durations, without a
 *   provider, or for a provider that is neither a `LockProvider` nor a `LockingTaskExecutor`.
 */
export function configureSchedulerLock(options: ConfigureSchedulerLockOptions): void {
  if (options === null || typeof options !== 'object') {
    throw new LockConfigurationError(`${CONFIGURE}: options are missing; pass { provider, defaultLockAtMostFor: '10m' }`)
  }
  const { provider, providers = {}, defaultLockAtMostFor, defaultLockAtLeastFor, listener } = options
  if (defaultLockAtMostFor === undefined || defaultLockAtMostFor === null) {
    throw new LockConfigurationError(`${CONFIGURE}: defaultLockAtMostFor is required; set it well above your tasks' normal duration, e.g. '10m'`)
  }
  const durations = checkDurations(CONFIGURE, defaultLockAtMostFor, defaultLockAtLeastFor)
  if (providers === null || typeof providers !== 'object' || Array.isArray(providers)) {
    throw new LockConfigurationError(`${CONFIGURE}: providers must be an object of named providers, e.g. { main: postgresLockProvider({ client }) }`)
  }
  const entries = Object.entries(providers)
  if (provider === undefined && entries.length === 0) {
    throw new LockConfigurationError(`${CONFIGURE}: no lock provider given; pass provider (the default) or providers (named ones)`)
  }

  const executors = new Map<object, LockingTaskExecutor>()
  const executorOf = (where: string, value: unknown): LockingTaskExecutor => {
    if (isExecutorOrProvider(value) && executors.has(value)) return executors.get(value)!
    const executor = toExecutor(where, value, listener)
    executors.set(value as object, executor)
    return executor
  }
  const byName = new Map<string, LockingTaskExecutor>()
  for (const [name, value] of entries) {
    if (name.trim() === '') throw new LockConfigurationError(`${CONFIGURE}: a provider name is blank; give every entry of providers a name`)
    byName.set(name, executorOf(`${CONFIGURE}: providers.${name}`, value))
  }
  let fallback: LockingTaskExecutor | undefined
  if (provider !== undefined) fallback = executorOf(`${CONFIGURE}: provider`, provider)
  else if (entries.length === 1) fallback = byName.values().next().value
  registry = { byName, fallback, lockAtMostFor: durations.lockAtMostFor!, lockAtLeastFor: durations.lockAtLeastFor ?? 0 }
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
 * ```ts
 * class Reports {
 *   @SchedulerLock({ name: 'nightly-report', lockAtMostFor: '10m', lockAtLeastFor: '30s' })
 *   async nightly(): Promise<void> { … }
 * }
 * ```
 *
 * @throws LockConfigurationError where the class is defined, for a missing or blank name, bad
 *   durations, `lockAtLeastFor` above `lockAtMostFor`, a blank provider name, or a decorator on
 *   something other than a method. The message names the class (legacy decorators only: standard
 *   ones are not told the class), the method and the lock.
 * @returns a decorator whose method's promise rejects with `LockConfigurationError` when
 *   {@link configureSchedulerLock} was not called or the named provider is not configured, with
 *   `LockProviderError` when the store fails (the method did not run), and with the method's
 *   own errors.
 */
export function SchedulerLock(options: SchedulerLockOptions): SchedulerLockDecorator {
  const lockLabel = typeof options?.name === 'string' ? ` (lock ${JSON.stringify(options.name)})` : typeof options?.name === 'function' ? ' (lock name from a function)' : ''

  const decorate = (method: unknown, where: string, classOf: (self: unknown) => string): AnyMethod => {
    const at = `@SchedulerLock on ${where}${lockLabel}`
    if (typeof method !== 'function') throw new LockConfigurationError(`${at}: it decorates methods only, not ${kindOf(method)}; put it on a method`)
    if (lockedMethods.has(method)) throw new LockConfigurationError(`${at}: the method already has a @SchedulerLock; keep one`)
    if (options === null || typeof options !== 'object') {
      throw new LockConfigurationError(`${at}: options are missing; pass { name, lockAtMostFor?, lockAtLeastFor?, provider? }`)
    }
    checkName(at, options.name)
    const durations = checkDurations(at, options.lockAtMostFor, options.lockAtLeastFor)
    const providerName = options.provider
    if (providerName !== undefined && (typeof providerName !== 'string' || providerName.trim() === '')) {
      throw new LockConfigurationError(`${at}: provider must be the name of one of the providers given to ${CONFIGURE}, got ${kindOf(providerName)}`)
    }
    return lockedMethod(method as AnyMethod, options.name, durations, providerName, (self) => `@SchedulerLock on ${classOf(self)}${lockLabel}`)
  }

  const decorator = (...args: unknown[]): unknown => {
    const [first, second, third] = args
    if (isMethodContext(second)) {
      // Standard decorator: (value, context). The class is not known until the method is called.
      const name = typeof second.name === 'symbol' ? `[${second.name.description ?? ''}]` : second.name
      const where = `${second.static ? 'static ' : ''}method ${name}()`
      if (second.kind !== 'method') {
        throw new LockConfigurationError(`@SchedulerLock on ${second.kind} ${name}${lockLabel}: it decorates methods only, not a ${second.kind}; put it on a method`)
      }
      return decorate(first, where, (self) => `${nameOfClass(self)}.${name}()`)
    }
    const legacy = (typeof second === 'string' || typeof second === 'symbol') && (typeof first === 'function' || (typeof first === 'object' && first !== null))
    if (legacy) {
      // Legacy decorator: (prototype or class, key, descriptor).
      const key = typeof second === 'symbol' ? `[${second.description ?? ''}]` : String(second)
      const owner = typeof first === 'function' ? `${(first as { name: string }).name}.${key}` : `${(first as { constructor: { name: string } }).constructor.name}.${key}`
      const descriptor = third as PropertyDescriptor | undefined
      if (!descriptor || typeof descriptor.value !== 'function') {
        const what = !descriptor ? 'a property' : descriptor.get || descriptor.set ? 'an accessor' : 'a property'
        throw new LockConfigurationError(`@SchedulerLock on ${owner}${lockLabel}: it decorates methods only, not ${what}; put it on a method`)
      }
      descriptor.value = decorate(descriptor.value, `${owner}()`, () => `${owner}()`)
      return descriptor
    }
    throw new LockConfigurationError(
      `@SchedulerLock${lockLabel}: it decorates methods only${typeof first === 'function' ? `, not the class ${(first as { name: string }).name}` : ''}; put it on a method`,
    )
  }
  return decorator as SchedulerLockDecorator
}

function lockedMethod(
  method: AnyMethod,
  name: SchedulerLockOptions['name'],
  durations: { lockAtMostFor?: number; lockAtLeastFor?: number },
  providerName: string | undefined,
  at: (self: unknown) => string,
): AnyMethod {
  const run = async (self: unknown, args: unknown[]): Promise<unknown> => {
    const where = at(self)
    const current = registry
    if (!current) throw new LockConfigurationError(`${where}: @SchedulerLock is not configured; ${HOW_TO_CONFIGURE}`)
    const executor = pickExecutor(current, providerName, where)
    const lockAtMostFor = durations.lockAtMostFor ?? current.lockAtMostFor
    const lockAtLeastFor = durations.lockAtLeastFor ?? current.lockAtLeastFor
    let lockName: string
    try {
      lockName = typeof name === 'function' ? name.apply(self, args) : name
    } catch (error) {
      throw new LockConfigurationError(`${where}: the name function threw: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
    }
    try {
      // Validated here, where the class and method can be named; the executor validates again.
      lockConfiguration({ name: lockName, lockAtMostFor, lockAtLeastFor })
    } catch (error) {
      throw withContext(where, error)
    }
    const outcome = await executor.executeWithLock(() => method.apply(self, args), { name: lockName, lockAtMostFor, lockAtLeastFor })
    return outcome.executed ? outcome.result : undefined
  }
  const locked = function (this: unknown, ...args: unknown[]): Promise<unknown> {
    return run(this, args)
  }
  Object.defineProperty(locked, 'name', { value: method.name, configurable: true })
  copyMetadata(method, locked)
  lockedMethods.add(locked)
  return locked
}

function pickExecutor(current: Registry, providerName: string | undefined, where: string): LockingTaskExecutor {
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
  return typeof value === 'object' && value !== null && typeof (value as MethodContextLike).kind === 'string' && 'name' in value
}

function nameOfClass(self: unknown): string {
  if (typeof self === 'function') return self.name || '(anonymous class)'
  if (typeof self === 'object' && self !== null) return (self as { constructor?: { name?: string } }).constructor?.name || '(anonymous class)'
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
  if (typeof reflect.getOwnMetadataKeys !== 'function' || typeof reflect.getOwnMetadata !== 'function' || typeof reflect.defineMetadata !== 'function') return
  for (const key of reflect.getOwnMetadataKeys(from)) reflect.defineMetadata(key, reflect.getOwnMetadata(key, from), to)
}
