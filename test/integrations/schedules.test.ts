import { CronJob, CronTime } from 'cron'
import { Cron } from 'croner'
import cron from 'node-cron'
import schedule from 'node-schedule'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../src/core/errors.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import {
  type CatchUpSchedule,
  cronLatestFireTime,
  type CronerJobLike,
  type CronJobLike,
  type CronTimeLike,
  fireTimesOf,
  intervalSlot,
  latestFireTime,
  loadCronTime,
  nominalFireTime,
  type NodeCronTaskLike,
} from '../../src/integrations/schedules.ts'
import { taskContext } from '../../src/integrations/task-context.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { manualClock } from '../helpers/fakes.ts'

const iso = (date: Date | undefined): string | undefined => date?.toISOString()
const at = (value: string): Date => new Date(value)

// The structural types accept the real schedulers (compile-time checks).
const cronerJob = new Cron('0 * * * * *', { paused: true })
cronerJob.stop()
const croner: CronerJobLike = cronerJob
const cronJob: CronJobLike = CronJob.from({ cronTime: '0 * * * * *', onTick: () => {}, start: false })
const cronTime: CronTimeLike = new CronTime('0 * * * * *')
const nodeCronTask: NodeCronTaskLike = cron.createTask('* * * * *', () => {})
const schedules: CatchUpSchedule[] = [cronJob, cronTime, nodeCronTask, croner]
void schedules

const stop: Array<() => unknown> = []
afterEach(async () => {
  for (const fn of stop.splice(0)) await fn()
})

/** A croner job whose run in progress started at `started`: croner's own object, currentRun() replaced. */
function cronerRun(pattern: string, started: Date, options: ConstructorParameters<typeof Cron>[1] = {}): Cron {
  const job = new Cron(pattern, { paused: true, timezone: 'UTC', ...(options as object) })
  job.stop()
  return Object.assign(Object.create(job) as Cron, { currentRun: () => started })
}

/** A cron job whose tick started at `started`: its CronTime, lastDate() replaced. */
function cronTick(
  cronTime: string,
  started: Date,
  zone: { timeZone?: string; utcOffset?: number } = { timeZone: 'UTC' },
): CronJobLike {
  const job =
    zone.utcOffset === undefined
      ? CronJob.from({ cronTime, onTick: () => {}, start: false, timeZone: zone.timeZone ?? null })
      : CronJob.from({ cronTime, onTick: () => {}, start: false, utcOffset: zone.utcOffset })
  return { cronTime: job.cronTime, lastDate: () => started }
}

describe('the nominal fire time of a scheduler call (slot: true)', () => {
  describe('croner: the latest fire time at or before currentRun() (its actual start)', () => {
    it.each([
      ['a run that started 3 ms late', '2026-11-24T02:00:00.003Z', '2026-11-24T02:00:00.000Z'],
      [
        'a run that started exactly on time (previousRuns() alone would say 01:59)',
        '2026-11-24T02:00:00.000Z',
        '2026-11-24T02:00:00.000Z',
      ],
      ['a run that started 1.5 s late', '2026-11-24T02:00:01.500Z', '2026-11-24T02:00:00.000Z'],
      ['a run that started 59.9 s late', '2026-11-24T02:00:59.900Z', '2026-11-24T02:00:00.000Z'],
    ])('%s', (_, started, slot) => {
      expect(iso(nominalFireTime('t', undefined, [cronerRun('0 * * * * *', at(started))]))).toBe(slot)
    })

    it('with a time zone', () => {
      const berlin = cronerRun('0 30 2 * * *', at('2026-11-24T01:30:00.020Z'), { timezone: 'Europe/Berlin' })
      expect(iso(nominalFireTime('t', undefined, [berlin]))).toBe('2026-11-24T01:30:00.000Z')
    })

    it.each([
      ['02:00:05.000', '02:00:05'],
      ['02:00:05.010', '02:00:05'],
      ['02:00:09.999', '02:00:05'],
      ['02:00:10.000', '02:00:10'],
    ])(
      'with the interval option (previousRuns() looks from the reference moved back by the interval): started %s, slot %s',
      (started, slot) => {
        const interval = cronerRun('*/5 * * * * *', at(`2026-11-24T${started}Z`), { interval: 5 })
        expect(interval.previousRuns(1, at(`2026-11-24T${started}Z`))[0]!.getTime()).toBeLessThan(
          at(`2026-11-24T${slot}Z`).getTime(),
        )
        expect(iso(nominalFireTime('t', undefined, [interval]))).toBe(`2026-11-24T${slot}.000Z`)
      },
    )

    it('a one-off job (a Date): the date', () => {
      const once = new Cron(at('2030-01-01T00:00:00.000Z'), { paused: true })
      once.stop()
      expect(
        iso(
          nominalFireTime('t', undefined, [
            Object.assign(Object.create(once) as Cron, { currentRun: () => at('2030-01-01T00:00:00.004Z') }),
          ]),
        ),
      ).toBe('2030-01-01T00:00:00.000Z')
    })

    it('the whole second of the start, where croner matches it, without walking the pattern back', () => {
      const job = cronerRun('*/2 * * * * *', at('2026-11-24T02:00:04.012Z'), {
        startAt: at('2026-11-24T02:00:00.000Z'),
        stopAt: at('2026-11-24T02:01:00.000Z'),
      })
      const walked = Object.assign(job, {
        previousRuns: () => {
          throw new Error('previousRuns() was called')
        },
      })
      expect(iso(nominalFireTime('t', undefined, [walked]))).toBe('2026-11-24T02:00:04.000Z')
    })

    // The whole-second path against previousRuns() (a job without match() takes it): the same slot
    // for every start, over patterns, time zones, day rules and options where croner fires.
    it.each([
      ['* * * * * *', {}],
      ['*/2 * * * * *', {}],
      ['0 * * * * *', {}],
      ['0 30 2 * * *', { timezone: 'Europe/Berlin' }],
      ['0 0 12 * * MON', { timezone: 'America/New_York' }],
      ['0 0 0 L * *', {}],
      ['0 0 0 1 * MON', { legacyMode: false }],
      ['*/3 * * * * *', { startAt: at('2026-03-29T00:59:58.500Z'), stopAt: at('2026-03-29T01:00:04.000Z') }],
      ['*/15 * * * * *', { dayOffset: -1 }],
      ['*/5 * * * * *', { interval: 5 }],
    ] as const)('%s %o: the same slot as previousRuns()', (pattern, options) => {
      const starts = [
        '2026-03-29T00:59:59.999Z', // Berlin's spring-forward hour
        '2026-03-29T01:00:00.000Z',
        '2026-03-29T01:00:00.004Z',
        '2026-03-29T01:00:01.500Z',
        '2026-03-29T01:00:03.000Z',
        '2026-03-29T01:00:06.010Z',
        '2026-11-23T17:00:00.020Z', // a Monday noon in New York
        '2026-11-30T00:00:00.001Z',
        '2026-12-01T00:00:00.003Z', // a Tuesday, first of the month
        '2027-01-01T00:00:00.000Z',
      ]
      for (const started of starts) {
        const job = cronerRun(pattern, at(started), options)
        const walked = Object.assign(Object.create(job) as Cron, { match: undefined })
        const slot = (j: Cron): string | Error => {
          try {
            return iso(nominalFireTime('t', undefined, [j]))!
          } catch (error) {
            return error as Error
          }
        }
        expect(slot(job), `started ${started}`).toEqual(slot(walked))
      }
    })

    it('a job with no current run is refused', () => {
      const job = new Cron('* * * * * *', { paused: true })
      job.stop()
      expect(() => nominalFireTime('t', undefined, [job])).toThrow(/no current run/)
    })
  })

  describe('cron: the latest fire time at or before lastDate(), found with getNextDateFrom()', () => {
    it.each([
      ['every minute, 3 ms late', '0 * * * * *', '2026-11-24T02:00:00.003Z', '2026-11-24T02:00:00.000Z'],
      ['every minute, exactly on time', '0 * * * * *', '2026-11-24T02:00:00.000Z', '2026-11-24T02:00:00.000Z'],
      ['every minute, 1.7 s late', '0 * * * * *', '2026-11-24T02:00:01.700Z', '2026-11-24T02:00:00.000Z'],
      ['every minute, 40 s late', '0 * * * * *', '2026-11-24T02:00:40.000Z', '2026-11-24T02:00:00.000Z'],
      ['every second, 400 ms late', '* * * * * *', '2026-11-24T02:00:07.400Z', '2026-11-24T02:00:07.000Z'],
      ['daily, 3 hours late', '0 0 2 * * *', '2026-11-24T05:00:00.000Z', '2026-11-24T02:00:00.000Z'],
      ['monthly, 10 days late', '0 0 0 1 * *', '2026-11-11T00:00:00.000Z', '2026-11-01T00:00:00.000Z'],
      ['yearly, 300 days late', '0 0 0 1 1 *', '2026-10-28T00:00:00.000Z', '2026-01-01T00:00:00.000Z'],
    ])('%s', (_, expression, started, slot) => {
      expect(iso(nominalFireTime('t', cronTick(expression, at(started)), [undefined]))).toBe(slot)
    })

    it("in the job's time zone, or its utcOffset", () => {
      expect(
        iso(
          nominalFireTime(
            't',
            cronTick('0 30 2 * * *', at('2026-11-24T01:30:00.800Z'), { timeZone: 'Europe/Berlin' }),
            [],
          ),
        ),
      ).toBe('2026-11-24T01:30:00.000Z')
      expect(
        iso(
          nominalFireTime(
            't',
            cronTick('0 30 2 * * *', at('2026-06-24T00:30:01.000Z'), { timeZone: 'Europe/Berlin' }),
            [],
          ),
        ),
      ).toBe('2026-06-24T00:30:00.000Z')
      expect(
        iso(nominalFireTime('t', cronTick('0 0 3 * * *', at('2026-11-24T01:00:00.300Z'), { utcOffset: 120 }), [])),
      ).toBe('2026-11-24T01:00:00.000Z')
      expect(
        iso(nominalFireTime('t', cronTick('0 0 3 * * *', at('2026-11-24T07:30:00.300Z'), { utcOffset: -270 }), [])),
      ).toBe('2026-11-24T07:30:00.000Z')
    })

    it('a job without lastDate() (fireOnTick() by hand before its first tick) is refused', () => {
      const job = CronJob.from({ cronTime: '* * * * * *', onTick: () => {}, start: false })
      expect(() => nominalFireTime('t', job, [])).toThrow(LockConfigurationError)
      expect(() => nominalFireTime('t', job, [])).toThrow(/lastDate/)
    })
  })

  it('node-schedule: the fire date it passes; node-cron: the date of its context when scheduled', () => {
    const fireDate = at('2026-11-24T02:00:00.000Z')
    expect(nominalFireTime('t', undefined, [fireDate])).toBe(fireDate)
    const task = cron.createTask('* * * * *', () => {})
    const context = {
      date: fireDate,
      dateLocalIso: '',
      triggeredAt: new Date(),
      task,
      execution: { id: '1', reason: 'scheduled' },
    }
    expect(nominalFireTime('t', undefined, [context])).toBe(fireDate)
    expect(() => nominalFireTime('t', undefined, [{ ...context, execution: { id: '2', reason: 'invoked' } }])).toThrow(
      /by hand/,
    )
  })

  it('a call that carries no fire time is refused with a LockConfigurationError that says what to do', () => {
    for (const args of [[], ['x'], [{ date: 'no' }]]) {
      expect(() => nominalFireTime('withLock() of lock "a"', { unrelated: true }, args)).toThrow(LockConfigurationError)
    }
    expect(() => nominalFireTime('withLock() of lock "a"', undefined, [])).toThrow(
      /pass slot: \(\.\.\.args\) => Date instead/,
    )
    expect(() => nominalFireTime('t', undefined, [new Date(Number.NaN)])).toThrow(/Invalid Date/)
  })
})

describe('latestFireTime', () => {
  const everyTenSeconds = (date: Date): Date => new Date(Math.floor(date.getTime() / 10_000) * 10_000 + 10_000)
  it('walks back in growing steps, then forward to the latest fire time at or before the instant', () => {
    expect(iso(latestFireTime(everyTenSeconds, at('2026-11-24T02:00:19.999Z')))).toBe('2026-11-24T02:00:10.000Z')
    expect(iso(latestFireTime(everyTenSeconds, at('2026-11-24T02:00:20.000Z')))).toBe('2026-11-24T02:00:20.000Z')
  })
  it('is undefined for a schedule with no fire time before the instant', () => {
    expect(latestFireTime(() => at('2100-01-01T00:00:00Z'), at('2026-11-24T02:00:00Z'))).toBeUndefined()
    expect(latestFireTime(() => undefined, at('2026-11-24T02:00:00Z'))).toBeUndefined()
  })
  it("cron's one-off CronTime: its date once passed", () => {
    const once = new CronTime(at('2020-01-01T00:00:00Z'))
    expect(iso(cronLatestFireTime(once, at('2026-01-01T00:00:00Z')))).toBe('2020-01-01T00:00:00.000Z')
    expect(cronLatestFireTime(once, at('2019-01-01T00:00:00Z'))).toBeUndefined()
  })
})

describe('fireTimesOf: fire times from the scheduler itself, both ends included', () => {
  const from = at('2026-11-24T02:00:00.000Z')
  const to = at('2026-11-24T02:05:00.000Z')
  const minutes = [0, 1, 2, 3, 4, 5].map((m) => `2026-11-24T02:0${m}:00.000Z`)

  it.each<[string, () => CatchUpSchedule]>([
    ['croner Cron', () => new Cron('0 * * * * *', { paused: true, timezone: 'UTC' })],
    ['cron CronJob', () => CronJob.from({ cronTime: '0 * * * * *', onTick: () => {}, start: false, timeZone: 'UTC' })],
    ['cron CronTime', () => new CronTime('0 * * * * *', 'UTC')],
    ['node-cron ScheduledTask (five fields)', () => cron.createTask('* * * * *', () => {}, { timezone: 'UTC' })],
    ['node-cron ScheduledTask (six fields)', () => cron.createTask('*/30 * * * * *', () => {}, { timezone: 'UTC' })],
    [
      'a function (node-schedule: RecurrenceRule.nextInvocationDate)',
      () =>
        nodeScheduleFireTimes(
          new schedule.RecurrenceRule(undefined, undefined, undefined, undefined, undefined, undefined, 0, 'UTC'),
        ),
    ],
  ])('%s', (kind, make) => {
    const times = fireTimesOf(make())(from, to).map(iso)
    if (kind.includes('six fields'))
      expect(times).toEqual(minutes.flatMap((m, i) => (i === 5 ? [m] : [m, m.replace(':00.000Z', ':30.000Z')])))
    else expect(times).toEqual(minutes)
    // From inside a second: the fire at its start is before `from`.
    expect(fireTimesOf(make())(new Date(from.getTime() + 1), to).map(iso)[0]).toBe(
      kind.includes('six fields') ? '2026-11-24T02:00:30.000Z' : minutes[1],
    )
  })

  it("in the scheduler's time zone", () => {
    const day = [at('2026-11-23T00:00:00Z'), at('2026-11-25T00:00:00Z')] as const
    const expected = ['2026-11-23T01:30:00.000Z', '2026-11-24T01:30:00.000Z']
    expect(fireTimesOf(new Cron('0 30 2 * * *', { paused: true, timezone: 'Europe/Berlin' }))(...day).map(iso)).toEqual(
      expected,
    )
    expect(
      fireTimesOf(CronJob.from({ cronTime: '0 30 2 * * *', onTick: () => {}, timeZone: 'Europe/Berlin' }))(...day).map(
        iso,
      ),
    ).toEqual(expected)
    expect(
      fireTimesOf(CronJob.from({ cronTime: '0 30 3 * * *', onTick: () => {}, utcOffset: 120 }))(...day).map(iso),
    ).toEqual(expected)
    expect(
      fireTimesOf(cron.createTask('30 2 * * *', () => {}, { timezone: 'Europe/Berlin' }))(...day).map(iso),
    ).toEqual(expected)
  })

  it('refuses anything else', () => {
    expect(() => fireTimesOf({} as CatchUpSchedule)).toThrow(LockConfigurationError)
    expect(() => fireTimesOf(null as unknown as CatchUpSchedule)).toThrow(/croner Cron, a cron CronJob/)
  })
})

/** node-schedule has no enumeration of past fire times; a RecurrenceRule can give its next one. */
function nodeScheduleFireTimes(rule: schedule.RecurrenceRule) {
  return (from: Date, to: Date): Date[] => {
    const out: Date[] = []
    for (
      let next = rule.nextInvocationDate(new Date(from.getTime() - 1));
      next && next <= to;
      next = rule.nextInvocationDate(next)
    )
      out.push(next)
    return out
  }
}

describe('intervalSlot', () => {
  it('is the start of the current interval on the clock: the same for every tick within it', () => {
    const clock = manualClock(Date.UTC(2026, 10, 24, 2, 3, 17))
    const slot = intervalSlot('5m', clock)
    expect(iso(slot())).toBe('2026-11-24T02:00:00.000Z')
    clock.advance(60_000)
    expect(iso(slot())).toBe('2026-11-24T02:00:00.000Z')
    clock.set(Date.UTC(2026, 10, 24, 2, 5, 0))
    expect(iso(slot())).toBe('2026-11-24T02:05:00.000Z')
  })
  it('refuses a period that is not a positive duration', () => {
    expect(() => intervalSlot(0)).toThrow(LockConfigurationError)
    expect(() => intervalSlot('soon' as '1m')).toThrow(LockConfigurationError)
  })
})

it('loadCronTime() imports the CronTime of the cron package', async () => {
  expect(await loadCronTime()).toBe(CronTime)
})

// Real time: each scheduler fires every 2 s; the first run blocks the event loop past the next
// fire time, so that the scheduler's timer fires late, as on a loaded machine.
describe('a timer that fires late still yields its nominal fire time (real schedulers, real time)', () => {
  interface Seen {
    slot: number
    at: number
  }
  const busyUntil = (ms: number): void => {
    while (Date.now() < ms) {
      // blocks the event loop
    }
  }

  /** The locked task: records its slot and when it ran; the first run blocks until `lateBy` ms past the next fire time. */
  function task(seen: Seen[], lateBy: number): () => void {
    return () => {
      const slot = taskContext().slot!.getTime()
      seen.push({ slot, at: Date.now() })
      if (seen.length === 1) busyUntil(slot + 2000 + lateBy)
    }
  }

  async function expectLate(seen: Seen[], lateBy: number): Promise<void> {
    for (let i = 0; i < 100 && seen.length < 2; i++) await sleep(100)
    expect(seen.length).toBeGreaterThanOrEqual(2)
    const [first, second] = seen as [Seen, Seen]
    expect(first.slot % 2000).toBe(0)
    expect(second.slot).toBe(first.slot + 2000)
    expect(second.at - second.slot).toBeGreaterThanOrEqual(lateBy - 5)
  }

  it('croner: 1.3 s late', async () => {
    const seen: Seen[] = []
    const locked = withLock(
      inMemoryLockProvider(),
      { name: 'croner-late', lockAtMostFor: '10s', slot: true },
      task(seen, 1300),
    )
    const job = new Cron('*/2 * * * * *', { timezone: 'UTC' }, locked)
    stop.push(() => job.stop())
    await expectLate(seen, 1300)
  })

  it('cron: 1.3 s late', async () => {
    const seen: Seen[] = []
    const locked = withLock(
      inMemoryLockProvider(),
      { name: 'cron-late', lockAtMostFor: '10s', slot: true },
      task(seen, 1300),
    )
    const job = CronJob.from({ cronTime: '*/2 * * * * *', onTick: locked, start: true, timeZone: 'UTC' })
    stop.push(() => job.stop())
    await expectLate(seen, 1300)
  })

  it('node-schedule: 1.3 s late', async () => {
    const seen: Seen[] = []
    const locked = withLock(
      inMemoryLockProvider(),
      { name: 'node-schedule-late', lockAtMostFor: '10s', slot: true },
      task(seen, 1300),
    )
    const job = schedule.scheduleJob({ rule: '*/2 * * * * *', tz: 'UTC' }, locked)
    stop.push(() => job.cancel())
    await expectLate(seen, 1300)
  })

  it('node-cron: 0.7 s late (it skips a fire later than its missedExecutionTolerance, 1 s)', async () => {
    const seen: Seen[] = []
    const locked = withLock(
      inMemoryLockProvider(),
      { name: 'node-cron-late', lockAtMostFor: '10s', slot: true },
      task(seen, 700),
    )
    const scheduled = cron.schedule('*/2 * * * * *', locked, { timezone: 'UTC' })
    stop.push(() => scheduled.destroy())
    await expectLate(seen, 700)
  })
})
