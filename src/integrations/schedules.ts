import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { type Clock, systemClock } from '../core/clock.ts'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'

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
  readonly options?: { readonly interval?: number | undefined } | undefined
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

// Bounds: how far back a fire time is searched for, and how many a window may hold.
const LOOKBACK_LIMIT_MS = 8 * 366 * 86_400_000
const FIRE_TIMES_LIMIT = 1_000_000

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

/** What node-cron 4 passes its task: the scheduled fire time (`date`) and why it runs. */
interface NodeCronContextLike {
  readonly date: Date
  readonly task: object
  readonly execution?: { readonly reason?: string } | undefined
}

function isNodeCronContext(value: unknown): value is NodeCronContextLike {
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

/** The latest fire time of a cron `CronTime` at or before `at`, or `undefined` when there is none. */
export function cronLatestFireTime(cronTime: CronTimeLike, at: Date): Date | undefined {
  if (cronTime.realDate) {
    const once = oneOffDate(cronTime.source)
    return once && once.getTime() <= at.getTime() ? once : undefined
  }
  return latestFireTime(cronNext(cronTime), at)
}

/** The first fire time of a cron `CronTime` after `date`'s whole second, in the job's zone. */
function cronNext(cronTime: CronTimeLike): (date: Date) => Date | undefined {
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

/**
 * A `slot` function for `setInterval` (and `@Interval`): the start of the current interval on
 * this host's clock, `floor(now / period) * period`, the same on every node whose clock agrees.
 *
 * ```ts
 * setInterval(withLock(provider, { name: 'sync', lockAtMostFor: '4m', slot: intervalSlot('5m'), onError }, sync), 5 * 60_000)
 * ```
 *
 * Limits: `setInterval` timers are not aligned across nodes; each node's tick falls somewhere in
 * the interval, and every tick of one interval is the same slot, so the task runs once per
 * interval (as long as some node ticks in it). A tick close to an interval's boundary is counted
 * in the neighbouring interval by a node whose clock is off by more than the tick's distance to
 * the boundary (the interval's slack): two runs may then come closer together than `period`, or
 * an interval may get none. Keep clocks synchronized (NTP), and prefer a cron schedule when runs
 * must fall at given times. See docs/slots.md.
 *
 * @param period the interval, in milliseconds or a duration string; more than 0.
 * @param clock the clock to read (tests). @default systemClock
 * @throws LockConfigurationError for a period that is not a positive duration.
 */
export function intervalSlot(period: Duration, clock: Clock = systemClock): () => Date {
  let ms: number
  try {
    ms = parseDuration(period)
  } catch (error) {
    throw new LockConfigurationError(`intervalSlot(): ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
  if (!(ms > 0))
    throw new LockConfigurationError(`intervalSlot(): the period must be more than 0, got ${JSON.stringify(period)}`)
  return () => new Date(Math.floor(clock.now() / ms) * ms)
}

/** What `import('cron')` gives: its `CronTime` class. */
interface CronModuleLike {
  CronTime?: CronTimeConstructor
  default?: { CronTime?: CronTimeConstructor }
}

/** cron's `CronTime` constructor: `new CronTime(source, timeZone?, utcOffset?)`. */
export type CronTimeConstructor = new (
  source: unknown,
  timeZone?: string | null,
  utcOffset?: number | null,
) => CronTimeLike

let cronTimeClass: Promise<CronTimeConstructor> | undefined

/**
 * cron's `CronTime`, imported at first use: the package that `@nestjs/schedule` runs on, found
 * from this package or next to `@nestjs/schedule`. Never a dependency of shedlock.
 *
 * @throws LockConfigurationError when neither finds it.
 */
export function loadCronTime(): Promise<CronTimeConstructor> {
  cronTimeClass ??= importCronTime().catch((error: unknown) => {
    cronTimeClass = undefined
    throw new LockConfigurationError(
      'slot: true and catch-up of @Cron methods compute fire times with the "cron" package (what @nestjs/schedule runs on), which could not be imported; install it (npm i cron) or pass slot: (...args) => Date',
      { cause: error },
    )
  })
  return cronTimeClass
}

async function importCronTime(): Promise<CronTimeConstructor> {
  // A variable specifier: TypeScript does not resolve it, and bundlers leave it alone.
  const specifier = 'cron'
  let module: CronModuleLike
  try {
    module = (await import(specifier)) as CronModuleLike
  } catch (error) {
    // Not resolvable from here (a nested install): next to @nestjs/schedule, whose dependency it is.
    try {
      const schedule = import.meta.resolve('@nestjs/schedule')
      module = (await import(pathToFileURL(createRequire(schedule).resolve(specifier)).href)) as CronModuleLike
    } catch {
      throw error
    }
  }
  const CronTime = module.CronTime ?? module.default?.CronTime
  if (typeof CronTime !== 'function') throw new Error('the "cron" package has no CronTime export')
  return CronTime
}
