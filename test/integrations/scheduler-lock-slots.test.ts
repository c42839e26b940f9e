import 'reflect-metadata'
import { Cron as NestCron, Interval as NestInterval } from '@nestjs/schedule'
import { Cron } from 'croner'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { ExecutorClosedError, LockConfigurationError } from '../../src/core/errors.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { slotRecordName } from '../../src/core/slots.ts'
import {
  catchUpSchedulerLock,
  closeSchedulerLock,
  configureSchedulerLock,
  resetSchedulerLock,
  SchedulerLock,
} from '../../src/integrations/scheduler-lock.ts'
import { taskContext } from '../../src/integrations/task-context.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider, inMemoryRunLedger } from '../../src/providers/in-memory/index.ts'
import type * as Fixture from '../fixtures/decorators/slots.ts'
import { deferred, recordingListener } from '../helpers/fakes.ts'
import { listingStore } from '../helpers/listing-store.ts'
import { importCompiled, removeCompiled } from './support/compile-decorators.ts'

const FIXTURE = new URL('../fixtures/decorators/slots.ts', import.meta.url)
const lib: Fixture.SlotLibrary = {
  SchedulerLock,
  taskContext,
  Cron: NestCron as unknown as Fixture.SlotLibrary['Cron'],
  Interval: NestInterval as unknown as Fixture.SlotLibrary['Interval'],
}

afterAll(removeCompiled)

let Jobs: ReturnType<typeof Fixture.defineJobs>
let fixture: typeof Fixture
beforeAll(async () => {
  fixture = await importCompiled<typeof Fixture>(FIXTURE, 'legacy')
  Jobs = fixture.defineJobs(lib)
})

let provider: LockProvider & { inspect?: (name: string) => unknown }
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] })
  provider = inMemoryLockProvider()
  configureSchedulerLock({ provider, defaultLockAtMostFor: '1m' })
})
afterEach(() => {
  resetSchedulerLock()
  vi.useRealTimers()
})

const now = (value: string) => vi.setSystemTime(new Date(value))

describe('@SchedulerLock({ slot: true }) on a @Cron method: the latest fire time of its @Cron at or before the call', () => {
  it("records its @Cron's next fire time with each run, for overdue tasks; a method without @Cron records none", async () => {
    const runLedger = inMemoryRunLedger()
    configureSchedulerLock({ provider: createLockingTaskExecutor(provider, { runLedger }), defaultLockAtMostFor: '1m' })
    now('2026-12-07T10:03:00.000Z')
    const jobs = new Jobs()
    await jobs.everyTen()
    await jobs.byFunction('2026-12-07')
    expect((await runLedger.history('every-ten'))[0]?.nextFireAt).toEqual(new Date('2026-12-07T10:10:00.000Z'))
    expect((await runLedger.history('by-function'))[0]?.nextFireAt).toBeUndefined()
  })

  it('with @Cron below, in its time zone: each fire once, however late a node calls it', async () => {
    const [a, b] = [new Jobs(), new Jobs()]
    now('2026-11-24T09:05:01.700Z') // 10:05:01.7 in Berlin
    await a.cronBelow()
    now('2026-11-24T09:05:03.000Z') // another node, later, after the lock was released
    await expect(b.cronBelow()).resolves.toBeUndefined()
    now('2026-11-24T09:10:00.200Z')
    await b.cronBelow()
    expect([...a.runs, ...b.runs]).toEqual(['cronBelow 2026-11-24T09:05:00.000Z', 'cronBelow 2026-11-24T09:10:00.000Z'])
  })

  it('with @Cron above, with its utcOffset', async () => {
    const jobs = new Jobs()
    now('2026-11-24T01:00:02.000Z') // 03:00:02 at UTC+2
    await jobs.cronAbove()
    expect(jobs.runs).toEqual(['cronAbove 2026-11-24T01:00:00.000Z'])
  })

  it('a slot function: the slot it returns', async () => {
    const jobs = new Jobs()
    await jobs.byFunction('2026-11-24')
    await expect(jobs.byFunction('2026-11-24')).resolves.toBeUndefined()
    expect(jobs.runs).toEqual(['byFunction 2026-11-24 2026-11-24T00:00:00.000Z'])
  })

  it('without @Cron the call rejects with LockConfigurationError, and never runs without its slot', async () => {
    await expect(new Jobs().noCron()).rejects.toThrow(LockConfigurationError)
    await expect(new Jobs().noCron()).rejects.toThrow(/Jobs\.noCron\(\).*need @Cron/)
  })

  it('is refused where the class is defined with @Interval below, and with standard decorators', async () => {
    expect(() => fixture.defineIntervalSlot(lib)).toThrow(
      /IntervalJobs\.tick\(\).*@Interval and @Timeout have no fire times/,
    )
    const standard = await importCompiled<typeof Fixture>(FIXTURE, 'standard')
    expect(() => standard.defineStandardSlot(lib)).toThrow(/needs legacy decorators/)
  })

  it('refuses bad slot options where the class is defined', () => {
    const decorate = (options: Parameters<typeof SchedulerLock>[0]) => () =>
      SchedulerLock(options)({}, 'm', { value: async () => {} })
    expect(decorate({ name: 'n', slot: 'yes' as unknown as true })).toThrow(/slot must be true/)
    expect(decorate({ name: 'n', catchUp: { policy: 'all', within: '1h' } })).toThrow(/catchUp needs slot/)
    expect(decorate({ name: () => 'n', slot: () => new Date(), catchUp: { policy: 'all', within: '1h' } })).toThrow(
      /fixed lock name/,
    )
    expect(
      decorate({ name: 'n', slot: () => new Date(), slotRetention: '1h', catchUp: { policy: 'all', within: '2h' } }),
    ).toThrow(/longer than slotRetention/)
  })
})

describe('catchUpSchedulerLock', () => {
  beforeEach(() => {
    provider = listingStore().provider
    configureSchedulerLock({ provider, defaultLockAtMostFor: '1m' })
  })

  it("runs the missed fire times of the method's @Cron (with cron's CronTime), this = the instance, taskContext().slot each", async () => {
    const jobs = new Jobs()
    now('2026-11-24T10:00:00.500Z')
    await jobs.everyTen()
    now('2026-11-24T10:35:10.000Z')
    const result = await catchUpSchedulerLock(jobs, 'everyTen')
    expect(result.outcome).toBe('ran')
    expect(jobs.runs).toEqual(['10:00', '10:10', '10:20', '10:30'].map((t) => `everyTen 2026-11-24T${t}:00.000Z`))
    expect((await catchUpSchedulerLock(jobs, 'everyTen')).outcome).toBe('nothing-missed')
  })

  it('with a schedule given (a croner Cron here)', async () => {
    const jobs = new Jobs()
    now('2026-11-24T10:00:00.500Z')
    await jobs.everyTen()
    now('2026-11-24T10:21:00.000Z')
    const every15 = new Cron('0 */15 * * * *', { paused: true, timezone: 'UTC' })
    await catchUpSchedulerLock(jobs, 'everyTen', every15)
    expect(jobs.runs.at(-1)).toBe('everyTen 2026-11-24T10:15:00.000Z')
  })

  it('a method without catchUp does nothing; a method without @SchedulerLock is refused', async () => {
    await expect(catchUpSchedulerLock(new Jobs(), 'cronBelow')).resolves.toMatchObject({ outcome: 'skipped' })
    await expect(catchUpSchedulerLock(new Jobs(), 'record')).rejects.toThrow(
      /Jobs\.record is not a method with @SchedulerLock/,
    )
  })
})

describe('configureSchedulerLock() returns its executors; closeSchedulerLock() closes them', () => {
  it('executor(): the default provider, or a named one, with the configured listener', async () => {
    const listener = recordingListener()
    const a = inMemoryLockProvider()
    const b = inMemoryLockProvider()
    const configuration = configureSchedulerLock({
      providers: { a, b },
      provider: a,
      listener,
      defaultLockAtMostFor: '1m',
    })
    await configuration.executor('b').executeWithLock(() => {}, { name: 'outside', lockAtMostFor: '1m' })
    expect(listener.log).toContain('onLockAcquired outside')
    expect(configuration.executor()).toBe(configuration.executor())
    expect(() => configuration.executor('missing')).toThrow(/no lock provider named "missing"/)
  })

  it('closeSchedulerLock(): a running method is aborted (ExecutorClosedError) and resolves to undefined, its lock released; later calls do not run', async () => {
    vi.useRealTimers()
    const jobs = new Jobs()
    const started = deferred()
    const call = jobs.slow(() => started.resolve())
    await started.promise
    expect(await provider.lock(lockConfiguration({ name: 'slow', lockAtMostFor: '1m' }))).toBeUndefined()
    // A call while it runs is skipped (held), as always.
    let ranTwice = false
    const overlapping = jobs.slow(() => {
      ranTwice = true
    })
    await closeSchedulerLock({ timeout: '5s' })
    await expect(call).resolves.toBeUndefined()
    await expect(overlapping).resolves.toBeUndefined()
    expect(ranTwice).toBe(false)
    expect(await provider.lock(lockConfiguration({ name: 'slow', lockAtMostFor: '1m' }))).toBeDefined()
    await expect(jobs.slow(() => {})).resolves.toBeUndefined()
    await expect(catchUpSchedulerLock(jobs, 'everyTen')).resolves.toMatchObject({ outcome: 'skipped' })
  })

  it('the abort reason a running method sees is ExecutorClosedError', async () => {
    vi.useRealTimers()
    const seen: unknown[] = []
    // The decorator applied by hand (legacy form): vitest's transform leaves decorators as they are.
    const descriptor = {
      value: async (started: () => void): Promise<void> => {
        const { signal } = taskContext()
        signal.addEventListener('abort', () => seen.push(signal.reason))
        started()
        await new Promise((resolve) => signal.addEventListener('abort', resolve))
      },
    }
    const watch = SchedulerLock({ name: 'watch', lockAtMostFor: '1m' })({}, 'watch', descriptor).value!
    const started = deferred()
    const call = watch(() => started.resolve())
    await started.promise
    await closeSchedulerLock()
    await call
    expect(seen[0]).toBeInstanceOf(ExecutorClosedError)
  })

  it('resolves at once when nothing is configured', async () => {
    resetSchedulerLock()
    await expect(closeSchedulerLock()).resolves.toBeUndefined()
  })
})

it('the slot record is the lock record <name>@<slot>', async () => {
  const memory = inMemoryLockProvider()
  configureSchedulerLock({ provider: memory, defaultLockAtMostFor: '1m' })
  now('2026-11-24T09:05:01.700Z')
  await new Jobs().cronBelow()
  expect(memory.inspect(slotRecordName('cron-below', new Date('2026-11-24T09:05:00Z')))).toBeDefined()
  expect(slotRecordName('cron-below', new Date('2026-11-24T09:05:00Z'))).toBe('cron-below@20261124T090500Z')
})
