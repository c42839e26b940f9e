export { SCHEDULER_LOCK_OPTIONS, SchedulerLock, type SchedulerLockMethodDecorator } from './scheduler-lock.decorator.ts'
export {
  SHEDLOCK_MODULE_OPTIONS,
  ShedLockModule,
  type ShedLockModuleAsyncOptions,
  type ShedLockModuleOptions,
} from './shedlock.module.ts'
export { SHEDLOCK_EXECUTOR, ShedLockService } from './shedlock.service.ts'
