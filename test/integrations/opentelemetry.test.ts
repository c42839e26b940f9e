import { AsyncLocalStorage } from 'node:async_hooks'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as api from '@opentelemetry/api'
import { type DataPoint, type Histogram, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { LockConfigurationError, LockProviderError } from '../../src/core/errors.ts'
import { type LockConfigurationOptions, lockConfiguration } from '../../src/core/lock-configuration.ts'
import { extendActiveLock } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import {
  createLockingTaskExecutor,
  type LockingTaskExecutorListener,
  type TaskOutcome,
} from '../../src/core/locking-task-executor.ts'
import { openTelemetryListener, type OpenTelemetryListenerOptions } from '../../src/integrations/opentelemetry.ts'
import { postgresLockProvider, postgresSchema } from '../../src/providers/postgres/index.ts'
import type { RunLedger } from '../../src/core/run-ledger.ts'
import { inMemoryLockProvider, inMemoryRunLedger } from '../../src/providers/in-memory/index.ts'
import { type SqliteDatabase, sqliteLockProvider, sqliteSchema } from '../../src/providers/sqlite/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { deferred, manualClock, fakeHandle } from '../helpers/fakes.ts'
import { postgresPoolOrSkip } from '../helpers/sql-pools.ts'

// What @opentelemetry/context-async-hooks provides (not installed here): the active context
// follows async calls, so spans nest the way they do in an application.
class AsyncLocalStorageContextManager implements api.ContextManager {
  readonly #storage = new AsyncLocalStorage<api.Context>()
  active(): api.Context {
    return this.#storage.getStore() ?? api.ROOT_CONTEXT
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: api.Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(context, () => fn.apply(thisArg, args))
  }
  bind<T>(_context: api.Context, target: T): T {
    return target
  }
  enable(): this {
    return this
  }
  disable(): this {
    this.#storage.disable()
    return this
  }
}

class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

beforeAll(() => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager())
})
afterAll(() => {
  api.context.disable()
})

type Attributes = Record<string, string | number | boolean>

/** An SDK meter and tracer with in-memory readers, and the listener under test on them. */
function telemetry(options: { meter?: boolean; tracer?: boolean; api?: boolean; runLedger?: RunLedger } = {}) {
  const reader = new CollectingReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const tracer = tracerProvider.getTracer('test')
  const listenerOptions: OpenTelemetryListenerOptions = {}
  if (options.meter ?? true) listenerOptions.meter = meterProvider.getMeter('shedlock')
  if (options.tracer ?? true) listenerOptions.tracer = tracerProvider.getTracer('shedlock')
  if (options.api ?? true) listenerOptions.api = api
  if (options.runLedger) listenerOptions.runLedger = options.runLedger
  const listener = openTelemetryListener(listenerOptions)

  const points = async (name: string): Promise<Array<DataPoint<number | Histogram>>> => {
    const { resourceMetrics, errors } = await reader.collect()
    expect(errors).toEqual([])
    const metric = resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .find((m) => m.descriptor.name === name)
    return (metric?.dataPoints ?? []) as Array<DataPoint<number | Histogram>>
  }
  const matching = (point: DataPoint<unknown>, attributes: Attributes) =>
    Object.entries(attributes).every(([key, value]) => point.attributes[key] === value)

  return {
    listener,
    tracer,
    reader,
    spans: (): ReadableSpan[] => exporter.getFinishedSpans(),
    /** The value of a counter or up-down counter, summed over the points carrying `attributes`. */
    async sum(name: string, attributes: Attributes = {}): Promise<number> {
      return (await points(name))
        .filter((p) => matching(p, attributes))
        .reduce((total, p) => total + (p.value as number), 0)
    },
    /** Every point of `name`, with its attributes. */
    async attributesOf(name: string): Promise<Array<Record<string, unknown>>> {
      return (await points(name)).map((p) => ({ ...p.attributes }))
    },
    async histogram(name: string, attributes: Attributes = {}): Promise<Histogram[]> {
      return (await points(name)).filter((p) => matching(p, attributes)).map((p) => p.value as Histogram)
    },
    async descriptor(name: string) {
      const { resourceMetrics } = await reader.collect()
      return resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === name)
        ?.descriptor
    },
  }
}

/** `listener`, plus a record of the outcomes the executor reported. */
function withOutcomes(listener: LockingTaskExecutorListener) {
  const outcomes: TaskOutcome[] = []
  return {
    outcomes,
    listener: {
      ...listener,
      onTaskFinished(...args: Parameters<NonNullable<LockingTaskExecutorListener['onTaskFinished']>>) {
        outcomes.push(args[1])
        listener.onTaskFinished!(...args)
      },
    } satisfies LockingTaskExecutorListener,
  }
}

const named = <T extends LockProvider>(provider: T, name: string): T => Object.assign(provider, { name })
const opts = (name = 'job'): LockConfigurationOptions => ({ name, lockAtMostFor: '10m' })
const eventNames = (span: ReadableSpan) => span.events.map((e) => e.name)
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

describe('openTelemetryListener', () => {
  it('an executed task: one acquired attempt, its duration in seconds, active 1 while it runs, and one span', async () => {
    const t = telemetry()
    const { listener, outcomes } = withOutcomes(t.listener)
    const executor = createLockingTaskExecutor(named(inMemoryLockProvider(), 'memory'), { listener })
    const lock = { 'shedlock.lock.name': 'report', 'shedlock.provider.name': 'memory' }
    let activeWhileRunning = -1
    const result = await executor.executeWithLock(
      async () => {
        activeWhileRunning = await t.sum('shedlock.task.active', lock)
        return 'done'
      },
      { name: 'report', lockAtMostFor: '10m', lockAtLeastFor: '30s' },
    )
    expect(result).toEqual({ executed: true, result: 'done' })

    expect(await t.attributesOf('shedlock.lock.attempts')).toEqual([{ ...lock, 'shedlock.lock.result': 'acquired' }])
    expect(await t.sum('shedlock.lock.attempts')).toBe(1)
    expect(activeWhileRunning).toBe(1)
    expect(await t.sum('shedlock.task.active', lock)).toBe(0)
    const [duration, ...others] = await t.histogram('shedlock.task.duration', lock)
    expect(others).toEqual([])
    expect(duration!.count).toBe(1)
    expect(duration!.sum).toBeCloseTo(outcomes[0]!.durationMs / 1000, 9)
    expect(await t.attributesOf('shedlock.task.duration')).toEqual([lock])
    expect(await t.sum('shedlock.lock.losses')).toBe(0)

    const [span, ...more] = t.spans()
    expect(more).toEqual([])
    expect(span!.name).toBe('shedlock report')
    expect(span!.kind).toBe(api.SpanKind.INTERNAL)
    expect(span!.attributes).toEqual({
      ...lock,
      'shedlock.lock.at_most_for': 600,
      'shedlock.lock.at_least_for': 30,
      'shedlock.lock.fencing_token': '1',
      'shedlock.execution.outcome': 'executed',
    })
    expect(span!.status.code).toBe(api.SpanStatusCode.UNSET)
    expect(eventNames(span!)).toEqual(['shedlock.lock.acquired'])
    const acquired = span!.events[0]!.attributes!
    expect(
      Date.parse(acquired['shedlock.lock.at_most_until'] as string) -
        Date.parse(acquired['shedlock.lock.at_least_until'] as string),
    ).toBe(570_000)
  })

  it('the fencing token: a span attribute (a decimal string) from the acquisition on, never a metric attribute; none from a store without tokens', async () => {
    const t = telemetry()
    const provider = named(inMemoryLockProvider(), 'memory')
    const executor = createLockingTaskExecutor(provider, { listener: t.listener })
    const options: LockConfigurationOptions = { name: 'fenced', lockAtMostFor: '10m' }
    await executor.executeWithLock(() => undefined, options)
    await executor.executeWithLock(() => undefined, options)
    const tokenless: LockProvider = {
      lock: async () => fakeHandle({ unlock: async () => undefined }),
    }
    await createLockingTaskExecutor(tokenless, { listener: t.listener }).executeWithLock(() => undefined, {
      name: 'plain',
      lockAtMostFor: '10m',
    })
    expect(t.spans().map((span) => [span.name, span.attributes['shedlock.lock.fencing_token']])).toEqual([
      ['shedlock fenced', '1'],
      ['shedlock fenced', '2'],
      ['shedlock plain', undefined],
    ])
    for (const metric of ['shedlock.lock.attempts', 'shedlock.task.duration', 'shedlock.task.runs'])
      for (const attributes of await t.attributesOf(metric))
        expect(attributes, metric).not.toHaveProperty('shedlock.lock.fencing_token')
  })

  it('declares the instruments with OpenTelemetry units: {attempt}, {loss}, s with buckets up to an hour, {task}', async () => {
    const t = telemetry()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener })
    await executor.executeWithLock(() => {}, opts())
    expect(await t.descriptor('shedlock.lock.attempts')).toMatchObject({ unit: '{attempt}', type: 'COUNTER' })
    expect(await t.descriptor('shedlock.task.duration')).toMatchObject({ unit: 's', type: 'HISTOGRAM' })
    expect(await t.descriptor('shedlock.task.active')).toMatchObject({ unit: '{task}', type: 'UP_DOWN_COUNTER' })
    const [duration] = await t.histogram('shedlock.task.duration')
    expect(duration!.buckets.boundaries).toEqual([
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
    ])
    const lost = createLockingTaskExecutor(
      { lock: async () => fakeHandle({ unlock: async () => {}, extend: async () => undefined }) },
      { listener: t.listener },
    )
    await lost.executeWithLock(() => extendActiveLock('1m').catch(() => undefined), opts('lost'))
    expect(await t.descriptor('shedlock.lock.losses')).toMatchObject({ unit: '{loss}', type: 'COUNTER' })
  })

  it('a held lock: a not_acquired attempt, no task metrics, and a short span with outcome skipped', async () => {
    const t = telemetry()
    const provider = inMemoryLockProvider()
    await provider.lock(lockConfiguration(opts()))
    const task = vi.fn()
    await expect(
      createLockingTaskExecutor(provider, { listener: t.listener }).executeWithLock(task, opts()),
    ).resolves.toEqual({
      executed: false,
      reason: 'held',
    })
    expect(task).not.toHaveBeenCalled()
    expect(await t.attributesOf('shedlock.lock.attempts')).toEqual([
      { 'shedlock.lock.name': 'job', 'shedlock.provider.name': 'in-memory', 'shedlock.lock.result': 'not_acquired' },
    ])
    expect(await t.histogram('shedlock.task.duration')).toEqual([])
    expect(await t.sum('shedlock.task.active')).toBe(0)
    const [span] = t.spans()
    expect(span!.attributes['shedlock.execution.outcome']).toBe('skipped')
    expect(span!.status.code).toBe(api.SpanStatusCode.UNSET)
    expect(span!.events).toEqual([])
  })

  it('a store failure: a failed attempt with error.type from the driver, and an error span with the exception', async () => {
    const t = telemetry()
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    const failure = new LockProviderError('postgres: could not acquire lock "job": the database is unreachable', {
      cause,
      provider: 'postgres',
      lockName: 'job',
    })
    const provider = named({ lock: () => Promise.reject(failure) } as LockProvider, 'postgres')
    await expect(
      createLockingTaskExecutor(provider, { listener: t.listener }).executeWithLock(() => 1, opts()),
    ).rejects.toBe(failure)
    expect(await t.attributesOf('shedlock.lock.attempts')).toEqual([
      {
        'shedlock.lock.name': 'job',
        'shedlock.provider.name': 'postgres',
        'shedlock.lock.result': 'failed',
        'error.type': 'ECONNREFUSED',
      },
    ])
    const [span] = t.spans()
    expect(span!.attributes).toMatchObject({ 'shedlock.execution.outcome': 'error', 'error.type': 'ECONNREFUSED' })
    expect(span!.status).toEqual({ code: api.SpanStatusCode.ERROR, message: failure.message })
    expect(eventNames(span!)).toEqual(['exception'])
    expect(span!.events[0]!.attributes).toMatchObject({
      'exception.type': 'LockProviderError',
      'exception.message': failure.message,
    })
  })

  it('a store failure without a driver code is typed by its class', async () => {
    const t = telemetry()
    const failure = new LockProviderError('down')
    await expect(
      createLockingTaskExecutor({ lock: () => Promise.reject(failure) }, { listener: t.listener }).executeWithLock(
        () => 1,
        opts(),
      ),
    ).rejects.toBe(failure)
    expect(await t.sum('shedlock.lock.attempts', { 'error.type': 'LockProviderError' })).toBe(1)
  })

  it('a failing task: its duration with error.type, an error span with outcome failed, and the error re-thrown', async () => {
    const t = telemetry()
    const boom = new TypeError('report template missing')
    await expect(
      createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener }).executeWithLock(() => {
        throw boom
      }, opts()),
    ).rejects.toBe(boom)
    expect(await t.attributesOf('shedlock.task.duration')).toEqual([
      { 'shedlock.lock.name': 'job', 'shedlock.provider.name': 'in-memory', 'error.type': 'TypeError' },
    ])
    expect(await t.sum('shedlock.task.active')).toBe(0)
    expect(await t.sum('shedlock.lock.attempts', { 'shedlock.lock.result': 'acquired' })).toBe(1)
    const [span] = t.spans()
    expect(span!.attributes).toMatchObject({ 'shedlock.execution.outcome': 'failed', 'error.type': 'TypeError' })
    expect(span!.status).toEqual({ code: api.SpanStatusCode.ERROR, message: 'report template missing' })
    expect(eventNames(span!)).toEqual(['shedlock.lock.acquired', 'exception'])
  })

  it('a task that throws a non-Error is typed _OTHER', async () => {
    const t = telemetry()
    await expect(
      createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener }).executeWithLock(() => {
        throw 'plain string'
      }, opts()),
    ).rejects.toBe('plain string')
    expect(await t.attributesOf('shedlock.task.duration')).toEqual([
      { 'shedlock.lock.name': 'job', 'shedlock.provider.name': 'in-memory', 'error.type': '_OTHER' },
    ])
    expect(t.spans()[0]!.status).toEqual({ code: api.SpanStatusCode.ERROR, message: 'plain string' })
  })

  it('concurrent calls on different names each end their own span, when their own task finishes', async () => {
    const t = telemetry()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener })
    const releaseA = deferred()
    const releaseB = deferred<void>()
    const a = executor.executeWithLock(() => releaseA.promise, opts('a'))
    const b = executor.executeWithLock(async () => {
      await releaseB.promise
      throw new Error('b failed')
    }, opts('b'))
    await vi.waitFor(async () => expect(await t.sum('shedlock.task.active')).toBe(2))
    expect(await t.sum('shedlock.task.active', { 'shedlock.lock.name': 'a' })).toBe(1)
    releaseB.resolve()
    await expect(b).rejects.toThrow('b failed')
    expect(t.spans().map((s) => [s.name, s.attributes['shedlock.execution.outcome']])).toEqual([
      ['shedlock b', 'failed'],
    ])
    expect(await t.sum('shedlock.task.active')).toBe(1)
    releaseA.resolve()
    await a
    expect(t.spans().map((s) => [s.name, s.attributes['shedlock.execution.outcome']])).toEqual([
      ['shedlock b', 'failed'],
      ['shedlock a', 'executed'],
    ])
    expect(t.spans().map((s) => s.attributes['shedlock.lock.name'])).toEqual(['b', 'a'])
    expect(await t.sum('shedlock.task.active')).toBe(0)
    // Concurrent calls are siblings, not parent and child.
    expect(parentOf(t.spans()[0]!)).toBeUndefined()
    expect(parentOf(t.spans()[1]!)).toBeUndefined()
  })

  it('a nested call with the same name (re-entrant) records nothing of its own: one attempt, one task, one span', async () => {
    const t = telemetry()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener })
    let activeInside = -1
    const result = await executor.executeWithLock(
      () =>
        executor.executeWithLock(async () => {
          activeInside = await t.sum('shedlock.task.active')
          return 'inner'
        }, opts()),
      opts(),
    )
    expect(result).toEqual({ executed: true, result: { executed: true, result: 'inner' } })
    expect(activeInside).toBe(1)
    expect(await t.sum('shedlock.lock.attempts')).toBe(1)
    expect((await t.histogram('shedlock.task.duration')).map((h) => h.count)).toEqual([1])
    expect(await t.sum('shedlock.task.active')).toBe(0)
    expect(t.spans()).toHaveLength(1)
    expect(t.spans()[0]!.attributes['shedlock.execution.outcome']).toBe('executed')
  })

  it('a nested call with another name is a child span; spans the task creates are children of its lock span', async () => {
    const t = telemetry()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener })
    await executor.executeWithLock(
      () =>
        executor.executeWithLock(async () => {
          await new Promise((resolve) => setTimeout(resolve, 1))
          t.tracer.startSpan('SELECT invoices').end()
        }, opts('inner')),
      opts('outer'),
    )
    const byName = Object.fromEntries(t.spans().map((s) => [s.name, s]))
    expect(Object.keys(byName).sort()).toEqual(['SELECT invoices', 'shedlock inner', 'shedlock outer'])
    expect(parentOf(byName['shedlock outer']!)).toBeUndefined()
    expect(parentOf(byName['shedlock inner']!)).toBe(byName['shedlock outer']!.spanContext().spanId)
    expect(parentOf(byName['SELECT invoices']!)).toBe(byName['shedlock inner']!.spanContext().spanId)
    expect(new Set(t.spans().map((s) => s.spanContext().traceId)).size).toBe(1)
  })

  it('called inside an active span, the lock span is its child; with api the task runs under the lock span, without it beside it', async () => {
    for (const withApi of [true, false]) {
      const t = telemetry({ api: withApi })
      const executor = createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener })
      await t.tracer.startActiveSpan('cron tick', async (tick) => {
        await executor.executeWithLock(async () => {
          await Promise.resolve()
          t.tracer.startSpan('task work').end()
        }, opts())
        tick.end()
      })
      const byName = Object.fromEntries(t.spans().map((s) => [s.name, s]))
      const tick = byName['cron tick']!.spanContext().spanId
      expect(parentOf(byName['shedlock job']!)).toBe(tick)
      expect(parentOf(byName['task work']!), `api: ${withApi}`).toBe(
        withApi ? byName['shedlock job']!.spanContext().spanId : tick,
      )
    }
  })

  it('extensions are span events with the new deadline; a lost lock counts a loss and records the LockLostError', async () => {
    const t = telemetry()
    const clock = manualClock(Date.UTC(2024, 0, 1))
    const executor = createLockingTaskExecutor(named(inMemoryLockProvider({ clock }), 'memory'), {
      listener: t.listener,
      clock,
    })
    await executor.executeWithLock(async () => {
      clock.advance(1_000)
      await extendActiveLock('20m')
      clock.advance(21 * 60_000)
      await extendActiveLock('20m').catch(() => undefined)
    }, opts())
    expect(await t.attributesOf('shedlock.lock.losses')).toEqual([
      { 'shedlock.lock.name': 'job', 'shedlock.provider.name': 'memory' },
    ])
    expect(await t.sum('shedlock.lock.losses')).toBe(1)
    const [span] = t.spans()
    expect(eventNames(span!)).toEqual(['shedlock.lock.acquired', 'shedlock.lock.extended', 'exception'])
    expect(span!.events[1]!.attributes!['shedlock.lock.at_most_until']).toBe(
      new Date(Date.UTC(2024, 0, 1) + 1_000 + 20 * 60_000).toISOString(),
    )
    expect(span!.events[2]!.attributes).toMatchObject({ 'exception.type': 'LockLostError' })
    // The task itself succeeded.
    expect(span!.attributes['shedlock.execution.outcome']).toBe('executed')
  })

  it('works with a meter alone or a tracer alone', async () => {
    const metricsOnly = telemetry({ tracer: false, api: false })
    await createLockingTaskExecutor(inMemoryLockProvider(), { listener: metricsOnly.listener }).executeWithLock(
      () => {},
      opts(),
    )
    expect(await metricsOnly.sum('shedlock.lock.attempts')).toBe(1)
    expect(metricsOnly.spans()).toEqual([])

    const tracesOnly = telemetry({ meter: false })
    await createLockingTaskExecutor(inMemoryLockProvider(), { listener: tracesOnly.listener }).executeWithLock(
      () => {},
      opts(),
    )
    expect(await tracesOnly.sum('shedlock.lock.attempts')).toBe(0)
    expect(tracesOnly.spans().map((s) => s.name)).toEqual(['shedlock job'])
  })

  it('slot outcomes: run here, done elsewhere, owed and skipped behind a held lock, missed and caught up', async () => {
    const t = telemetry({ tracer: false, api: false })
    const provider = named(inMemoryLockProvider(), 'memory')
    const here = createLockingTaskExecutor(provider, { listener: t.listener })
    const there = createLockingTaskExecutor(provider, { listener: t.listener })
    const outcome = (o: string) =>
      t.sum('shedlock.slot.outcomes', { 'shedlock.lock.name': 'tick', 'shedlock.slot.outcome': o })
    const slot = new Date(Date.now() - 5_000)
    expect(await here.executeWithLock(() => 'ran', { ...opts('tick'), slot })).toEqual({
      executed: true,
      result: 'ran',
    })
    expect(await there.executeWithLock(() => 'ran', { ...opts('tick'), slot })).toEqual({
      executed: false,
      reason: 'slot-done',
    })
    // A long run of the next slot holds the lock: the one after is claimed, then skipped
    // (overlap 'skip'), and the next one owed (the default).
    const release = deferred()
    const long = here.executeWithLock(() => release.promise, {
      ...opts('tick'),
      slot: new Date(slot.getTime() + 1_000),
    })
    await vi.waitFor(async () => expect(await outcome('run')).toBe(2))
    expect(
      await there.executeWithLock(() => 'ran', {
        ...opts('tick'),
        slot: new Date(slot.getTime() + 2_000),
        overlap: 'skip',
      }),
    ).toEqual({ executed: false, reason: 'held' })
    expect(
      await there.executeWithLock(() => 'ran', { ...opts('tick'), slot: new Date(slot.getTime() + 2_500) }),
    ).toEqual({ executed: false, reason: 'owed' })
    release.resolve()
    await long
    // The owed slot runs once the lock frees, on the node that owed it.
    await vi.waitFor(async () => expect(await outcome('caught_up')).toBe(1), { timeout: 5_000 })
    expect(await outcome('run')).toBe(2)
    expect(await outcome('done_elsewhere')).toBe(1)
    expect(await outcome('skipped')).toBe(1)
    expect(await outcome('owed')).toBe(1)
    // Three slots after the last one recorded, due while no node ran: a catch-up of all of them; one fails.
    const fires = [3, 4, 5].map((s) => new Date(slot.getTime() + s * 1_000))
    let runs = 0
    const caught = await here.catchUp(
      () => {
        if (++runs === 2) throw new Error('second missed slot fails')
      },
      opts('tick'),
      { policy: 'all', within: '1h', fireTimes: () => fires },
    )
    expect(caught.ran).toEqual(fires)
    expect(await outcome('missed')).toBe(3)
    expect(await outcome('caught_up')).toBe(4)
    expect(await t.descriptor('shedlock.slot.outcomes')).toMatchObject({ unit: '{slot}' })
  })

  it('last success: without a ledger, the successes of this process in epoch seconds; failures do not move it', async () => {
    const t = telemetry({ tracer: false, api: false })
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { listener: t.listener })
    expect(await t.attributesOf('shedlock.task.last_success')).toEqual([])
    const before = Date.now()
    await executor.executeWithLock(() => undefined, opts('nightly'))
    const after = Date.now()
    const seen = await t.sum('shedlock.task.last_success', { 'shedlock.lock.name': 'nightly' })
    expect(seen).toBeGreaterThanOrEqual(before / 1000)
    expect(seen).toBeLessThanOrEqual(after / 1000)
    await executor.executeWithLock(() => Promise.reject(new Error('no')), opts('nightly')).catch(() => undefined)
    expect(await t.sum('shedlock.task.last_success', { 'shedlock.lock.name': 'nightly' })).toBe(seen)
    expect(await t.descriptor('shedlock.task.last_success')).toMatchObject({ unit: 's' })
  })

  it('last success: with a ledger, the last success of every task on any node; an unreadable ledger leaves those of this process', async () => {
    const runLedger = inMemoryRunLedger()
    const at = new Date('2026-11-20T02:00:05.000Z')
    await runLedger.record({
      name: 'elsewhere',
      slot: undefined,
      node: 'web-2',
      startedAt: new Date(at.getTime() - 5_000),
      finishedAt: at,
      outcome: 'ok',
      durationMs: 5_000,
    })
    await runLedger.record({
      name: 'failing',
      slot: undefined,
      node: 'web-2',
      startedAt: at,
      finishedAt: at,
      outcome: 'failed',
      durationMs: 1,
    })
    const t = telemetry({ tracer: false, api: false, runLedger })
    expect(await t.attributesOf('shedlock.task.last_success')).toEqual([{ 'shedlock.lock.name': 'elsewhere' }])
    expect(await t.sum('shedlock.task.last_success', { 'shedlock.lock.name': 'elsewhere' })).toBe(at.getTime() / 1000)

    const broken: RunLedger = { ...runLedger, tasks: () => Promise.reject(new Error('store down')) }
    const u = telemetry({ tracer: false, api: false, runLedger: broken })
    await createLockingTaskExecutor(inMemoryLockProvider(), { listener: u.listener }).executeWithLock(
      () => undefined,
      opts('local'),
    )
    expect(await u.attributesOf('shedlock.task.last_success')).toEqual([{ 'shedlock.lock.name': 'local' }])
    expect(() => openTelemetryListener({ tracer: t.tracer, runLedger })).toThrow(/needs a meter/)
  })

  it("next fire: with a ledger, each task's next fire time as its latest finished run recorded it", async () => {
    const runLedger = inMemoryRunLedger()
    const next = new Date('2026-11-20T03:00:00.000Z')
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger })
    await executor.executeWithLock(() => undefined, { ...opts('hourly'), nextFireAt: () => next })
    await executor.executeWithLock(() => undefined, opts('no-schedule'))
    const t = telemetry({ tracer: false, api: false, runLedger })
    expect(await t.attributesOf('shedlock.task.next_fire')).toEqual([{ 'shedlock.lock.name': 'hourly' }])
    expect(await t.sum('shedlock.task.next_fire', { 'shedlock.lock.name': 'hourly' })).toBe(next.getTime() / 1000)
    expect(await t.descriptor('shedlock.task.next_fire')).toMatchObject({ unit: 's' })
  })

  it('a tracer that throws never breaks the task', async () => {
    const tracer = {
      startSpan: () => {
        throw new Error('exporter broken')
      },
    }
    const task = vi.fn(() => 'still runs')
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), {
      listener: openTelemetryListener({ tracer, api }),
    })
    await expect(executor.executeWithLock(task, opts())).resolves.toEqual({ executed: true, result: 'still runs' })
    expect(task).toHaveBeenCalledTimes(1)
  })

  it.each([
    ['no options', undefined, /needs options/],
    ['neither meter nor tracer', {}, /needs a meter, a tracer or both/],
    ['a meter without instruments', { meter: {} }, /meter is not an OpenTelemetry Meter/],
    ['a tracer without startSpan', { tracer: { startSpan: 'no' } }, /tracer is not an OpenTelemetry Tracer/],
    [
      'an api without context.with and trace.setSpan',
      { tracer: { startSpan: () => ({}) }, api: { context: {} } },
      /import \* as api from '@opentelemetry\/api'/,
    ],
    ['api without a tracer', { meter: new MeterProvider().getMeter('x'), api }, /needs a tracer as well/],
  ])('rejects %s with a LockConfigurationError that says what to pass', (_what, options, message) => {
    expect(() => openTelemetryListener(options as never)).toThrow(LockConfigurationError)
    expect(() => openTelemetryListener(options as never)).toThrow(message)
  })

  it('does not import @opentelemetry/api at run time', () => {
    const dir = new URL('../../src/integrations/', import.meta.url)
    const files = readdirSync(dir).filter((file) => /^opentelemetry.*\.ts$/.test(file))
    expect(files).toContain('opentelemetry.ts')
    const imports = files.flatMap((file) =>
      readFileSync(new URL(file, dir), 'utf8')
        .split('\n')
        .filter((line) => /^import\b/.test(line)),
    )
    expect(imports.length).toBeGreaterThan(0)
    expect(imports.filter((line) => line.includes('@opentelemetry'))).toEqual([])
  })
})

/**
 * Two executors on one store stand for two nodes. The provider's `name` is set the way the
 * proposed `LockProvider.name` would set it.
 */
async function twoNodesOnARealStore(store: {
  provider: () => LockProvider
  missingTable: () => LockProvider
  name: string
  errorType: string
}) {
  const t = telemetry()
  const nodeA = createLockingTaskExecutor(named(store.provider(), store.name), { listener: t.listener })
  const nodeB = createLockingTaskExecutor(named(store.provider(), store.name), { listener: t.listener })
  const lockName = `otel-${process.pid}-${Math.random().toString(36).slice(2)}`
  const options = { name: lockName, lockAtMostFor: '1m' } satisfies LockConfigurationOptions
  const release = deferred()
  const started = deferred()
  const running = nodeA.executeWithLock(async () => {
    started.resolve()
    await release.promise
    return 'A ran'
  }, options)
  await started.promise
  await expect(nodeB.executeWithLock(() => 'B ran', options)).resolves.toEqual({ executed: false, reason: 'held' })
  release.resolve()
  await expect(running).resolves.toEqual({ executed: true, result: 'A ran' })
  const failure = await createLockingTaskExecutor(named(store.missingTable(), store.name), { listener: t.listener })
    .executeWithLock(() => 'never', options)
    .catch((e: unknown) => e)
  expect(failure).toBeInstanceOf(LockProviderError)

  const lock = { 'shedlock.lock.name': lockName, 'shedlock.provider.name': store.name }
  expect(await t.sum('shedlock.lock.attempts', { ...lock, 'shedlock.lock.result': 'acquired' })).toBe(1)
  expect(await t.sum('shedlock.lock.attempts', { ...lock, 'shedlock.lock.result': 'not_acquired' })).toBe(1)
  expect(await t.attributesOf('shedlock.lock.attempts')).toContainEqual({
    ...lock,
    'shedlock.lock.result': 'failed',
    'error.type': store.errorType,
  })
  expect((await t.histogram('shedlock.task.duration', lock)).map((h) => h.count)).toEqual([1])
  expect(await t.sum('shedlock.task.active', lock)).toBe(0)
  const outcomes = t
    .spans()
    .map((s) => [
      s.name,
      s.attributes['shedlock.provider.name'],
      s.attributes['shedlock.execution.outcome'],
      s.status.code,
    ])
  expect(outcomes).toEqual([
    [`shedlock ${lockName}`, store.name, 'skipped', api.SpanStatusCode.UNSET],
    [`shedlock ${lockName}`, store.name, 'executed', api.SpanStatusCode.UNSET],
    [`shedlock ${lockName}`, store.name, 'error', api.SpanStatusCode.ERROR],
  ])
}

interface SqliteConnection extends SqliteDatabase {
  exec(sql: string): unknown
  close(): unknown
}

/**
 * libsql (better-sqlite3's API, prebuilt), or node:sqlite where libsql does not load, with the
 * error code each driver gives a missing table.
 */
async function sqliteDriver(): Promise<{
  name: string
  open: (file: string) => SqliteConnection
  missingTableCode: string
}> {
  try {
    const Database = (await import('libsql')).default
    new Database(':memory:').close()
    return { name: 'libsql', open: (file) => new Database(file, { timeout: 5_000 }), missingTableCode: 'SQLITE_ERROR' }
  } catch (error) {
    const specifier = 'node:sqlite'
    const sqlite = (await import(/* @vite-ignore */ specifier).catch(() => {
      throw error
    })) as { DatabaseSync: new (file: string) => SqliteConnection }
    return {
      name: 'node:sqlite',
      open: (file) => {
        const db = new sqlite.DatabaseSync(file)
        db.exec('PRAGMA busy_timeout = 5000')
        return db
      },
      missingTableCode: 'ERR_SQLITE_ERROR',
    }
  }
}

const sqlite = await sqliteDriver()

describe(`on SQLite (${sqlite.name}, two connections to one file)`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-otel-'))
  const file = join(dir, 'locks.sqlite')
  const connections: SqliteConnection[] = []
  const open = () => {
    const db = sqlite.open(file)
    connections.push(db)
    return db
  }
  afterAll(() => {
    for (const db of connections) db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('one node runs, the other skips, a missing table is an error span typed by the driver; metrics agree', async () => {
    open().exec(sqliteSchema())
    await twoNodesOnARealStore({
      name: 'sqlite',
      provider: () => sqliteLockProvider({ database: open() }),
      missingTable: () => sqliteLockProvider({ database: open(), tableName: 'no_such_table' }),
      errorType: sqlite.missingTableCode,
    })
  })
})

const pool = await postgresPoolOrSkip(4)

describe.skipIf(!pool)('on PostgreSQL', () => {
  const db = pool!
  const table = uniqueTable('shedlock_otel')
  beforeAll(async () => {
    await db.query(postgresSchema({ tableName: table }))
  })
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })

  it('one node runs, the other skips, a missing table is an error span typed by SQLSTATE 42P01', async () => {
    await twoNodesOnARealStore({
      name: 'postgres',
      provider: () => postgresLockProvider({ client: db, tableName: table }),
      missingTable: () => postgresLockProvider({ client: db, tableName: `${table}_missing` }),
      errorType: '42P01',
    })
  })
})

describe('openTelemetryListener metrics by run outcome, and with Java ShedLock names', () => {
  function withJava(javaMetricNames: boolean) {
    const reader = new CollectingReader()
    const meter = new MeterProvider({ readers: [reader] }).getMeter('shedlock')
    const listener = openTelemetryListener({ meter, javaMetricNames })
    const metrics = async () => {
      const { resourceMetrics } = await reader.collect()
      return resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics)
    }
    return { listener, metrics }
  }

  async function ok_failed_lost_held(listener: LockingTaskExecutorListener): Promise<void> {
    const clock = manualClock(Date.UTC(2024, 0, 1))
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { listener, clock })
    await executor.executeWithLock(() => undefined, opts('report'))
    await executor
      .executeWithLock(() => {
        throw new Error('boom')
      }, opts('report'))
      .catch(() => undefined)
    await executor.executeWithLock(async () => {
      clock.advance(11 * 60_000)
      await extendActiveLock('20m').catch(() => undefined)
    }, opts('report'))
    // Held by this executor while another one tries: not acquired.
    const release = deferred<void>()
    const holding = executor.executeWithLock(() => release.promise, opts('report'))
    await createLockingTaskExecutor(provider, { listener, clock }).executeWithLock(() => undefined, opts('report'))
    release.resolve()
    await holding
  }

  it('counts runs by outcome: ok, failed, lock_lost', async () => {
    const { listener, metrics } = withJava(false)
    await ok_failed_lost_held(listener)
    const runs = (await metrics()).find((m) => m.descriptor.name === 'shedlock.task.runs')!
    const byOutcome = Object.fromEntries(runs.dataPoints.map((p) => [p.attributes['shedlock.run.outcome'], p.value]))
    expect(byOutcome).toEqual({ ok: 2, failed: 1, lock_lost: 1 })
    expect(runs.dataPoints[0]!.attributes['shedlock.lock.name']).toBe('report')
  })

  it("javaMetricNames: Java ShedLock 7.7's Micrometer meters, tagged lock.name", async () => {
    const { listener, metrics } = withJava(true)
    await ok_failed_lost_held(listener)
    const all = await metrics()
    const value = (name: string) => {
      const metric = all.find((m) => m.descriptor.name === name)
      expect(metric, name).toBeDefined()
      expect(metric!.dataPoints.map((p) => p.attributes)).toEqual([{ 'lock.name': 'report' }])
      return metric!.dataPoints[0]!.value
    }
    // Java's names (MicrometerLockingTaskExecutorListener): attempts, acquired, not.acquired, execution.duration/active.
    expect(value('shedlock.lock.attempts')).toBe(5)
    expect(value('shedlock.lock.acquired')).toBe(4)
    expect(value('shedlock.lock.not.acquired')).toBe(1)
    expect((value('shedlock.execution.duration') as Histogram).count).toBe(4)
    expect(value('shedlock.execution.active')).toBe(0)
    expect(all.map((m) => m.descriptor.name)).not.toContain('shedlock.task.duration')
    expect(all.map((m) => m.descriptor.name)).not.toContain('shedlock.task.active')
  })
})
