import type { Duration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import type { ShedlockLogger } from '../core/logger.ts'
import type { CloseOptions, LockingTaskExecutor, LockingTaskExecutorListener } from '../core/locking-task-executor.ts'
import { checkDurations, type ExecutorOrProvider, isExecutorOrProvider, toExecutor } from './lock-options.ts'

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

/** The configuration `@SchedulerLock` methods run with, as {@link configureSchedulerLock} left it. */
export interface SchedulerLockRegistry {
  readonly byName: ReadonlyMap<string, LockingTaskExecutor>
  readonly fallback: LockingTaskExecutor | undefined
  readonly lockAtMostFor: number
  readonly lockAtLeastFor: number
  readonly configuration: SchedulerLockConfiguration
}

// One per process, like the async lock context: decorators are applied when classes are
// defined, long before any configuration exists, so they look it up at each call.
let registry: SchedulerLockRegistry | undefined

/** How messages name {@link configureSchedulerLock}. */
export const CONFIGURE = 'configureSchedulerLock()'
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
 * The current configuration, for a call of a `@SchedulerLock` method.
 *
 * @throws LockConfigurationError naming `where` when {@link configureSchedulerLock} was not called.
 */
export function currentRegistry(where: string): SchedulerLockRegistry {
  if (!registry) throw new LockConfigurationError(`${where}: @SchedulerLock is not configured; ${HOW_TO_CONFIGURE}`)
  return registry
}

/**
 * The executor of the provider named `providerName`, or the default one.
 *
 * @throws LockConfigurationError naming `where` when there is no such provider, or no default.
 */
export function pickExecutor(
  current: Pick<SchedulerLockRegistry, 'byName' | 'fallback'>,
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
