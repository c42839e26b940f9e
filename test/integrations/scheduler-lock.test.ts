import 'reflect-metadata'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { LockConfigurationError, LockProviderError, NotLockedError } from '../../src/core/errors.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { assertLocked } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { configureSchedulerLock, resetSchedulerLock, SchedulerLock } from '../../src/integrations/scheduler-lock.ts'
import { type InMemoryLockProvider, inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import type * as Fixture from '../fixtures/decorators/classes.ts'
import { deferred, recordingListener } from '../helpers/fakes.ts'
import { tsc } from './support/build.ts'
import { type DecoratorMode, importCompiled, removeCompiled } from './support/compile-decorators.ts'

const FIXTURE = new URL('../fixtures/decorators/classes.ts', import.meta.url)
const lib: Fixture.Library = { SchedulerLock, assertLocked }

/** The runtime of the fixture's Tracer and Tagger: one function per decorator mode. */
function anyMode(
  wrap: (method: (...args: unknown[]) => unknown) => (...args: unknown[]) => unknown,
  onFunction: (fn: object) => void = () => {},
): Fixture.AnyModeMethodDecorator {
  return ((...args: unknown[]) => {
    if (args.length === 2) {
      onFunction(args[0] as object)
      return wrap(args[0] as (...a: unknown[]) => unknown)
    }
    const descriptor = args[2] as PropertyDescriptor
    onFunction(descriptor.value)
    descriptor.value = wrap(descriptor.value)
    return descriptor
  }) as Fixture.AnyModeMethodDecorator
}

const trace: Fixture.Tracer = (log, name) =>
  anyMode(
    (method) =>
      function (this: unknown, ...args: unknown[]) {
        let locked = true
        try {
          assertLocked()
        } catch {
          locked = false
        }
        log.push(`${name} ${locked ? 'locked' : 'unlocked'}`)
        return method.apply(this, args)
      },
  )

const tag: Fixture.Tagger = (key, value) =>
  ((...args: unknown[]) => {
    const fn = args.length === 2 ? args[0] : (args[2] as PropertyDescriptor).value
    Reflect.defineMetadata(key, value, fn as object)
    return args.length === 2 ? fn : args[2]
  }) as Fixture.AnyModeMethodDecorator

afterAll(removeCompiled)

describe.each<DecoratorMode>(['standard', 'legacy'])('@SchedulerLock with %s decorators', (mode) => {
  let fixture: typeof Fixture
  let Reports: ReturnType<typeof Fixture.defineReports>
  let a: InMemoryLockProvider
  let b: InMemoryLockProvider

  beforeAll(async () => {
    fixture = await importCompiled<typeof Fixture>(FIXTURE, mode)
    Reports = fixture.defineReports(lib)
  })

  beforeEach(() => {
    a = inMemoryLockProvider()
    b = inMemoryLockProvider()
    configureSchedulerLock({
      provider: a,
      providers: { a, b },
      defaultLockAtMostFor: '5m',
      defaultLockAtLeastFor: '1s',
    })
  })

  afterEach(() => {
    resetSchedulerLock()
    vi.restoreAllMocks()
  })

  it('runs the method under its lock, with its arguments and this, and resolves to its result', async () => {
    const reports = new Reports()
    await expect(reports.nightly('monday')).resolves.toBe('report monday')
    expect(reports.calls).toEqual(['monday'])
    const record = a.inspect('nightly')!
    expect(record).toBeDefined()
    // lockAtLeastFor 200ms from the method, not the default 1s.
    const heldFor = record.lockUntil.getTime() - record.lockedAt.getTime()
    expect(heldFor).toBeGreaterThan(150)
    expect(heldFor).toBeLessThan(1000)
  })

  it('resolves to undefined, without running the method, while another node holds the lock', async () => {
    await a.lock(lockConfiguration({ name: 'nightly', lockAtMostFor: '1m' }))
    const reports = new Reports()
    await expect(reports.nightly('monday')).resolves.toBeUndefined()
    expect(reports.calls).toEqual([])
  })

  it('skips an overlapping direct call at once', async () => {
    const reports = new Reports()
    const gate = deferred()
    const first = reports.slow(gate.promise)
    await expect(reports.slow(Promise.resolve())).resolves.toBeUndefined()
    gate.resolve()
    await expect(first).resolves.toBe('slow')
  })

  it('takes lockAtMostFor and lockAtLeastFor from the configured defaults', async () => {
    await expect(new Reports().withDefaults()).resolves.toBe(1)
    const record = a.inspect('defaults')!
    expect(record.lockUntil.getTime() - record.lockedAt.getTime()).toBeGreaterThan(950)
    await expect(new Reports().withDefaults()).resolves.toBeUndefined()
  })

  it('computes a dynamic lock name from the arguments', async () => {
    const reports = new Reports()
    const gate = deferred()
    const x = reports.importTenant('x', gate.promise)
    await expect(reports.importTenant('x')).resolves.toBeUndefined()
    await expect(reports.importTenant('y')).resolves.toBe('y')
    gate.resolve()
    await expect(x).resolves.toBe('x')
    expect(a.inspect('import-x')).toBeDefined()
    expect(a.inspect('import-y')).toBeDefined()
  })

  it('uses the named provider of the method', async () => {
    await expect(new Reports().onB()).resolves.toBe('b')
    expect(b.inspect('on-b')).toBeDefined()
    expect(a.inspect('on-b')).toBeUndefined()
  })

  it('locks a sync void method and a static method', async () => {
    const reports = new Reports()
    await expect(reports.tick()).resolves.toBeUndefined()
    expect(reports.calls).toEqual(['tick'])
    await expect(Reports.cleanup()).resolves.toBe('cleaned')
    expect(a.inspect('static-cleanup')).toBeDefined()
  })

  it('a method of the same lock called inside runs directly (re-entrant), as in ShedLock', async () => {
    await expect(new Reports().outer()).resolves.toBe('outer(inner)')
  })

  it("rejects with the method's error after releasing the lock", async () => {
    configureSchedulerLock({ provider: a, defaultLockAtMostFor: '5m' })
    await expect(new Reports().failing()).rejects.toThrow('task failed')
    expect(a.inspect('failing')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
  })

  it('rejects with LockProviderError when the store fails; the method does not run', async () => {
    const failing: LockProvider = {
      lock: async () => {
        throw new LockProviderError('connection refused', { provider: 'test' })
      },
    }
    configureSchedulerLock({ provider: failing, defaultLockAtMostFor: '5m' })
    const reports = new Reports()
    await expect(reports.nightly('monday')).rejects.toBeInstanceOf(LockProviderError)
    expect(reports.calls).toEqual([])
  })

  it('keeps the method name', () => {
    expect(Reports.prototype.nightly.name).toBe('nightly')
  })

  it('returns a value from a method typed as sync (a compile error) as a promise', async () => {
    await expect(new Reports().count()).resolves.toBe(42)
  })

  it('composes with other decorators in either order; both run inside the lock', async () => {
    const log: string[] = []
    const Traced = fixture.defineTraced(lib, trace, log)
    const traced = new Traced()
    await expect(traced.below()).resolves.toBe('below')
    await expect(traced.above()).resolves.toBe('above')
    // `outside` wraps the locked method, so it runs before the lock is taken; `inside` runs under it.
    expect(log).toEqual(['outside unlocked', 'inside locked'])
    expect(a.inspect('traced-below')).toBeDefined()
    expect(a.inspect('traced-above')).toBeDefined()
  })

  it('keeps the reflect-metadata of decorators applied before it (NestJS @Cron under @SchedulerLock)', () => {
    const Tagged = fixture.defineTagged(lib, tag)
    expect(Reflect.getMetadata('role', Tagged.prototype.below)).toBe('tagged-below')
    expect(Reflect.getMetadata('role', Tagged.prototype.above)).toBe('tagged-above')
  })

  describe('at the call', () => {
    it('fails before configuration, saying what to call', async () => {
      resetSchedulerLock()
      const error = await new Reports().nightly('monday').catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toBe(
        '@SchedulerLock on Reports.nightly() (lock "nightly"): @SchedulerLock is not configured; ' +
          "call configureSchedulerLock({ provider, defaultLockAtMostFor: '10m' }) once at startup, before the first call (NestJS: import ShedLockModule.forRoot() from @shedlock/nestjs)",
      )
    })

    it('fails for a provider name that is not configured, listing the configured ones', async () => {
      await expect(new Reports().onMissing()).rejects.toThrow(
        '@SchedulerLock on Reports.onMissing() (lock "on-missing"): no lock provider named "missing" is configured (configured: "a", "b"); add it to providers in configureSchedulerLock() or ShedLockModule.forRoot(), or fix the name',
      )
    })

    it('fails without a default among several providers', async () => {
      configureSchedulerLock({ providers: { a, b }, defaultLockAtMostFor: '5m' })
      await expect(new Reports().withDefaults()).rejects.toThrow(
        `@SchedulerLock on Reports.withDefaults() (lock "defaults"): several lock providers are configured ("a", "b") and none is the default; choose one with @SchedulerLock({ provider: "a" }) or pass a default provider to configureSchedulerLock()`,
      )
      await expect(new Reports().onB()).resolves.toBe('b')
    })

    it('takes the only named provider as the default', async () => {
      configureSchedulerLock({ providers: { b }, defaultLockAtMostFor: '5m' })
      await expect(new Reports().withDefaults()).resolves.toBe(1)
      expect(b.inspect('defaults')).toBeDefined()
    })

    it('fails when the default lockAtLeastFor is above the lockAtMostFor of the method', async () => {
      await expect(new Reports().short()).rejects.toThrow(
        /^@SchedulerLock on Reports\.short\(\) \(lock "short"\): Lock "short": lockAtLeastFor \(1s\) is longer than lockAtMostFor \(100ms\)/,
      )
    })

    it('uses an executor given as provider, with its listener', async () => {
      const listener = recordingListener()
      configureSchedulerLock({ provider: createLockingTaskExecutor(a, { listener }), defaultLockAtMostFor: '5m' })
      await new Reports().withDefaults()
      expect(listener.log).toContain('onLockAcquired defaults')
    })

    it('passes the configured listener to executors it builds', async () => {
      const listener = recordingListener()
      configureSchedulerLock({ provider: a, defaultLockAtMostFor: '5m', listener })
      await new Reports().withDefaults()
      expect(listener.log).toEqual([
        'onLockAttempt defaults',
        'onLockAcquired defaults',
        'onTaskStarted defaults',
        'onTaskFinished defaults',
        'onUnlocked defaults',
      ])
    })
  })

  describe('bad input fails where the class is defined, naming class, method and lock', () => {
    const owner = (cls: string, method: string) => (mode === 'legacy' ? `${cls}.${method}` : `method ${method}`)
    const cases: Array<[keyof typeof Fixture.misuses, (m: DecoratorMode) => string]> = [
      [
        'missingName',
        () => `@SchedulerLock on ${owner('BadName', 'run')}(): the lock name is missing; pass name: "nightly-report"`,
      ],
      ['blankName', () => `@SchedulerLock on ${owner('BlankName', 'run')}() (lock " "): the lock name " " is blank`],
      [
        'badDuration',
        () =>
          `@SchedulerLock on ${owner('BadDuration', 'run')}() (lock "bad-duration"): lockAtMostFor is invalid. Invalid duration "10 minutes"`,
      ],
      [
        'atLeastAboveAtMost',
        () =>
          `@SchedulerLock on ${owner('AtLeastAboveAtMost', 'run')}() (lock "inverted"): lockAtLeastFor (5m) is longer than lockAtMostFor (1m); make lockAtMostFor at least as long as lockAtLeastFor`,
      ],
      [
        'blankProvider',
        () =>
          `@SchedulerLock on ${owner('BlankProvider', 'run')}() (lock "blank-provider"): provider must be the name of one of the providers`,
      ],
      [
        'onField',
        (m) =>
          m === 'legacy'
            ? '@SchedulerLock on OnField.value (lock "on-field"): it decorates methods only, not a property'
            : '@SchedulerLock on field value (lock "on-field"): it decorates methods only, not a field',
      ],
      [
        'onGetter',
        (m) =>
          m === 'legacy'
            ? '@SchedulerLock on OnGetter.value (lock "on-getter"): it decorates methods only, not an accessor'
            : '@SchedulerLock on getter value (lock "on-getter"): it decorates methods only, not a getter',
      ],
      [
        'onClass',
        (m) =>
          m === 'legacy'
            ? '@SchedulerLock (lock "on-class"): it decorates methods only, not the class OnClass'
            : '@SchedulerLock on class OnClass (lock "on-class"): it decorates methods only, not a class',
      ],
      [
        'twice',
        () =>
          `@SchedulerLock on ${owner('Twice', 'run')}() (lock "first"): the method already has a @SchedulerLock; keep one`,
      ],
    ]

    it.each(cases)('%s', (misuse, message) => {
      let error: unknown
      try {
        fixture.misuses[misuse](lib)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect(
        (error as Error).message.startsWith(message(mode)),
        `${(error as Error).message}\ndoes not start with\n${message(mode)}`,
      ).toBe(true)
    })
  })
})

describe('configureSchedulerLock', () => {
  afterEach(resetSchedulerLock)
  const provider = inMemoryLockProvider()

  it.each([
    ['no options', undefined, /^configureSchedulerLock\(\): options are missing/],
    [
      'no defaultLockAtMostFor',
      { provider },
      /^configureSchedulerLock\(\): defaultLockAtMostFor is required; set it well above/,
    ],
    [
      'a bad defaultLockAtMostFor',
      { provider, defaultLockAtMostFor: 'soon' },
      /^configureSchedulerLock\(\): lockAtMostFor is invalid\. Invalid duration "soon"/,
    ],
    [
      'defaultLockAtLeastFor above defaultLockAtMostFor',
      { provider, defaultLockAtMostFor: '1s', defaultLockAtLeastFor: '2s' },
      /lockAtLeastFor \(2s\) is longer than lockAtMostFor \(1s\)/,
    ],
    [
      'no provider',
      { defaultLockAtMostFor: '1m' },
      /^configureSchedulerLock\(\): no lock provider given; pass provider \(the default\) or providers \(named ones\)/,
    ],
    ['an empty providers object', { providers: {}, defaultLockAtMostFor: '1m' }, /no lock provider given/],
    [
      'a provider of the wrong kind',
      { provider: { query() {} }, defaultLockAtMostFor: '1m' },
      /^configureSchedulerLock\(\): provider: expected a LockProvider/,
    ],
    [
      'a named provider of the wrong kind',
      { providers: { main: 'postgres' }, defaultLockAtMostFor: '1m' },
      /^configureSchedulerLock\(\): providers\.main: expected a LockProvider/,
    ],
    [
      'providers as an array',
      { providers: [provider], defaultLockAtMostFor: '1m' },
      /providers must be an object of named providers/,
    ],
    ['a blank provider name', { providers: { ' ': provider }, defaultLockAtMostFor: '1m' }, /a provider name is blank/],
  ])('rejects %s with LockConfigurationError', (_, options, message) => {
    expect(() => configureSchedulerLock(options as never)).toThrow(LockConfigurationError)
    expect(() => configureSchedulerLock(options as never)).toThrow(message)
  })
})

describe('type checks of the fixture', () => {
  // tsc, not vitest's transform, decides whether the fixture compiles; every @ts-expect-error in
  // it must be an error in both modes.
  it.each(['standard', 'legacy'])('compiles with %s decorators', async (mode) => {
    const output = await tsc(fileURLToPath(new URL(`../fixtures/decorators/tsconfig.${mode}.json`, import.meta.url)))
    expect(output.output).toBe('')
    expect(output.code).toBe(0)
  })
})

describe('a dynamic name that is bad at the call (decorator applied by hand, legacy form)', () => {
  beforeEach(() => configureSchedulerLock({ provider: inMemoryLockProvider(), defaultLockAtMostFor: '1m' }))
  afterEach(resetSchedulerLock)

  function locked(name: (...args: unknown[]) => string): { run(...args: unknown[]): Promise<unknown> } {
    class Manual {
      async run(): Promise<number> {
        return 1
      }
    }
    const descriptor = Object.getOwnPropertyDescriptor(Manual.prototype, 'run')!
    Object.defineProperty(Manual.prototype, 'run', SchedulerLock({ name })(Manual.prototype, 'run', descriptor))
    return new Manual()
  }

  it('a blank computed name rejects, naming class and method, before touching the store', async () => {
    await expect(locked(() => ' ').run()).rejects.toThrow(
      /^@SchedulerLock on Manual\.run\(\) \(lock name from a function\): Lock name " " is blank/,
    )
  })

  it('a name function that throws', async () => {
    const instance = locked(() => {
      throw new Error('no tenant')
    })
    await expect(instance.run()).rejects.toThrow(
      '@SchedulerLock on Manual.run() (lock name from a function): the name function threw: no tenant',
    )
  })

  it('the name function gets the arguments and the instance', async () => {
    const seen: unknown[] = []
    const instance = locked(function (this: unknown, ...args: unknown[]) {
      seen.push(this, ...args)
      return 'computed'
    })
    await expect(instance.run('x', 2)).resolves.toBe(1)
    expect(seen).toEqual([instance, 'x', 2])
  })
})

it('outside a locked method assertLocked() throws', () => {
  expect(() => assertLocked()).toThrow(NotLockedError)
})
