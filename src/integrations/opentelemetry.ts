import { LockConfigurationError } from '../core/errors.ts'
import type { LockingTaskExecutorListener } from '../core/locking-task-executor.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import type { OpenTelemetryApiLike, OpenTelemetryMeterLike, OpenTelemetryTracerLike } from './opentelemetry-api.ts'
import { javaAttributes, shedlockAttributes } from './opentelemetry-attributes.ts'
import { lockMetrics } from './opentelemetry-metrics.ts'
import { lockSpans } from './opentelemetry-spans.ts'

export type {
  OpenTelemetryApiLike,
  OpenTelemetryAttributes,
  OpenTelemetryCounterLike,
  OpenTelemetryHistogramLike,
  OpenTelemetryMeterLike,
  OpenTelemetryMetricOptions,
  OpenTelemetryObservableGaugeLike,
  OpenTelemetryObservableResultLike,
  OpenTelemetrySpanLike,
  OpenTelemetryTracerLike,
} from './opentelemetry-api.ts'

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
   * The executor's run ledger. With it, the `shedlock.task.next_fire` gauge reports each task's
   * next fire time (overdue tasks), and the `shedlock.task.last_success` gauge reports the last
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
 * - `shedlock.task.next_fire` (gauge, `s`, with `runLedger`): each task's next fire time as its
 *   latest finished run recorded it. Alert on `time() - shedlock_task_next_fire_seconds > 60`: the
 *   task is overdue, its schedule stopped.
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
  const lockAttributes = java ? javaAttributes : shedlockAttributes
  const metrics = meter && lockMetrics(meter, { java, lockAttributes, runLedger: options.runLedger })
  const spans = tracer && lockSpans(tracer, api, lockAttributes)
  // Metrics first, then spans, in every hook. A re-entrant call runs under the outer call's lock
  // and records nothing of its own.
  return {
    onLockAttempt(configuration, execution) {
      metrics?.onLockAttempt(configuration, execution)
      spans?.onLockAttempt(configuration, execution)
    },
    onLockAcquired(configuration, execution) {
      metrics?.onLockAcquired(configuration, execution)
      spans?.onLockAcquired(configuration, execution)
    },
    onLockNotAcquired(configuration, execution) {
      metrics?.onLockNotAcquired(configuration, execution)
      spans?.onLockNotAcquired(configuration, execution)
    },
    onLockFailed(configuration, error, execution) {
      metrics?.onLockFailed(configuration, error, execution)
      spans?.onLockFailed(configuration, error, execution)
    },
    aroundTask(configuration, start, execution) {
      if (!spans) return start()
      spans.aroundTask(configuration, start, execution)
    },
    onTaskStarted(configuration, execution) {
      if (execution.reentrant) return
      metrics?.onTaskStarted(configuration, execution)
    },
    onTaskFinished(configuration, outcome, execution) {
      if (execution.reentrant) return
      metrics?.onTaskFinished(configuration, outcome, execution)
      spans?.onTaskFinished(configuration, outcome, execution)
    },
    onSlotClaimed(configuration, slot, execution) {
      metrics?.onSlotClaimed(configuration, slot, execution)
    },
    onSlotDone(configuration, slot, execution) {
      metrics?.onSlotDone(configuration, slot, execution)
    },
    onSlotSkipped(configuration, slot, execution) {
      metrics?.onSlotSkipped(configuration, slot, execution)
    },
    onSlotOwed(configuration, slot, execution) {
      metrics?.onSlotOwed(configuration, slot, execution)
    },
    onSlotMissed(configuration, slot, execution) {
      metrics?.onSlotMissed(configuration, slot, execution)
    },
    onSlotCaughtUp(configuration, slot, execution) {
      metrics?.onSlotCaughtUp(configuration, slot, execution)
    },
    onLockExtended(configuration, execution) {
      spans?.onLockExtended(configuration, execution)
    },
    onLockLost(configuration, reason, execution) {
      metrics?.onLockLost(configuration, reason, execution)
      spans?.onLockLost(configuration, reason, execution)
    },
  }
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
