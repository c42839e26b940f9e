import { LockConfigurationError } from '../core/errors.ts'
import { cronLatestFireTime } from './fire-times.ts'
import { type CronerJobLike, type CronJobLike, isCronerJob, isCronJob } from './scheduler-types.ts'

/** What node-cron 4 passes its task: the scheduled fire time (`date`) and why it runs. */
export interface NodeCronContextLike {
  readonly date: Date
  readonly task: object
  readonly execution?: { readonly reason?: string } | undefined
}

export function isNodeCronContext(value: unknown): value is NodeCronContextLike {
  const context = value as Partial<NodeCronContextLike> | null
  return (
    typeof value === 'object' &&
    value !== null &&
    context!.date instanceof Date &&
    typeof context!.task === 'object' &&
    context!.task !== null &&
    'dateLocalIso' in value
  )
}

/**
 * The nominal fire time of the scheduler call that passed `self` and `args` (`slot: true` of
 * `withLock`): the time the schedule said, not the time the timer fired.
 *
 * - croner passes its `Cron` job first; `currentRun()` is the actual fire time, so the slot is
 *   the latest fire time at or before it (`previousRuns()`);
 * - node-schedule passes the scheduled `fireDate` first;
 * - node-cron 4 passes a context whose `date` is the scheduled fire time;
 * - cron calls `onTick` with `this` = the `CronJob`, and only `lastDate()` (the actual time) is
 *   known: the slot is the latest fire time at or before it, found with `getNextDateFrom()`.
 *
 * @throws LockConfigurationError when the call carries none of them (a call by hand, cron's
 *   `runOnInit`, cron with a `context`, node-schedule's `invoke()`, node-cron's `execute()`).
 */
export function nominalFireTime(where: string, self: unknown, args: readonly unknown[]): Date {
  const [first] = args
  if (isCronerJob(first)) return cronerFireTime(where, first)
  if (first instanceof Date) {
    if (Number.isNaN(first.getTime()))
      throw new LockConfigurationError(`${where}: slot: true got an Invalid Date as the fire date`)
    return first
  }
  if (isNodeCronContext(first)) {
    if (first.execution?.reason !== undefined && first.execution.reason !== 'scheduled') {
      throw new LockConfigurationError(
        `${where}: slot: true: node-cron ran the task by hand (execute()), which has no fire time; schedule it, or pass slot: () => Date`,
      )
    }
    return first.date
  }
  if (isCronJob(self)) return cronJobFireTime(where, self)
  throw new LockConfigurationError(
    `${where}: slot: true reads the fire time from the scheduler's call (croner passes its Cron job, node-schedule the fire date, node-cron its context; cron calls onTick with this = the CronJob), and this call carries none (called by hand, or cron with a context option); pass slot: (...args) => Date instead`,
  )
}

/** croner: the latest fire time at or before the run's actual start. */
function cronerFireTime(where: string, job: CronerJobLike): Date {
  const started = job.currentRun()
  if (!(started instanceof Date))
    throw new LockConfigurationError(
      `${where}: slot: true: the croner job has no current run (the function was called outside a run of the job)`,
    )
  const fast = wholeSecondFire(job, started)
  if (fast) return fast
  // previousRuns(1, reference) is the latest fire time before the reference, a fire exactly at
  // it excluded: hence the 1 ms. With `interval` (more than 1 s) it is the latest at or before
  // the reference moved back by the interval: hence the interval. (Both checked in the tests.)
  const interval = job.options?.interval ?? 0
  const reference = new Date(started.getTime() + (interval > 1 ? interval * 1000 : 1))
  const slot = job.previousRuns(1, reference)[0]
  if (!(slot instanceof Date) || slot.getTime() > started.getTime()) {
    throw new LockConfigurationError(
      `${where}: slot: true: croner knows no fire time at or before the run's start (${started.toISOString()})`,
    )
  }
  return slot
}

/**
 * croner's fire times are whole seconds, and its timer fires a few milliseconds after one: when
 * the second the run started in is a fire time of the pattern, it is the latest at or before the
 * start, found without previousRuns(), which walks the pattern back (about 80 µs a call, a tenth
 * of a replica's CPU in the fleet bench's profile). `undefined` where that does not hold or cannot
 * be told (croner before 9, `interval`, `dayOffset`, a one-off job, a `stopAt` without getTime()
 * or before that second): previousRuns() decides.
 */
function wholeSecondFire(job: CronerJobLike, started: Date): Date | undefined {
  const { options } = job
  if (typeof job.match !== 'function' || options?.interval || options?.dayOffset || job.getOnce?.()) return undefined
  const second = new Date(Math.floor(started.getTime() / 1000) * 1000)
  // croner keeps stopAt as its own date object, which has getTime() as a Date does.
  const stopAt = options?.stopAt as { getTime?: () => unknown } | undefined
  if (stopAt !== undefined) {
    const last = typeof stopAt?.getTime === 'function' ? stopAt.getTime() : undefined
    if (typeof last !== 'number' || !(second.getTime() <= last)) return undefined
  }
  return job.match(second) ? second : undefined
}

/** cron: the latest fire time at or before `lastDate()`. */
function cronJobFireTime(where: string, job: CronJobLike): Date {
  const fired = job.lastDate()
  if (!(fired instanceof Date)) {
    throw new LockConfigurationError(
      `${where}: slot: true: the CronJob has no lastDate() (fireOnTick() called by hand before its first tick); pass slot: () => Date for such calls`,
    )
  }
  const slot = cronLatestFireTime(job.cronTime, fired)
  if (!slot)
    throw new LockConfigurationError(
      `${where}: slot: true: the CronJob's schedule has no fire time at or before ${fired.toISOString()}`,
    )
  return slot
}
