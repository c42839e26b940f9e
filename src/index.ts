export { type Clock, systemClock } from './core/clock.ts'
export {
  diagnosticsChannels,
  type LockEventMessage,
  type LockEventName,
  type LockExecution,
} from './core/diagnostics.ts'
export { type Duration, type DurationString, type DurationUnit, parseDuration } from './core/duration.ts'
export {
  ExecutorClosedError,
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
export { activeFencingToken, assertLocked, extendActiveLock } from './core/lock-context.ts'
export type {
  ExtensibleLock,
  ExtensibleLockProvider,
  InspectableLockProvider,
  KeepAliveLock,
  LockProvider,
  SimpleLock,
} from './core/lock-provider.ts'
export type { LockInspector, LockList, LockRecord, LockSelection } from './core/lock-inspector.ts'
export {
  CatchUpError,
  type CatchUpOptions,
  type CatchUpPolicy,
  type CatchUpResult,
  type CloseOptions,
  createLockingTaskExecutor,
  type ExecutionOptions,
  type LockedTask,
  type LockingTaskExecutor,
  type LockingTaskExecutorListener,
  type LockingTaskExecutorOptions,
  type LockRequest,
  type OverlapPolicy,
  type SkipReason,
  type TaskContext,
  type TaskOutcome,
  type TaskResult,
  type TriggerOptions,
} from './core/locking-task-executor.ts'
export { type LogMethod, loggerListener, type ShedlockLogger } from './core/logger.ts'
export { describePause, isPauseHolder, pauseHolder, pauseOf, type TaskPause } from './core/pause.ts'
export {
  healthOf,
  type HistoryOptions,
  type RunEnd,
  type RunError,
  type RunHandle,
  type RunLedger,
  type RunOutcome,
  type RunRecord,
  type RunStart,
  type TaskHealth,
  withAbandoned,
  withLockState,
} from './core/run-ledger.ts'
export { DEFAULT_LEASE } from './core/lease.ts'
export {
  DEFAULT_SLOT_RETENTION,
  owedRecordName,
  parseOwedRecordName,
  parseSlotRecordName,
  slotRecordName,
} from './core/slots.ts'
export {
  type InMemoryLockProvider,
  type InMemoryLockProviderOptions,
  type InMemoryLockRecord,
  inMemoryLockInspector,
  inMemoryLockProvider,
  type InMemoryRunLedgerOptions,
  inMemoryRunLedger,
} from './providers/in-memory/index.ts'
export { defineLock, type LockOperations } from './core/define-lock.ts'
export {
  catchUpSchedulerLock,
  closeSchedulerLock,
  type ConfigureSchedulerLockOptions,
  configureSchedulerLock,
  type LockableMethod,
  SchedulerLock,
  type SchedulerLockConfiguration,
  type SchedulerLockDecorator,
  type SchedulerLockOptions,
} from './integrations/scheduler-lock.ts'
export {
  type LockedFunction,
  type LockedFunctionControls,
  type WithLockOptions,
  withLock,
} from './integrations/with-lock.ts'
export type { CatchUpSettings, ExecutorOrProvider } from './integrations/lock-options.ts'
export {
  type CatchUpSchedule,
  type CronerJobLike,
  type CronJobLike,
  type CronTimeLike,
  type DateTimeLike,
  type FireTimes,
  fireTimesOf,
  intervalSlot,
  type NodeCronTaskLike,
} from './integrations/schedules.ts'
export { taskContext } from './integrations/task-context.ts'
