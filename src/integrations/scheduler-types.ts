// The schedulers as the integrations see them: structural types of the few members they use, so
// that none of them is imported (or required) at run time. Each is checked against the real
// package in the tests.

/** The part of a croner `Cron` job the integrations use (croner ≥ 9). */
export interface CronerJobLike {
  /** The start of the run in progress (the actual time its timer fired), or of the previous one. */
  currentRun(): Date | null
  /** The `n` latest fire times strictly before `reference`, newest first (croner also counts a fire earlier in the same second). */
  previousRuns(n: number, reference?: Date): Date[]
  /** The first fire time after `previous`. */
  nextRun(previous?: Date): Date | null
  readonly options?:
    | {
        readonly interval?: number | undefined
        readonly dayOffset?: number | undefined
        readonly stopAt?: unknown
      }
    | undefined
  /** croner 9 and later: whether `date`'s whole second is a fire time of the pattern (a one-off job: its date's second). */
  match?(date: Date): boolean
  /** croner: the date of a one-off job, else `null`. */
  getOnce?(): Date | null
}

/** A luxon `DateTime`, as cron returns its dates. */
export interface DateTimeLike {
  toJSDate(): Date
}

/** The part of cron's `CronTime` the integrations use (cron 3 and 4, the engine of `@nestjs/schedule`). */
export interface CronTimeLike {
  /** The first fire time after `start`'s whole second, in `timeZone`. */
  getNextDateFrom(start: Date, timeZone?: string): DateTimeLike
  readonly timeZone?: string | undefined
  /** Minutes east of UTC, when the job was given `utcOffset` instead of `timeZone`. */
  readonly utcOffset?: number | undefined
  /** True for a one-off job (a `Date` instead of a cron expression); `source` is then its date. */
  readonly realDate?: boolean
  readonly source?: unknown
}

/** The part of cron's `CronJob` the integrations use. */
export interface CronJobLike {
  readonly cronTime: CronTimeLike
  /** When the current (or last) tick started: the actual time, not the scheduled one. */
  lastDate(): Date | null | undefined
}

/** The part of a node-cron 4 `ScheduledTask` the integrations use. */
export interface NodeCronTaskLike {
  /** True when the task fires at `date` (to the second). */
  match(date: Date): boolean
  getPattern?(): string
  /** Runs the task at once, outside its schedule (and outside its run coordinator). */
  execute(): Promise<unknown>
}

/** A schedule's fire times from `from` to `to`, both included, oldest first. */
export type FireTimes = (from: Date, to: Date) => Iterable<Date>

/**
 * Where a catch-up reads the schedule's fire times from: the scheduler itself, never a cron
 * parser of shedlock's own. A croner `Cron`, a cron `CronJob` (or its `CronTime`), a node-cron 4
 * `ScheduledTask`, or a function of your own `(from, to) => Date[]` (node-schedule, anything
 * else).
 */
export type CatchUpSchedule = CronerJobLike | CronJobLike | CronTimeLike | NodeCronTaskLike | FireTimes

/** True for a croner `Cron` job. */
export function isCronerJob(value: unknown): value is CronerJobLike {
  const job = value as Partial<CronerJobLike> | null
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof job!.currentRun === 'function' &&
    typeof job!.previousRuns === 'function' &&
    typeof job!.nextRun === 'function'
  )
}

/** True for a cron `CronTime`. */
export function isCronTime(value: unknown): value is CronTimeLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<CronTimeLike>).getNextDateFrom === 'function'
  )
}

/** True for a cron `CronJob` (also the `this` of its `onTick`, unless it was given a `context`). */
export function isCronJob(value: unknown): value is CronJobLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    isCronTime((value as Partial<CronJobLike>).cronTime) &&
    typeof (value as Partial<CronJobLike>).lastDate === 'function'
  )
}

/** True for a node-cron 4 `ScheduledTask`. */
export function isNodeCronTask(value: unknown): value is NodeCronTaskLike {
  const task = value as Partial<NodeCronTaskLike> | null
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof task!.match === 'function' &&
    typeof task!.execute === 'function'
  )
}
