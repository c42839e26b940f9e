import {
  type DynamicModule,
  type FactoryProvider,
  Inject,
  Logger,
  Module,
  type ModuleMetadata,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common'
// Nest injects constructor parameters by the classes emitDecoratorMetadata records: they must stay values.
// biome-ignore lint/style/useImportType: DiscoveryService and MetadataScanner are injected by class.
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core'
import {
  type CatchUpResult,
  catchUpSchedulerLock,
  type ConfigureSchedulerLockOptions,
  configureSchedulerLock,
  type Duration,
  LockConfigurationError,
  type SchedulerLockConfiguration,
  type SchedulerLockOptions,
} from 'shedlock'
import { SCHEDULER_LOCK_OPTIONS } from './scheduler-lock.decorator.ts'
import { SHEDLOCK_CONFIGURATION, SHEDLOCK_EXECUTOR, ShedLockService } from './shedlock.service.ts'

/**
 * Options of {@link ShedLockModule.forRoot}: the providers and default durations of every
 * `@SchedulerLock` method, as for `configureSchedulerLock()` of `shedlock`, and how the module
 * catches up and shuts down.
 */
export interface ShedLockModuleOptions extends ConfigureSchedulerLockOptions {
  /**
   * Whether the application waits, while it starts (`onApplicationBootstrap`), for the catch-up
   * of every `@Cron` method with `@SchedulerLock({ slot: true, catchUp })`. A catch-up with
   * policy `'all'` runs every missed slot, which may take long. @default false: they run in the
   * background, and their outcome is logged
   */
  awaitCatchUp?: boolean
  /**
   * How long the shutdown waits for running `@SchedulerLock` methods to stop after their signal
   * aborted (`executor.close({ timeout })`). @default "10s"
   */
  shutdownTimeout?: Duration
}

/** Options of {@link ShedLockModule.forRootAsync}: a factory for {@link ShedLockModuleOptions}, with injected arguments. */
export interface ShedLockModuleAsyncOptions {
  /** Modules that export what `inject` lists. */
  imports?: ModuleMetadata['imports']
  /** Tokens whose values are passed to `useFactory`, in order (a `pg` Pool, a `ConfigService`…). */
  inject?: FactoryProvider['inject']
  // biome-ignore lint/suspicious/noExplicitAny: the injected values' types are the caller's, as in Nest's own FactoryProvider.
  useFactory: (...args: any[]) => ShedLockModuleOptions | Promise<ShedLockModuleOptions>
}

/** Injection token of the resolved {@link ShedLockModuleOptions}. */
export const SHEDLOCK_MODULE_OPTIONS: unique symbol = Symbol('SHEDLOCK_MODULE_OPTIONS')

// Instantiating this provider applies the options; Nest instantiates every provider of every
// module before any onModuleInit hook, so @Timeout(0) jobs and early direct calls are locked too.
const configuration: FactoryProvider = {
  provide: SHEDLOCK_CONFIGURATION,
  inject: [SHEDLOCK_MODULE_OPTIONS],
  useFactory: (options: ShedLockModuleOptions): SchedulerLockConfiguration => configureSchedulerLock(options),
}

const shared = [configuration, ShedLockService, { provide: SHEDLOCK_EXECUTOR, useExisting: ShedLockService }]
const exported = [SHEDLOCK_MODULE_OPTIONS, SHEDLOCK_EXECUTOR, ShedLockService]

// The metadata key of @Cron of @nestjs/schedule (not a dependency of this package).
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS'

interface ReflectMetadata {
  getMetadata?(key: unknown, target: object): unknown
}

function metadataOf(key: unknown, target: object): unknown {
  const reflect = Reflect as unknown as ReflectMetadata
  return typeof reflect.getMetadata === 'function' ? reflect.getMetadata(key, target) : undefined
}

/**
 * Configures `@SchedulerLock` for a NestJS application (Java ShedLock's `@EnableSchedulerLock`).
 * Import it once, in the root module; it is global. The configuration belongs to the process,
 * as the lock context of `shedlock` does: with several applications in one process, the one
 * created last configures every `@SchedulerLock` method.
 *
 * - When the application starts (`onApplicationBootstrap`), it checks every `@SchedulerLock`
 *   method with `slot: true` for its `@Cron` (a missing one fails the start with
 *   `LockConfigurationError`), and runs the catch-up of those with `catchUp`: the fire times of
 *   their `@Cron` that every node missed, by its policy (see `awaitCatchUp`).
 * - When it shuts down (`app.close()`, or a signal with `app.enableShutdownHooks()`), it closes
 *   the executors (first thing, in `onModuleDestroy`, awaited again in `onApplicationShutdown`):
 *   running methods' signals abort, and their locks are released before the modules that hold
 *   the store's client (imported by `forRootAsync`) are destroyed.
 * - {@link ShedLockService} (also as {@link SHEDLOCK_EXECUTOR}) runs code under locks outside
 *   decorators, on the same providers and listener.
 *
 * ```ts
 * @Module({
 *   imports: [
 *     ScheduleModule.forRoot(),
 *     ShedLockModule.forRootAsync({
 *       imports: [DatabaseModule],
 *       inject: [PG_POOL],
 *       useFactory: (pool: pg.Pool) => ({ provider: postgresLockProvider({ client: pool }), defaultLockAtMostFor: '10m' }),
 *     }),
 *   ],
 * })
 * export class AppModule {}
 * ```
 */
@Module({})
export class ShedLockModule implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  readonly #logger = new Logger('ShedLock')
  readonly #configuration: SchedulerLockConfiguration
  readonly #options: ShedLockModuleOptions
  readonly #discovery: DiscoveryService
  readonly #scanner: MetadataScanner
  #closing: Promise<void> | undefined

  constructor(
    @Inject(SHEDLOCK_CONFIGURATION) configuration: SchedulerLockConfiguration,
    @Inject(SHEDLOCK_MODULE_OPTIONS) options: ShedLockModuleOptions,
    discovery: DiscoveryService,
    scanner: MetadataScanner,
  ) {
    this.#configuration = configuration
    this.#options = options
    this.#discovery = discovery
    this.#scanner = scanner
  }

  /**
   * With options known up front.
   *
   * @throws LockConfigurationError (when the application starts) for options that
   *   `configureSchedulerLock()` rejects: no provider, no `defaultLockAtMostFor`, bad durations.
   */
  static forRoot(options: ShedLockModuleOptions): DynamicModule {
    return {
      module: ShedLockModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [{ provide: SHEDLOCK_MODULE_OPTIONS, useValue: options }, ...shared],
      exports: exported,
    }
  }

  /**
   * With options built by a factory from injected values, for example a lock provider over the
   * application's database pool.
   *
   * @throws LockConfigurationError (when the application starts) as {@link ShedLockModule.forRoot}.
   */
  static forRootAsync(options: ShedLockModuleAsyncOptions): DynamicModule {
    return {
      module: ShedLockModule,
      global: true,
      imports: [DiscoveryModule, ...(options.imports ?? [])],
      providers: [
        { provide: SHEDLOCK_MODULE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
        ...shared,
      ],
      exports: exported,
    }
  }

  /**
   * Checks `slot: true` methods for their `@Cron` and runs the catch-ups.
   *
   * @throws LockConfigurationError for a `@SchedulerLock({ slot: true })` method without `@Cron`.
   */
  async onApplicationBootstrap(): Promise<void> {
    const catchUps: Promise<void>[] = []
    for (const { instance, key, options, label } of this.#slotMethods()) {
      if (metadataOf(SCHEDULE_CRON_OPTIONS, (instance as Record<string, object>)[key]!) === undefined) {
        throw new LockConfigurationError(
          `${label}: slot: true reads the fire time of @Cron of @nestjs/schedule, and the method has none; add @Cron(...), or pass slot: (...args) => Date`,
        )
      }
      if (options.catchUp === undefined || options.catchUp.policy === 'skip') continue
      catchUps.push(
        catchUpSchedulerLock(instance, key).then(
          (result) => this.#report(label, result),
          (error: unknown) =>
            this.#logger.error(
              `${label}: the catch-up failed: ${error instanceof Error ? error.message : String(error)}`,
            ),
        ),
      )
    }
    const all = Promise.all(catchUps)
    if (this.#options.awaitCatchUp === true) await all
  }

  /** Closes the executors: running methods stop, and their locks are released. */
  async onModuleDestroy(): Promise<void> {
    await this.#close()
  }

  /** Awaits the close started in `onModuleDestroy` (or starts it). */
  async onApplicationShutdown(): Promise<void> {
    await this.#close()
  }

  #close(): Promise<void> {
    this.#closing ??= this.#configuration.close({ timeout: this.#options.shutdownTimeout ?? '10s' })
    return this.#closing
  }

  /** Every method of a provider or controller with `@SchedulerLock({ slot: true })` of this package. */
  *#slotMethods(): Generator<{ instance: object; key: string; options: SchedulerLockOptions; label: string }> {
    for (const wrapper of [...this.#discovery.getProviders(), ...this.#discovery.getControllers()]) {
      const instance: unknown = wrapper.instance
      if (instance === null || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue
      const prototype: unknown = Object.getPrototypeOf(instance)
      if (prototype === null || typeof prototype !== 'object') continue
      for (const key of this.#scanner.getAllMethodNames(prototype)) {
        const method = (instance as Record<string, unknown>)[key]
        if (typeof method !== 'function') continue
        const options = metadataOf(SCHEDULER_LOCK_OPTIONS, method) as SchedulerLockOptions | undefined
        if (options?.slot !== true) continue
        const lock = typeof options.name === 'string' ? ` (lock ${JSON.stringify(options.name)})` : ''
        yield { instance, key, options, label: `@SchedulerLock on ${instance.constructor.name}.${key}()${lock}` }
      }
    }
  }

  #report(label: string, result: CatchUpResult): void {
    if (result.outcome !== 'ran') {
      this.#logger.debug(`${label}: catch-up: ${result.outcome}`)
      return
    }
    const slots = (dates: readonly Date[]) => dates.map((date) => date.toISOString()).join(', ')
    this.#logger.log(
      `${label}: caught up ${result.ran.length} of ${result.missed.length} missed slot(s): ${slots(result.ran)}`,
    )
    for (const { slot, error } of result.failed) {
      this.#logger.error(
        `${label}: the catch-up run of slot ${slot.toISOString()} failed: ${error instanceof Error ? error.message : String(error)}`,
      )
    }
  }
}
