// Structural subsets of @opentelemetry/api 1.x, so that shedlock/opentelemetry imports nothing at run time:
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
