import { Inject, Injectable } from '@nestjs/common'
import type {
  CatchUpOptions,
  CatchUpResult,
  CloseOptions,
  ExecutionOptions,
  LockConfiguration,
  LockedTask,
  LockingTaskExecutor,
  LockRequest,
  SchedulerLockConfiguration,
  TaskResult,
} from 'shedlock'

/** Injection token of the configuration that `ShedLockModule` applied (internal). */
export const SHEDLOCK_CONFIGURATION: unique symbol = Symbol('SHEDLOCK_CONFIGURATION')

/**
 * Injection token of the module's executor, a `LockingTaskExecutor` of `shedlock` over the
 * default provider (the same object as {@link ShedLockService}):
 * `constructor(@Inject(SHEDLOCK_EXECUTOR) private readonly executor: LockingTaskExecutor) {}`.
 */
export const SHEDLOCK_EXECUTOR: unique symbol = Symbol('SHEDLOCK_EXECUTOR')

/**
 * Runs code under locks outside decorators, on the providers and listener of `ShedLockModule`:
 * the executors `@SchedulerLock` methods run on. A `LockingTaskExecutor` over the default
 * provider; `executor(name)` gives the one of a named provider.
 *
 * ```ts
 * @Injectable()
 * export class Imports {
 *   constructor(private readonly shedlock: ShedLockService) {}
 *
 *   async importFeed(feed: string): Promise<void> {
 *     await this.shedlock.executeWithLock(({ signal }) => download(feed, signal), { name: `import-${feed}`, lockAtMostFor: '5m' })
 *   }
 * }
 * ```
 */
@Injectable()
export class ShedLockService implements LockingTaskExecutor {
  readonly #configuration: SchedulerLockConfiguration

  constructor(@Inject(SHEDLOCK_CONFIGURATION) configuration: SchedulerLockConfiguration) {
    this.#configuration = configuration
  }

  /**
   * The executor of the provider named `provider` (one of the module's `providers`), or of the
   * default provider.
   *
   * @throws LockConfigurationError when no such provider is configured.
   */
  executor(provider?: string): LockingTaskExecutor {
    return this.#configuration.executor(provider)
  }

  /** `executeWithLock()` of the default provider's executor: see `LockingTaskExecutor`. */
  executeWithLock<T>(
    task: LockedTask<T>,
    request: LockConfiguration | LockRequest,
    options?: ExecutionOptions,
  ): Promise<TaskResult<T>> {
    return this.executor().executeWithLock(task, request, options)
  }

  /**
   * `catchUp()` of the default provider's executor: see `LockingTaskExecutor`. For fire times
   * from a scheduler, pass `fireTimes: fireTimesOf(job)` (`fireTimesOf` of `shedlock`).
   */
  catchUp<T>(task: LockedTask<T>, request: LockRequest, options: CatchUpOptions): Promise<CatchUpResult> {
    return this.executor().catchUp(task, request, options)
  }

  /** Closes every executor of the module (`@SchedulerLock` methods stop too); the module does it when the application shuts down. */
  close(options?: CloseOptions): Promise<void> {
    return this.#configuration.close(options)
  }

  /** True once the module's executors were closed. */
  get closed(): boolean {
    return this.#configuration.closed
  }
}
