// The schedules in one place, for the package root and the tests: the schedulers' structural
// types (scheduler-types.ts), the fire times read from them (fire-times.ts), the fire time of
// one scheduler call (nominal-fire-time.ts), the slot of a setInterval tick (interval-slot.ts)
// and cron's CronTime, imported at first use (load-cron-time.ts).

export { cronLatestFireTime, fireTimesOf, latestFireTime } from './fire-times.ts'
export { intervalSlot } from './interval-slot.ts'
export { type CronTimeConstructor, loadCronTime } from './load-cron-time.ts'
export { nominalFireTime } from './nominal-fire-time.ts'
export {
  type CatchUpSchedule,
  type CronerJobLike,
  type CronJobLike,
  type CronTimeLike,
  type DateTimeLike,
  type FireTimes,
  isCronerJob,
  isCronJob,
  isCronTime,
  isNodeCronTask,
  type NodeCronTaskLike,
} from './scheduler-types.ts'
