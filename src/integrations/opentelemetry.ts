import type { LockExecution } from '../core/diagnostics.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { LockingTaskExecutorListener } from '../core/locking-task-executor.ts'
import type { RunLedger } from '../core/run-ledger.ts'

// Structural subsets of @opentelemetry/api 1.x, so that this module imports nothing at run time:
// the application passes its own Meter, Tracer and (optionally) API namespace.

/** Attribute values as `@opentelemetry/api` accepts them (the scalar kinds this module writes). */
export type OpenTelemetryAttributes = Record<string, string | number | boolean>

/** What this module needs of an `@opentelemetry/api` `Counter` or `UpDownCounter`. */
export interface OpenTelemetryCounterLike {
  add(value: number, attributes?: OpenTelemetryAttributes): void
}

/** What this module needs of an `@opentelemetry/api` `Histogram`. */
export interface OpenTelemetryHistogramLike {
  record(value: number, attributes?: OpenTelemetryAttributes): void
}

/** Instrument options, as `@opentelemetry/api`'s `MetricOptions`. */
export interface OpenTelemetryMetricOptions {
  description?: string
  unit?: string
  advice?: { explicitBucketBoundaries?: number[] }
}

/** What an `@opentelemetry/api` observable callback is given: `observe(value, attributes)`. */
export interface OpenTelemetryObservableResultLike {
  observe(value: number, attributes?: OpenTelemetryAttributes): void
}

/** What this module needs of an `@opentelemetry/api` `ObservableGauge`. */
export interface OpenTelemetryObservableGaugeLike {
  addCallback(callback: (result: OpenTelemetryObservableResultLike) => void | Promise<void>): void
}

/** What this module needs of an `@opentelemetry/api` `Meter`. */
export interface OpenTelemetryMeterLike {
  createCounter(name: string, options?: OpenTelemetryMetricOptions): OpenTelemetryCounterLike
  createUpDownCounter(name: string, options?: OpenTelemetryMetricOptions): OpenTelemetryCounterLike
  createHistogram(name: string, options?: OpenTelemetryMetricOptions): OpenTelemetryHistogramLike
  /** `@opentelemetry/api` 1.3 and later; without it, no `shedlock.task.last_success` gauge. */
  createObservableGauge?(name: string, options?: OpenTelemetryMetricOptions): OpenTelemetryObservableGaugeLike
}

/** What this module needs of an `@opentelemetry/api` `Span`. */
export interface OpenTelemetrySpanLike {
  setAttribute(key: string, value: string | number | boolean): unknown
  addEvent(name: string, attributes?: OpenTelemetryAttributes): unknown
  /** `code` 2 is `SpanStatusCode.ERROR`. */
  setStatus(status: { code: number; message?: string }): unknown
  recordException(exception: Error | string): unknown
  end(): void
}

/** What this module needs of an `@opentelemetry/api` `Tracer`. */
export interface OpenTelemetryTracerLike {
  startSpan(name: string, options?: { attributes?: OpenTelemetryAttributes }): OpenTelemetrySpanLike
}

/**
 * The parts of the `@opentelemetry/api` namespace that make a span the active one: pass
 * `import * as api from '@opentelemetry/api'`.
 */
export interface OpenTelemetryApiLike {
  context: {
    active(): unknown
    with<T>(context: unknown, fn: () => T): T
  }
  trace: {
    setSpan(context: unknown, span: OpenTelemetrySpanLike): unknown
  }
}

/** Options of {@link openTelemetryListener}. Pass a `meter`, a `tracer`, or both. */
export interface OpenTelemetryListenerOptions {
  /** Records the metrics, e.g. `metrics.getMeter('shedlock')`. Without it, no metrics. */
  meter?: OpenTelemetryMeterLike
  /** Records one span per lock attempt, e.g. `trace.getTracer('shedlock')`. Without it, no spans. */
  tracer?: OpenTelemetryTracerLike
  /**
   * `import * as api from '@opentelemetry/api'`. With it, the task runs with its lock's span
   * active, so spans the task creates (database queries, HTTP calls) are children of the lock's
   * span. Without it, they are the lock span's siblings. Needs `tracer`.
   */
  api?: OpenTelemetryApiLike
  /**
   * The executor's run ledger. With it, the `shedlock.task.last_success` gauge reports the last
   * success of every task in the ledger, on whichever node it ran (one `tasks()` read per metric
   * collection). Without it, the gauge reports the successes of this process only.
   */
  runLedger?: RunLedger
  /**
   * Emit the meters of Java ShedLock's Micrometer integration (`MicrometerLockingTaskExecutorListener`,
   * ShedLock 7.7), with its names and its `lock.name` attribute, so that a fleet of Java and Node
   * nodes fills one dashboard: `shedlock.lock.attempts`, `shedlock.lock.acquired`,
   * `shedlock.lock.not.acquired` (counters), `shedlock.execution.duration` (histogram, `s`; a
   * Micrometer Timer) and `shedlock.execution.active` (up-down counter; a Micrometer Gauge). They
   * replace `shedlock.lock.attempts` (with `shedlock.lock.result`), `shedlock.task.duration` and
   * `shedlock.task.active`; the meters Java has no counterpart of stay, with `lock.name` as well.
   * @default false
   */
  javaMetricNames?: boolean
}

// Scheduled tasks last from milliseconds to hours; the SDK's default boundaries (0 to 10 000)
// suit milliseconds, not seconds.
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600]

const SPAN_STATUS_ERROR = 2

/**
 * A listener that reports locks and tasks to OpenTelemetry, through the `Meter` and `Tracer` you
 * pass (this package does not depend on `@opentelemetry/api`).
 *
 * Metrics (attributes `shedlock.lock.name`, and `shedlock.provider.name` when the provider has a
 * name):
 * - `shedlock.lock.attempts` (counter, `{attempt}`): one per attempt, with `shedlock.lock.result`
 *   `acquired`, `not_acquired` (another node holds the lock) or `failed` (the store failed; with
 *   `error.type`).
 * - `shedlock.lock.losses` (counter, `{loss}`): locks that could no longer be trusted while their
 *   task still ran.
 * - `shedlock.task.duration` (histogram, `s`): tasks run under a lock; `error.type` when the task
 *   threw.
 * - `shedlock.task.active` (up-down counter, `{task}`): tasks running under a lock right now.
 * - `shedlock.task.runs` (counter, `{run}`): tasks run under a lock, by `shedlock.run.outcome`:
 *   `ok`, `failed` (the task threw) or `lock_lost` (the lock could no longer be trusted while it ran).
 * - `shedlock.task.last_success` (gauge, `s`): when each task last succeeded, in seconds since
 *   the epoch; from `runLedger` when given (every node's runs), else this process's runs. Alert
 *   on `time() - shedlock_task_last_success_seconds > max age`.
 * - `shedlock.slot.outcomes` (counter, `{slot}`): slot runs, by `shedlock.slot.outcome`: `run`
 *   (this node claimed the slot and ran it), `done_elsewhere` (the slot had run, or was claimed,
 *   on some node already), `skipped` (claimed while a run of an earlier slot held the lock),
 *   `missed` (a catch-up found it missed while every node was down) and `caught_up` (a catch-up
 *   ran it).
 *
 * With `javaMetricNames`, Java ShedLock's Micrometer meters instead of the first, third and fourth
 * (see that option).
 *
 * Spans: one per attempt, named `shedlock <lock name>`, a child of the span active where
 * `executeWithLock()` was called. It ends when the task finishes, or at once when the lock is not
 * acquired, with `shedlock.execution.outcome` `executed`, `failed` (the task threw), `skipped`
 * (another node holds the lock) or `error` (the store failed). Failures set the span's status to
 * error and record the exception. Where the store hands out fencing tokens, the span has the
 * lock's as `shedlock.lock.fencing_token` (a decimal string), from the acquisition on. A nested
 * call with the same name (re-entrant) runs under the
 * outer call's lock and records nothing of its own.
 *
 * ```ts
 * import * as api from '@opentelemetry/api'
 * import { createLockingTaskExecutor } from 'shedlock'
 * import { openTelemetryListener } from 'shedlock/opentelemetry'
 *
 * const listener = openTelemetryListener({ meter: api.metrics.getMeter('shedlock'), tracer: api.trace.getTracer('shedlock'), api })
 * const executor = createLockingTaskExecutor(provider, { listener })
 * ```
 *
 * @throws LockConfigurationError when neither `meter` nor `tracer` is given, or one of them is not
 *   an `@opentelemetry/api` object.
 */
export function openTelemetryListener(options: OpenTelemetryListenerOptions): LockingTaskExecutorListener {
  const { meter, tracer, api } = validate(options)
  const java = options.javaMetricNames === true
  const instruments = meter && {
    attempts: java
      ? undefined
      : meter.createCounter('shedlock.lock.attempts', {
          unit: '{attempt}',
          description:
            'Lock attempts, by result: acquired, not_acquired (another node holds the lock) or failed (the store failed)',
        }),
    losses: meter.createCounter('shedlock.lock.losses', {
      unit: '{loss}',
      description: 'Locks that could no longer be trusted while their task still ran',
    }),
    duration: meter.createHistogram(java ? 'shedlock.execution.duration' : 'shedlock.task.duration', {
      unit: 's',
      description: 'Duration of tasks run under a lock',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
    active: meter.createUpDownCounter(java ? 'shedlock.execution.active' : 'shedlock.task.active', {
      unit: '{task}',
      description: 'Tasks running under a lock in this process',
    }),
    runs: meter.createCounter('shedlock.task.runs', {
      unit: '{run}',
      description: 'Tasks run under a lock, by outcome: ok, failed or lock_lost',
    }),
    slots: meter.createCounter('shedlock.slot.outcomes', {
      unit: '{slot}',
      description:
        'Slot runs, by outcome: run, done_elsewhere, skipped (lock held), missed (every node was down) or caught_up',
    }),
  }
  // Java ShedLock's Micrometer counters (MicrometerLockingTaskExecutorListener), same names.
  const javaCounters =
    !meter || !java
      ? undefined
      : {
          attempts: meter.createCounter('shedlock.lock.attempts', {
            description: 'Lock attempts (Java ShedLock Micrometer name)',
          }),
          acquired: meter.createCounter('shedlock.lock.acquired', {
            description: 'Locks acquired (Java ShedLock Micrometer name)',
          }),
          notAcquired: meter.createCounter('shedlock.lock.not.acquired', {
            description: 'Locks not acquired: held elsewhere (Java ShedLock Micrometer name)',
          }),
        }
  const lockAttributes = java ? javaAttributes : shedlockAttributes
  // Runs whose lock was lost while they ran, for the outcome of shedlock.task.runs.
  const lost = new WeakSet<LockExecution>()
  // Epoch milliseconds of each task's last success in this process, for the gauge without a ledger.
  const lastSuccess = new Map<string, number>()
  const { runLedger } = options
  meter
    ?.createObservableGauge?.('shedlock.task.last_success', {
      unit: 's',
      description: 'When each task last succeeded, in seconds since the epoch',
    })
    .addCallback(async (result) => {
      const seen = new Map(lastSuccess)
      if (runLedger) {
        // A ledger that cannot be read leaves this process's own successes: a gauge callback must not throw.
        const tasks = await runLedger.tasks().catch(() => [])
        for (const task of tasks) {
          const at = task.lastSuccess?.finishedAt ?? task.lastSuccess?.startedAt
          if (at && at.getTime() > (seen.get(task.name) ?? 0)) seen.set(task.name, at.getTime())
        }
      }
      for (const [name, at] of seen)
        result.observe(at / 1000, java ? { 'lock.name': name } : { 'shedlock.lock.name': name })
    })
  // Slot runs claimed here and not yet started or skipped.
  const claimed = new WeakSet<LockExecution>()
  const slotOutcome = (configuration: LockConfiguration, execution: LockExecution, outcome: string): void =>
    instruments?.slots.add(1, { ...lockAttributes(configuration, execution), 'shedlock.slot.outcome': outcome })
  // The executor passes the same execution object to every hook of one call: concurrent calls,
  // of one name or several, each find their own span.
  const spans = new WeakMap<LockExecution, OpenTelemetrySpanLike>()

  const endSpan = (
    execution: LockExecution,
    outcome: 'executed' | 'failed' | 'skipped' | 'error',
    error?: unknown,
  ): void => {
    const span = spans.get(execution)
    if (!span) return
    spans.delete(execution)
    span.setAttribute('shedlock.execution.outcome', outcome)
    if (outcome === 'failed' || outcome === 'error') {
      span.setAttribute('error.type', errorType(error))
      span.recordException(error instanceof Error ? error : String(error))
      span.setStatus({ code: SPAN_STATUS_ERROR, message: error instanceof Error ? error.message : String(error) })
    }
    span.end()
  }

  return {
    onLockAttempt(configuration, execution) {
      javaCounters?.attempts.add(1, lockAttributes(configuration, execution))
      if (!tracer) return
      const attributes: OpenTelemetryAttributes = {
        ...lockAttributes(configuration, execution),
        'shedlock.lock.at_most_for': configuration.lockAtMostFor / 1000,
        'shedlock.lock.at_least_for': configuration.lockAtLeastFor / 1000,
      }
      spans.set(execution, tracer.startSpan(`shedlock ${configuration.name}`, { attributes }))
    },
    onLockAcquired(configuration, execution) {
      instruments?.attempts?.add(1, { ...lockAttributes(configuration, execution), 'shedlock.lock.result': 'acquired' })
      javaCounters?.acquired.add(1, lockAttributes(configuration, execution))
      const span = spans.get(execution)
      if (!span) return
      span.addEvent('shedlock.lock.acquired', deadlines(configuration))
      // A string: attribute numbers are doubles, exact to 2^53 only. Never a metric attribute (one value per run).
      if (execution.fencingToken !== undefined)
        span.setAttribute('shedlock.lock.fencing_token', execution.fencingToken.toString())
    },
    onLockNotAcquired(configuration, execution) {
      instruments?.attempts?.add(1, {
        ...lockAttributes(configuration, execution),
        'shedlock.lock.result': 'not_acquired',
      })
      javaCounters?.notAcquired.add(1, lockAttributes(configuration, execution))
      endSpan(execution, 'skipped')
    },
    onLockFailed(configuration, error, execution) {
      instruments?.attempts?.add(1, {
        ...lockAttributes(configuration, execution),
        'shedlock.lock.result': 'failed',
        'error.type': errorType(error),
      })
      endSpan(execution, 'error', error)
    },
    aroundTask(_configuration, start, execution) {
      const span = spans.get(execution)
      if (!api || !span) return start()
      api.context.with(api.trace.setSpan(api.context.active(), span), start)
    },
    onTaskStarted(configuration, execution) {
      if (execution.reentrant) return
      instruments?.active.add(1, lockAttributes(configuration, execution))
      if (claimed.delete(execution)) slotOutcome(configuration, execution, 'run')
    },
    onTaskFinished(configuration, outcome, execution) {
      if (execution.reentrant) return
      if (instruments) {
        const attributes = lockAttributes(configuration, execution)
        instruments.active.add(-1, attributes)
        // Java's Timer has lock.name alone: a failed run is one more sample of the same series.
        instruments.duration.record(
          outcome.durationMs / 1000,
          outcome.failed && !java ? { ...attributes, 'error.type': errorType(outcome.error) } : attributes,
        )
        const result = lost.has(execution) ? 'lock_lost' : outcome.failed ? 'failed' : 'ok'
        instruments.runs.add(1, { ...attributes, 'shedlock.run.outcome': result })
      }
      if (outcome.failed) endSpan(execution, 'failed', outcome.error)
      else {
        lastSuccess.set(configuration.name, Date.now())
        endSpan(execution, 'executed')
      }
    },
    onSlotClaimed(_configuration, _slot, execution) {
      claimed.add(execution)
    },
    onSlotDone(configuration, _slot, execution) {
      slotOutcome(configuration, execution, 'done_elsewhere')
    },
    onSlotSkipped(configuration, _slot, execution) {
      claimed.delete(execution)
      slotOutcome(configuration, execution, 'skipped')
    },
    onSlotMissed(configuration, _slot, execution) {
      slotOutcome(configuration, execution, 'missed')
    },
    onSlotCaughtUp(configuration, _slot, execution) {
      slotOutcome(configuration, execution, 'caught_up')
    },
    onLockExtended(configuration, execution) {
      spans.get(execution)?.addEvent('shedlock.lock.extended', deadlines(configuration))
    },
    onLockLost(configuration, reason, execution) {
      lost.add(execution)
      instruments?.losses.add(1, lockAttributes(configuration, execution))
      spans.get(execution)?.recordException(reason)
    },
  }
}

function shedlockAttributes(configuration: LockConfiguration, execution: LockExecution): OpenTelemetryAttributes {
  return execution.provider === undefined
    ? { 'shedlock.lock.name': configuration.name }
    : { 'shedlock.lock.name': configuration.name, 'shedlock.provider.name': execution.provider }
}

// Java ShedLock's one tag (MicrometerLockingTaskExecutorListener.LOCK_NAME_TAG).
function javaAttributes(configuration: LockConfiguration, _execution: LockExecution): OpenTelemetryAttributes {
  return { 'lock.name': configuration.name }
}

function deadlines(configuration: LockConfiguration): OpenTelemetryAttributes {
  return {
    'shedlock.lock.at_most_until': configuration.lockAtMostUntil.toISOString(),
    'shedlock.lock.at_least_until': configuration.lockAtLeastUntil.toISOString(),
  }
}

/**
 * `error.type` must have few distinct values: a store failure is named by its driver's error
 * code (`ECONNREFUSED`, SQLSTATE `42P01`) when there is one, any other error by its class name.
 */
function errorType(error: unknown): string {
  const source = error instanceof LockProviderError && error.cause !== undefined ? error.cause : error
  const code = (source as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code !== '' && code.length <= 64) return code
  if (error instanceof Error) return error.name
  return '_OTHER'
}

function validate(options: OpenTelemetryListenerOptions): OpenTelemetryListenerOptions {
  const fix =
    "pass openTelemetryListener({ meter: metrics.getMeter('shedlock'), tracer: trace.getTracer('shedlock') }) with objects from @opentelemetry/api"
  if (options === null || typeof options !== 'object')
    throw new LockConfigurationError(`openTelemetryListener() needs options: ${fix}`)
  const { meter, tracer, api } = options
  if (meter === undefined && tracer === undefined)
    throw new LockConfigurationError(`openTelemetryListener() needs a meter, a tracer or both: ${fix}`)
  if (meter !== undefined && !hasMethods(meter, ['createCounter', 'createUpDownCounter', 'createHistogram'])) {
    throw new LockConfigurationError(`openTelemetryListener(): meter is not an OpenTelemetry Meter: ${fix}`)
  }
  if (tracer !== undefined && !hasMethods(tracer, ['startSpan'])) {
    throw new LockConfigurationError(`openTelemetryListener(): tracer is not an OpenTelemetry Tracer: ${fix}`)
  }
  if (api !== undefined && !(hasMethods(api?.context, ['active', 'with']) && hasMethods(api?.trace, ['setSpan']))) {
    throw new LockConfigurationError(
      "openTelemetryListener(): api must be the @opentelemetry/api namespace: import * as api from '@opentelemetry/api'",
    )
  }
  if (options.runLedger !== undefined && (meter === undefined || typeof options.runLedger?.tasks !== 'function')) {
    throw new LockConfigurationError(
      'openTelemetryListener(): runLedger feeds the shedlock.task.last_success gauge, so it needs a meter and a RunLedger (e.g. postgresRunLedger({ client }))',
    )
  }
  if (api !== undefined && tracer === undefined) {
    throw new LockConfigurationError(
      'openTelemetryListener(): api makes the lock span active in the task, so it needs a tracer as well; pass tracer or drop api',
    )
  }
  return options
}

function hasMethods(value: unknown, methods: readonly string[]): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    methods.every((method) => typeof (value as Record<string, unknown>)[method] === 'function')
  )
}
