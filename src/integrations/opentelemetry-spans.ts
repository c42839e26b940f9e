import type { LockExecution } from '../core/diagnostics.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { LockingTaskExecutorListener } from '../core/locking-task-executor.ts'
import type {
  OpenTelemetryApiLike,
  OpenTelemetryAttributes,
  OpenTelemetrySpanLike,
  OpenTelemetryTracerLike,
} from './opentelemetry-api.ts'
import { errorType, type LockAttributes } from './opentelemetry-attributes.ts'

// The spans of openTelemetryListener(), one per lock attempt; its JSDoc describes them.

/** The hooks the spans follow; `openTelemetryListener()` leaves re-entrant calls out. */
export type SpansHooks = Required<
  Pick<
    LockingTaskExecutorListener,
    | 'onLockAttempt'
    | 'onLockAcquired'
    | 'onLockNotAcquired'
    | 'onLockFailed'
    | 'aroundTask'
    | 'onTaskFinished'
    | 'onLockExtended'
    | 'onLockLost'
  >
>

const SPAN_STATUS_ERROR = 2

/** Starts and ends a span of `tracer` per lock attempt; with `api`, the task runs with its span active. */
export function lockSpans(
  tracer: OpenTelemetryTracerLike,
  api: OpenTelemetryApiLike | undefined,
  lockAttributes: LockAttributes,
): SpansHooks {
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
      const attributes: OpenTelemetryAttributes = {
        ...lockAttributes(configuration, execution),
        'shedlock.lock.at_most_for': configuration.lockAtMostFor / 1000,
        'shedlock.lock.at_least_for': configuration.lockAtLeastFor / 1000,
      }
      spans.set(execution, tracer.startSpan(`shedlock ${configuration.name}`, { attributes }))
    },
    onLockAcquired(configuration, execution) {
      const span = spans.get(execution)
      if (!span) return
      span.addEvent('shedlock.lock.acquired', deadlines(configuration))
      // A string: attribute numbers are doubles, exact to 2^53 only. Never a metric attribute (one value per run).
      if (execution.fencingToken !== undefined)
        span.setAttribute('shedlock.lock.fencing_token', execution.fencingToken.toString())
    },
    onLockNotAcquired(_configuration, execution) {
      endSpan(execution, 'skipped')
    },
    onLockFailed(_configuration, error, execution) {
      endSpan(execution, 'error', error)
    },
    aroundTask(_configuration, start, execution) {
      const span = spans.get(execution)
      if (!api || !span) return start()
      api.context.with(api.trace.setSpan(api.context.active(), span), start)
    },
    onTaskFinished(_configuration, outcome, execution) {
      if (outcome.failed) endSpan(execution, 'failed', outcome.error)
      else endSpan(execution, 'executed')
    },
    onLockExtended(configuration, execution) {
      spans.get(execution)?.addEvent('shedlock.lock.extended', deadlines(configuration))
    },
    onLockLost(_configuration, reason, execution) {
      spans.get(execution)?.recordException(reason)
    },
  }
}

function deadlines(configuration: LockConfiguration): OpenTelemetryAttributes {
  return {
    'shedlock.lock.at_most_until': configuration.lockAtMostUntil.toISOString(),
    'shedlock.lock.at_least_until': configuration.lockAtLeastUntil.toISOString(),
  }
}
