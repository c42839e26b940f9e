import 'reflect-metadata'
import { Inject, Injectable, type INestApplicationContext, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { Cron, Interval, SchedulerRegistry, ScheduleModule, Timeout } from '@nestjs/schedule'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  activeFencingToken,
  assertLocked,
  type Duration,
  inMemoryLockProvider,
  LockConfigurationError,
  lockConfiguration,
  type LockProvider,
  taskContext,
} from 'shedlock'
import { afterEach, describe, expect, it } from 'vitest'
import {
  SCHEDULER_LOCK_OPTIONS,
  SchedulerLock,
  SHEDLOCK_MODULE_OPTIONS,
  ShedLockModule,
  type ShedLockModuleOptions,
  ShedLockService,
} from '../src/index.ts'

// In-process tests of the module and the decorator, through Nest's own DI and @nestjs/schedule.
// vitest compiles this file with the package's tsconfig (legacy decorators and their metadata).

function isLocked(): boolean {
  try {
    assertLocked()
    return true
  } catch {
    return false
  }
}

/** Calls of the jobs below: method name and whether assertLocked() passed inside. */
const calls: Array<{ method: string; locked: boolean }> = []

@Injectable()
class Jobs {
  @Cron('* * * * * *', { name: 'cron-below' })
  @SchedulerLock({ name: 'cron-below', lockAtMostFor: '10s' })
  async cronBelow(): Promise<void> {
    calls.push({ method: 'cronBelow', locked: isLocked() })
  }

  @SchedulerLock({ name: 'cron-above', lockAtMostFor: '10s' })
  @Cron('* * * * * *', { name: 'cron-above' })
  async cronAbove(): Promise<void> {
    calls.push({ method: 'cronAbove', locked: isLocked() })
  }

  @Interval('interval-below', 100)
  @SchedulerLock({ name: 'interval-below' })
  async intervalBelow(): Promise<void> {
    calls.push({ method: 'intervalBelow', locked: isLocked() })
  }

  @SchedulerLock({ name: 'timeout-above' })
  @Timeout('timeout-above', 20)
  async timeoutAbove(): Promise<void> {
    calls.push({ method: 'timeoutAbove', locked: isLocked() })
  }

  @SchedulerLock({ name: 'direct', lockAtMostFor: '1m' })
  async direct(value: string): Promise<string> {
    assertLocked()
    return `direct ${value}`
  }

  @SchedulerLock({ name: 'fenced', lockAtMostFor: '1m' })
  async fenced(): Promise<Array<bigint | undefined>> {
    await sleep(1)
    return [taskContext().fencingToken, activeFencingToken()]
  }

  @SchedulerLock({ name: 'on-b', provider: 'b' })
  async onB(): Promise<string> {
    return 'b'
  }

  @SchedulerLock({ name: 'on-missing', provider: 'missing' })
  async onMissing(): Promise<void> {}
}

@Module({ providers: [Jobs] })
class JobsModule {}

let app: INestApplicationContext | undefined
afterEach(async () => {
  await app?.close()
  app = undefined
  calls.length = 0
})

async function start(
  shedlock: ReturnType<typeof ShedLockModule.forRoot>,
  withSchedule = false,
): Promise<INestApplicationContext> {
  @Module({ imports: [...(withSchedule ? [ScheduleModule.forRoot()] : []), shedlock, JobsModule] })
  class AppModule {}
  app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })
  return app
}

// First in the file: the configuration belongs to the process, and later tests configure it.
it('before any ShedLockModule, a locked call rejects with what to import', async () => {
  await expect(new Jobs().direct('x')).rejects.toThrow(
    /^@SchedulerLock on Jobs\.direct\(\) \(lock "direct"\): @SchedulerLock is not configured; .*\(NestJS: import ShedLockModule\.forRoot\(\) from @shedlock\/nestjs\)$/,
  )
})

describe('ShedLockModule.forRoot', () => {
  it('locks direct calls of a provider: runs under the lock, skips while another node holds it', async () => {
    const provider = inMemoryLockProvider()
    const context = await start(ShedLockModule.forRoot({ provider, defaultLockAtMostFor: '1m' }))
    const jobs = context.get(Jobs)
    await expect(jobs.direct('one')).resolves.toBe('direct one')
    expect(provider.inspect('direct')).toBeDefined()
    const holder = await provider.lock(lockConfiguration({ name: 'direct', lockAtMostFor: '1m' }))
    await expect(jobs.direct('two')).resolves.toBeUndefined()
    await holder!.unlock()
  })

  it("gives a @SchedulerLock method and a ShedLockService task their lock's fencing token", async () => {
    const provider = inMemoryLockProvider()
    const context = await start(ShedLockModule.forRoot({ provider, defaultLockAtMostFor: '1m' }))
    const jobs = context.get(Jobs)
    await expect(jobs.fenced()).resolves.toEqual([1n, 1n])
    await expect(jobs.fenced()).resolves.toEqual([2n, 2n])
    const service = context.get(ShedLockService)
    await expect(
      service.executeWithLock(({ fencingToken }) => [fencingToken, activeFencingToken()], {
        name: 'fenced',
        lockAtMostFor: '1m',
      }),
    ).resolves.toEqual({ executed: true, result: [3n, 3n] })
  })

  it('exposes the options under SHEDLOCK_MODULE_OPTIONS', async () => {
    const options: ShedLockModuleOptions = { provider: inMemoryLockProvider(), defaultLockAtMostFor: '1m' }
    const context = await start(ShedLockModule.forRoot(options))
    expect(context.get(SHEDLOCK_MODULE_OPTIONS)).toBe(options)
  })

  it('fails to start with the LockConfigurationError of bad options', async () => {
    const bad = { provider: inMemoryLockProvider() } as unknown as ShedLockModuleOptions
    await expect(start(ShedLockModule.forRoot(bad))).rejects.toThrow(LockConfigurationError)
    await expect(start(ShedLockModule.forRoot(bad))).rejects.toThrow(
      /^configureSchedulerLock\(\): defaultLockAtMostFor is required/,
    )
  })

  it('chooses the named provider of a method, and rejects a name that is not configured', async () => {
    const a = inMemoryLockProvider()
    const b = inMemoryLockProvider()
    const context = await start(
      ShedLockModule.forRoot({ provider: a, providers: { a, b }, defaultLockAtMostFor: '1m' }),
    )
    const jobs = context.get(Jobs)
    await expect(jobs.onB()).resolves.toBe('b')
    expect(b.inspect('on-b')).toBeDefined()
    expect(a.inspect('on-b')).toBeUndefined()
    await expect(jobs.direct('x')).resolves.toBe('direct x')
    expect(a.inspect('direct')).toBeDefined()
    await expect(jobs.onMissing()).rejects.toThrow(
      '@SchedulerLock on Jobs.onMissing() (lock "on-missing"): no lock provider named "missing" is configured (configured: "a", "b")',
    )
  })
})

describe('ShedLockModule.forRootAsync', () => {
  const STORE = Symbol('STORE')
  const store = inMemoryLockProvider()

  @Module({ providers: [{ provide: STORE, useValue: store }], exports: [STORE] })
  class StoreModule {}

  it('builds the options with a factory from injected values (sync or async)', async () => {
    const context = await start(
      ShedLockModule.forRootAsync({
        imports: [StoreModule],
        inject: [STORE],
        useFactory: async (provider: LockProvider) => {
          await sleep(1)
          return { provider, defaultLockAtMostFor: '1m', defaultLockAtLeastFor: '1s' }
        },
      }),
    )
    await expect(context.get(Jobs).direct('async')).resolves.toBe('direct async')
    const record = store.inspect('direct')!
    // lockAtLeastFor 1s came from the factory's defaults.
    expect(record.lockUntil.getTime() - Date.now()).toBeGreaterThan(500)
  })

  it('is injectable anywhere: the module is global', async () => {
    @Injectable()
    class Reader {
      readonly options: ShedLockModuleOptions
      constructor(@Inject(SHEDLOCK_MODULE_OPTIONS) options: ShedLockModuleOptions) {
        this.options = options
      }
    }
    @Module({ providers: [Reader] })
    class ReaderModule {}
    @Module({
      imports: [
        ShedLockModule.forRootAsync({ useFactory: () => ({ provider: store, defaultLockAtMostFor: '2m' }) }),
        ReaderModule,
      ],
    })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })
    expect(app.get(Reader).options.defaultLockAtMostFor).toBe('2m')
  })
})

describe('with @nestjs/schedule', () => {
  it('@Cron, @Interval and @Timeout keep their metadata in either order, and their runs are locked', async () => {
    const provider = inMemoryLockProvider()
    const context = await start(ShedLockModule.forRoot({ provider, defaultLockAtMostFor: '1m' }), true)
    const registry = context.get(SchedulerRegistry)
    expect(registry.doesExist('cron', 'cron-below')).toBe(true)
    expect(registry.doesExist('cron', 'cron-above')).toBe(true)
    expect(registry.doesExist('interval', 'interval-below')).toBe(true)
    // Real time: the crons fire on the next full second.
    await sleep(1_300)
    const methods = new Set(calls.map((c) => c.method))
    expect(methods).toEqual(new Set(['cronBelow', 'cronAbove', 'intervalBelow', 'timeoutAbove']))
    expect(calls.every((c) => c.locked)).toBe(true)
    for (const name of ['cron-below', 'cron-above', 'interval-below', 'timeout-above'])
      expect(provider.inspect(name), name).toBeDefined()
  })

  it('a tick skipped on this node never enters the method', async () => {
    const provider = inMemoryLockProvider()
    await provider.lock(lockConfiguration({ name: 'interval-below', lockAtMostFor: '1m' }))
    await start(ShedLockModule.forRoot({ provider, defaultLockAtMostFor: '1m' }), true)
    await sleep(350)
    expect(calls.filter((c) => c.method === 'intervalBelow')).toEqual([])
    expect(calls.filter((c) => c.method === 'timeoutAbove')).toHaveLength(1)
  })

  it('stores its options as metadata of the locked method', () => {
    expect(Reflect.getMetadata(SCHEDULER_LOCK_OPTIONS, Jobs.prototype.cronBelow)).toEqual({
      name: 'cron-below',
      lockAtMostFor: '10s',
    })
    expect(Reflect.getMetadata(SCHEDULER_LOCK_OPTIONS, Jobs.prototype.timeoutAbove)).toEqual({ name: 'timeout-above' })
  })
})

describe('bad input fails where the class is defined, naming class, method and lock', () => {
  it.each([
    [
      'bad durations',
      () => {
        class Reports {
          @SchedulerLock({ name: 'nightly', lockAtMostFor: '10 minutes' as Duration })
          async nightly(): Promise<void> {}
        }
        return Reports
      },
      '@SchedulerLock on Reports.nightly() (lock "nightly"): lockAtMostFor is invalid. Invalid duration "10 minutes"',
    ],
    [
      'lockAtLeastFor above lockAtMostFor',
      () => {
        class Reports {
          @SchedulerLock({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: '2m' })
          async nightly(): Promise<void> {}
        }
        return Reports
      },
      '@SchedulerLock on Reports.nightly() (lock "nightly"): lockAtLeastFor (2m) is longer than lockAtMostFor (1m)',
    ],
    [
      'a missing name',
      () => {
        class Reports {
          @SchedulerLock({} as never)
          async nightly(): Promise<void> {}
        }
        return Reports
      },
      '@SchedulerLock on Reports.nightly(): the lock name is missing',
    ],
    [
      'a property',
      () => {
        class Reports {
          // @ts-expect-error only methods can be locked
          @SchedulerLock({ name: 'nightly' })
          nightly = 1
        }
        return Reports
      },
      '@SchedulerLock on Reports.nightly (lock "nightly"): it decorates methods only, not a property',
    ],
  ])('%s', (_, define, message) => {
    expect(define).toThrow(LockConfigurationError)
    expect(define).toThrow(message)
  })
})
