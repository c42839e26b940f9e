import { cronNext } from './fire-times.ts'
import { isNodeCronContext } from './nominal-fire-time.ts'
import { type CronTimeLike, isCronerJob, isCronJob } from './scheduler-types.ts'

// Where each scheduler keeps its next fire time, for ExecutionOptions.nextFireAt: read when a run
// is written to the ledger, so that a task whose schedule stopped reads as overdue.

/** What the integrations pass as `nextFireAt`. */
export type NextFireAt = () => Date | undefined

/**
 * The next fire time of the scheduler whose call passed `self` and `args`, as that scheduler
 * computes it: croner's `job.nextRun()` (the job is the first argument), node-cron 4's
 * `task.getNextRun()` (its context is), node-schedule's `job.nextInvocation()` (the job is
 * `this`), cron's `job.nextDate()` (`onTick`'s `this`). `undefined` for any other call.
 */
export function nextFireOfCall(self: unknown, args: readonly unknown[]): NextFireAt | undefined {
  const [first] = args
  if (isCronerJob(first)) return () => first.nextRun() ?? undefined
  if (isNodeCronContext(first)) {
    const task = first.task as { getNextRun?: () => Date | null }
    return typeof task.getNextRun === 'function' ? () => task.getNextRun!() ?? undefined : undefined
  }
  const job = self as { nextInvocation?: () => unknown; nextDate?: () => unknown } | null
  if (typeof job?.nextInvocation === 'function') return () => asDate(job.nextInvocation!())
  if (isCronJob(self) && typeof job?.nextDate === 'function') return () => asDate(job.nextDate!())
  return undefined
}

/** The next fire time of a cron `CronTime` (a NestJS `@Cron`'s) after now. */
export function nextFireOfCronTime(cronTime: CronTimeLike): NextFireAt {
  const next = cronNext(cronTime)
  return () => next(new Date())
}

/** A `Date`, luxon's `DateTime` (cron) or cron-parser's `CronDate` (node-schedule) as a `Date`. */
function asDate(value: unknown): Date | undefined {
  if (value instanceof Date) return value
  const convertible = value as { toJSDate?: () => Date; toDate?: () => Date } | null
  if (typeof convertible?.toJSDate === 'function') return convertible.toJSDate()
  if (typeof convertible?.toDate === 'function') return convertible.toDate()
  return undefined
}
