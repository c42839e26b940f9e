import 'reflect-metadata'
import { Inject, Injectable, type INestApplicationContext, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { Cron } from '@nestjs/schedule'
import { fileURLToPath } from 'node:url'
import {
  ExecutorClosedError,
  fireTimesOf,
  inMemoryLockProvider,
  LockConfigurationError,
  lockConfiguration,
  type LockingTaskExecutor,
  type LockProvider,
  taskContext,
} from 'shedlock'
import { afterEach, describe, expect, it, vi } from 'vitest'
// The fake store of the root tests, over the built package's in-memory provider.
import { listingStore } from '../../../test/helpers/listing-store.ts'
import { startNode, waitFor } from '../../../test/helpers/processes.ts'
import {
  SchedulerLock,
  SHEDLOCK_EXECUTOR,
  ShedLockModule,
  type ShedLockModuleOptions,
  ShedLockService,
} from '../src/index.ts'

// In-process tests of the catch-up on bootstrap, the shutdown and the service, through Nest's own
// DI. vitest compiles this file with the package's tsconfig (legacy decorators).

const runs: string[] = []

@Injectable()
class Reports {
  @Cron('0 */10 * * * *', { timeZone: 'UTC' })
  @SchedulerLock({
    name: 'every-ten',
    lockAtMostFor: '1m',
    slot: true,
    slotRetention: '3d',
    catchUp: { policy: 'all', within: '1h' },
  })
  async everyTen(): Promise<void> {
    runs.push(`everyTen ${taskContext().slot?.toISOString()}`)
  }

  @SchedulerLock({
    name: 'nightly',
    lockAtMostFor: '1m',
    slot: true,
    slotRetention: '3d',
    catchUp: { policy: 'once', within: '2d' },
  })
  @Cron('0 0 3 * * *', { utcOffset: 60 })
  async nightly(): Promise<void> {
    runs.push(`nightly ${taskContext().slot?.toISOString()}`)
  }

  @SchedulerLock({ name: 'long', lockAtMostFor: '1m' })
  async long(started: () => void): Promise<void> {
    const { signal } = taskContext()
    started()
    await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
  }
}

@Injectable()
class WithoutCron {
  @SchedulerLock({ name: 'no-cron', slot: true })
  async tick(): Promise<void> {}
}

@Injectable()
class Outside {
  readonly shedlock: ShedLockService
  readonly executor: LockingTaskExecutor

  constructor(
    @Inject(ShedLockService) shedlock: ShedLockService,
    @Inject(SHEDLOCK_EXECUTOR) executor: LockingTaskExecutor,
  ) {
    this.shedlock = shedlock
    this.executor = executor
  }
}

let apps: INestApplicationContext[] = []
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close()
  runs.length = 0
  vi.useRealTimers()
})

async function start(
  options: ShedLockModuleOptions,
  providers: unknown[] = [Reports],
): Promise<INestApplicationContext> {
  @Module({ imports: [ShedLockModule.forRoot(options)], providers: providers as never[] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })
  apps.push(app)
  return app
}

const at = (value: string) => vi.setSystemTime(new Date(value))

describe('on bootstrap: the catch-up of every @Cron method with @SchedulerLock({ slot: true, catchUp })', () => {
  it('runs the fire times of its @Cron every node missed, by its policy; a node starting later finds nothing missed', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const { provider } = listingStore(undefined, inMemoryLockProvider)
    at('2026-11-24T02:00:01.000Z')
    // awaitCatchUp: the bootstrap's look for missed slots (nothing here, a new task) holds each
    // task's lock for a moment; the calls below must not race it and be skipped as held.
    const first = await start({ provider, defaultLockAtMostFor: '1m', awaitCatchUp: true })
    // Ran at their slots, before every node went down (02:00 UTC is 03:00 at UTC+1).
    await first.get(Reports).nightly()
    at('2026-11-24T10:00:00.400Z')
    await first.get(Reports).everyTen()
    expect(runs).toEqual(['nightly 2026-11-24T02:00:00.000Z', 'everyTen 2026-11-24T10:00:00.000Z'])
    await first.close()
    apps = []
    runs.length = 0

    at('2026-11-26T10:35:10.000Z')
    await start({ provider, defaultLockAtMostFor: '1m', awaitCatchUp: true })
    // everyTen: its latest slot is two days old, beyond within (1h): the last hour's fire times.
    // nightly missed 11-25 and 11-26 02:00 UTC.
    expect(runs.filter((run) => run.startsWith('everyTen'))).toEqual(
      ['09:40', '09:50', '10:00', '10:10', '10:20', '10:30'].map((time) => `everyTen 2026-11-26T${time}:00.000Z`),
    )
    // nightly, 'once': one run, for the latest missed slot.
    expect(runs.filter((run) => run.startsWith('nightly'))).toEqual(['nightly 2026-11-26T02:00:00.000Z'])

    runs.length = 0
    await start({ provider, defaultLockAtMostFor: '1m', awaitCatchUp: true })
    expect(runs).toEqual([])
  })

  it('a method with @SchedulerLock({ slot: true }) and no @Cron fails the start with LockConfigurationError', async () => {
    const failed = start({ provider: inMemoryLockProvider(), defaultLockAtMostFor: '1m' }, [WithoutCron])
    await expect(failed).rejects.toThrow(LockConfigurationError)
    await expect(
      start({ provider: inMemoryLockProvider(), defaultLockAtMostFor: '1m' }, [WithoutCron]),
    ).rejects.toThrow(
      /@SchedulerLock on WithoutCron\.tick\(\) \(lock "no-cron"\): slot: true reads the fire time of @Cron/,
    )
  })

  it('a store failure during the catch-up is logged, and the application starts', async () => {
    const broken: LockProvider = {
      lock: async () => {
        throw new Error('connection refused')
      },
      inspector: () => {
        throw new Error('unreachable')
      },
    }
    const app = await start({ provider: broken, defaultLockAtMostFor: '1m', awaitCatchUp: true })
    expect(app.get(Reports)).toBeInstanceOf(Reports)
  })
})

describe('on shutdown: the executors are closed', () => {
  it('app.close() aborts a running method (ExecutorClosedError) and releases its lock before the application is gone; later calls do not run', async () => {
    const provider = inMemoryLockProvider()
    const app = await start({ provider, defaultLockAtMostFor: '1m', shutdownTimeout: '5s' })
    const reports = app.get(Reports)
    let reason: unknown
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    const call = reports.long(() => started()).catch((error: unknown) => (reason = error))
    await running
    expect(await provider.lock(lockConfiguration({ name: 'long', lockAtMostFor: '1m' }))).toBeUndefined()
    await app.close()
    apps = []
    await expect(call).resolves.toBeUndefined()
    expect(reason).toBeUndefined() // stopped by the shutdown: resolved, not rejected
    expect(provider.inspect('long')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
    await expect(reports.long(() => {})).resolves.toBeUndefined()
  })

  it('SIGTERM with app.enableShutdownHooks(): the lock is released before the process exits', async () => {
    const script = fileURLToPath(new URL('./fixtures/shutdown-app.mjs', import.meta.url))
    const { child, done, stdout, stderr } = startNode([script])
    // A Nest application in a process of its own: its start took over 10 s on a loaded 2-core machine.
    expect(await waitFor(() => stdout().includes('running'), 25_000), stderr()).toBe(true)
    child.kill('SIGTERM')
    // After the output pipes close, so that nothing the process printed last is missing.
    const exit = await done
    expect(exit.stderr).toBe('')
    expect(exit.stdout.trim().split('\n')).toEqual([
      'running',
      'aborted: ExecutorClosedError',
      'unlocked long',
      'call resolved: undefined',
    ])
    // Nest re-raises the signal once the application is closed.
    expect(exit.signal ?? exit.code).toBe('SIGTERM')
  })
})

describe('ShedLockService and SHEDLOCK_EXECUTOR', () => {
  it("run code under locks outside decorators, on the module's providers and with its listener", async () => {
    const log: string[] = []
    const a = inMemoryLockProvider()
    const b = inMemoryLockProvider()
    const app = await start(
      {
        provider: a,
        providers: { b },
        defaultLockAtMostFor: '1m',
        listener: { onLockAcquired: (c) => void log.push(`acquired ${c.name}`) },
      },
      [Outside],
    )
    const { shedlock, executor } = app.get(Outside)
    expect(executor).toBe(shedlock)
    await expect(shedlock.executeWithLock(() => 'done', { name: 'outside', lockAtMostFor: '1m' })).resolves.toEqual({
      executed: true,
      result: 'done',
    })
    await expect(executor.executeWithLock(() => 'again', { name: 'outside', lockAtMostFor: '1m' })).resolves.toEqual({
      executed: true,
      result: 'again',
    })
    await shedlock.executor('b').executeWithLock(() => {}, { name: 'on-b', lockAtMostFor: '1m', lockAtLeastFor: '1m' })
    expect(b.inspect('on-b')).toBeDefined()
    expect(a.inspect('on-b')).toBeUndefined()
    expect(log).toEqual(['acquired outside', 'acquired outside', 'acquired on-b'])
    expect(() => shedlock.executor('missing')).toThrow(LockConfigurationError)
    await shedlock.close()
    expect(shedlock.closed).toBe(true)
    await expect(shedlock.executeWithLock(() => 'late', { name: 'outside', lockAtMostFor: '1m' })).resolves.toEqual({
      executed: false,
      reason: 'closed',
    })
  })

  it('catchUp() with the fire times of a scheduler (fireTimesOf)', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const { provider } = listingStore(undefined, inMemoryLockProvider)
    at('2026-11-24T10:00:00.000Z')
    const app = await start({ provider, defaultLockAtMostFor: '1m' }, [Outside])
    const { shedlock } = app.get(Outside)
    const ran: string[] = []
    const request = { name: 'sync', lockAtMostFor: '1m' } as const
    await shedlock.executeWithLock(() => {}, { ...request, slot: new Date() })
    at('2026-11-24T10:03:30.000Z')
    const everyMinute = (from: Date, to: Date) => {
      const out: Date[] = []
      for (let t = Math.ceil(from.getTime() / 60_000) * 60_000; t <= to.getTime(); t += 60_000) out.push(new Date(t))
      return out
    }
    const result = await shedlock.catchUp(({ slot }) => void ran.push(slot!.toISOString()), request, {
      policy: 'all',
      within: '1h',
      fireTimes: fireTimesOf(everyMinute),
    })
    expect(result.outcome).toBe('ran')
    expect(ran).toEqual(['10:01', '10:02', '10:03'].map((t) => `2026-11-24T${t}:00.000Z`))
  })
})

it('ExecutorClosedError is the one of shedlock', () => {
  expect(new ExecutorClosedError('x').name).toBe('ExecutorClosedError')
})
