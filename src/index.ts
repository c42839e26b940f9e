export { type Clock, systemClock } from './core/clock.ts'
export { diagnosticsChannels, type LockEventMessage, type LockEventName, type LockExecution } from './core/diagnostics.ts'
export { type Duration, parseDuration } from './core/duration.ts'
export {
  LockCannotBeExtendedError,
  LockConfigurationError,
  LockExtensionError,
  LockLostError,
  LockProviderError,
  type LockProviderErrorOptions,
  LockStateError,
  NoActiveLockError,
  NotLockedError,
  ShedLockError,
} from './core/errors.ts'
export { type KeepAliveOptions, keepAliveLockProvider } from './core/keep-alive.ts'
export { type LockConfiguration, type LockConfigurationOptions, lockConfiguration } from './core/lock-configuration.ts'
export { assertLocked, extendActiveLock } from './core/lock-context.ts'
export type { ExtensibleLock, ExtensibleLockProvider, KeepAliveLock, LockProvider, SimpleLock } from './core/lock-provider.ts'
export {
  createLockingTaskExecutor,
  type LockedTask,
  type LockingTaskExecutor,
  type LockingTaskExecutorListener,
  type LockingTaskExecutorOptions,
  type TaskContext,
  type TaskOutcome,
  type TaskResult,
} from './core/locking-task-executor.ts'
export { type InMemoryLockProvider, type InMemoryLockProviderOptions, type InMemoryLockRecord, inMemoryLockProvider } from './providers/in-memory.ts'
export { defineLock, type LockOperations } from './support/define-lock.ts'
export {
  type ConfigureSchedulerLockOptions,
  configureSchedulerLock,
  type LockableMethod,
  SchedulerLock,
  type SchedulerLockDecorator,
  type SchedulerLockOptions,
} from './integrations/scheduler-lock.ts'
export { type LockedFunction, type WithLockOptions, withLock } from './integrations/with-lock.ts'
export type { ExecutorOrProvider } from './integrations/lock-options.ts'
