import { LockConfigurationError } from '../core/errors.ts'
import {
  type CatchUpSchedule,
  type CronTimeLike,
  type DateTimeLike,
  isCronerJob,
  isCronJob,
  isCronTime,
  isNodeCronTask,
  type NodeCronTaskLike,
} from './scheduler-types.ts'

// Bounds: how far back a fire time is searched for, and how many a window may hold.
const LOOKBACK_LIMIT_MS = 8 * 366 * 86_400_000
const FIRE_TIMES_LIMIT = 1_000_000

/** The latest fire time of a cron `CronTime` at or before `at`, or `undefined` when there is none. */
export function cronLatestFireTime(cronTime: CronTimeLike, at: Date): Date | undefined {
  if (cronTime.realDate) {
    const once = oneOffDate(cronTime.source)
    return once && once.getTime() <= at.getTime() ? once : undefined
  }
  return latestFireTime(cronNext(cronTime), at)
}

/** The first fire time of a cron `CronTime` after `date`'s whole second, in the job's zone. */
export function cronNext(cronTime: CronTimeLike): (date: Date) => Date | undefined {
  const zone = cronZone(cronTime)
  return (date) => {
    try {
      const next = cronTime.getNextDateFrom(date, zone)
      const js = next instanceof Date ? next : next.toJSDate()
      return Number.isNaN(js.getTime()) ? undefined : js
    } catch {
      // cron throws when no fire time is found within 8 years
      return undefined
    }
  }
}

/** The zone cron computes fire times in: its `timeZone`, else its `utcOffset` as luxon names it. */
function cronZone(cronTime: CronTimeLike): string | undefined {
  if (typeof cronTime.timeZone === 'string' && cronTime.timeZone !== '') return cronTime.timeZone
  const offset = cronTime.utcOffset
  if (typeof offset !== 'number') return undefined
  const sign = offset < 0 ? '-' : '+'
  const hours = Math.trunc(Math.abs(offset) / 60)
  const minutes = Math.abs(offset) - hours * 60
  return `UTC${sign}${String(hours).padStart(2, '0')}:${String(minutes).padStart(2, '0')}`
}

function oneOffDate(source: unknown): Date | undefined {
  if (source instanceof Date) return source
  if (typeof source === 'object' && source !== null && typeof (source as DateTimeLike).toJSDate === 'function')
    return (source as DateTimeLike).toJSDate()
  return undefined
}

/**
 * The latest fire time at or before `at`, with only `next(date)` (the first fire time after
 * `date`) to ask: back from `at` in growing steps until a fire time at or before `at` shows up,
 * then forward through the fire times up to `at`. A timer that fired late (a loaded machine, a
 * long GC pause) still maps to the fire time it was for, unless it is later than the next one.
 */
export function latestFireTime(next: (date: Date) => Date | undefined, at: Date): Date | undefined {
  const end = at.getTime()
  let found: number | undefined
  for (let step = 1000; step <= LOOKBACK_LIMIT_MS * 2; step *= 2) {
    const candidate = next(new Date(end - Math.min(step, LOOKBACK_LIMIT_MS)))
    if (candidate && candidate.getTime() <= end) {
      found = candidate.getTime()
      break
    }
    if (step >= LOOKBACK_LIMIT_MS) break
  }
  if (found === undefined) return undefined
  for (let i = 0; i < FIRE_TIMES_LIMIT; i++) {
    const following = next(new Date(found))
    if (!following || following.getTime() <= found || following.getTime() > end) break
    found = following.getTime()
  }
  return new Date(found)
}

/**
 * The fire times of `schedule` from `from` to `to` (both included), oldest first, as the
 * scheduler itself computes them: what a catch-up runs. Pass it as `fireTimes` to
 * `executor.catchUp()`.
 *
 * - croner `Cron`: its `nextRun()`;
 * - cron `CronJob` or `CronTime`: its `getNextDateFrom()`, in the job's time zone or UTC offset;
 * - node-cron 4 `ScheduledTask`: its `match()`, second by second (minute by minute when its
 *   pattern has a fixed second);
 * - a function `(from, to) => Iterable<Date>`: itself (node-schedule, or any other scheduler).
 *
 * @throws LockConfigurationError for anything else.
 */
export function fireTimesOf(schedule: CatchUpSchedule): (from: Date, to: Date) => Date[] {
  if (typeof schedule === 'function') {
    return (from, to) => [...schedule(from, to)]
  }
  if (isCronerJob(schedule)) {
    return (from, to) => walk((date) => schedule.nextRun(date) ?? undefined, from, to)
  }
  if (isCronJob(schedule) || isCronTime(schedule)) {
    const cronTime = isCronJob(schedule) ? schedule.cronTime : schedule
    if (cronTime.realDate) {
      return (from, to) => {
        const once = oneOffDate(cronTime.source)
        return once && once >= from && once <= to ? [once] : []
      }
    }
    // getNextDateFrom() looks after the whole second of its start: a second before `from`.
    const next = cronNext(cronTime)
    return (from, to) => walk(next, new Date(Math.ceil(from.getTime() / 1000) * 1000 - 999), to)
  }
  if (isNodeCronTask(schedule)) {
    return (from, to) => nodeCronFireTimes(schedule, from, to)
  }
  throw new LockConfigurationError(
    `catchUp() needs the schedule's fire times: a croner Cron, a cron CronJob or CronTime, a node-cron ScheduledTask, or a function (from, to) => Date[]; got ${schedule === null ? 'null' : typeof schedule}`,
  )
}

/** The fire times `next()` yields after `from - 1 ms`, up to `to`. */
function walk(next: (date: Date) => Date | undefined, from: Date, to: Date): Date[] {
  const out: Date[] = []
  let cursor = new Date(from.getTime() - 1)
  while (out.length < FIRE_TIMES_LIMIT) {
    const fire = next(cursor)
    if (!fire || fire.getTime() > to.getTime() || fire.getTime() <= cursor.getTime()) break
    out.push(fire)
    cursor = fire
  }
  return out
}

/** node-cron has no enumeration from a past date: its `match()`, second by second. */
function nodeCronFireTimes(task: NodeCronTaskLike, from: Date, to: Date): Date[] {
  // A pattern whose seconds field is one number (five fields: 0) matches at that second only.
  const fields = typeof task.getPattern === 'function' ? task.getPattern().trim().split(/\s+/) : []
  const second =
    fields.length === 5 ? 0 : fields.length === 6 && /^\d{1,2}$/.test(fields[0]!) ? Number(fields[0]) : undefined
  const out: Date[] = []
  if (second !== undefined) {
    let t = Math.floor(from.getTime() / 60_000) * 60_000 + second * 1000
    if (t < from.getTime()) t += 60_000
    for (; t <= to.getTime() && out.length < FIRE_TIMES_LIMIT; t += 60_000)
      if (task.match(new Date(t))) out.push(new Date(t))
    return out
  }
  for (let t = Math.ceil(from.getTime() / 1000) * 1000; t <= to.getTime() && out.length < FIRE_TIMES_LIMIT; t += 1000) {
    if (task.match(new Date(t))) out.push(new Date(t))
  }
  return out
}
