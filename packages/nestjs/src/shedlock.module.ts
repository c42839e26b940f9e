import { type DynamicModule, type FactoryProvider, Module, type ModuleMetadata } from '@nestjs/common'
import { type ConfigureSchedulerLockOptions, configureSchedulerLock } from 'shedlock'

/**
 * Options of {@link ShedLockModule.forRoot}: the providers and default durations of every
 * `@SchedulerLock` method, as for `configureSchedulerLock()` of `shedlock`.
 */
export type ShedLockModuleOptions = ConfigureSchedulerLockOptions

/** Options of {@link ShedLockModule.forRootAsync}: a factory for {@link ShedLockModuleOptions}, with injected arguments. */
export interface ShedLockModuleAsyncOptions {
  /** Modules that export what `inject` lists. */
  imports?: ModuleMetadata['imports']
  /** Tokens whose values are passed to `useFactory`, in order (a `pg` Pool, a `ConfigService`…). */
  inject?: FactoryProvider['inject']
  // `any`: the injected values' types are the caller's, as in Nest's own FactoryProvider.
  useFactory: (...args: any[]) => ShedLockModuleOptions | Promise<ShedLockModuleOptions>
}

/** Injection token of the resolved {@link ShedLockModuleOptions}. */
export const SHEDLOCK_MODULE_OPTIONS: unique symbol = Symbol('SHEDLOCK_MODULE_OPTIONS')

// Instantiating this provider applies the options; Nest instantiates every provider of every
// module before any onModuleInit hook, so @Timeout(0) jobs and early direct calls are locked too.
const SHEDLOCK_CONFIGURATION = Symbol('SHEDLOCK_CONFIGURATION')
const configuration: FactoryProvider = {
  provide: SHEDLOCK_CONFIGURATION,
  inject: [SHEDLOCK_MODULE_OPTIONS],
  useFactory: (options: ShedLockModuleOptions) => {
    configureSchedulerLock(options)
    return options
  },
}

/**
 * Configures `@SchedulerLock` for a NestJS application (Java ShedLock's `@EnableSchedulerLock`).
 * Import it once, in the root module; it is global. The configuration belongs to the process,
 * as the lock context of `shedlock` does: with several applications in one process, the one
 * created last configures every `@SchedulerLock` method.
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
export class ShedLockModule {
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
      providers: [{ provide: SHEDLOCK_MODULE_OPTIONS, useValue: options }, configuration],
      exports: [SHEDLOCK_MODULE_OPTIONS],
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
      imports: options.imports ?? [],
      providers: [{ provide: SHEDLOCK_MODULE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }, configuration],
      exports: [SHEDLOCK_MODULE_OPTIONS],
    }
  }
}
