import type { LockExecution } from '../core/diagnostics.ts'
import { LockProviderError } from '../core/errors.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { OpenTelemetryAttributes } from './opentelemetry-api.ts'

// The attributes that the metrics and the spans of openTelemetryListener() share.

/** The attributes naming one lock (and its provider) on a metric or a span. */
export type LockAttributes = (configuration: LockConfiguration, execution: LockExecution) => OpenTelemetryAttributes

/** shedlock's own attribute names. */
export function shedlockAttributes(
  configuration: LockConfiguration,
  execution: LockExecution,
): OpenTelemetryAttributes {
  return execution.provider === undefined
    ? { 'shedlock.lock.name': configuration.name }
    : { 'shedlock.lock.name': configuration.name, 'shedlock.provider.name': execution.provider }
}

/** Java ShedLock's one tag (MicrometerLockingTaskExecutorListener.LOCK_NAME_TAG). */
export function javaAttributes(configuration: LockConfiguration, _execution: LockExecution): OpenTelemetryAttributes {
  return { 'lock.name': configuration.name }
}

/**
 * `error.type` must have few distinct values: a store failure is named by its driver's error
 * code (`ECONNREFUSED`, SQLSTATE `42P01`) when there is one, any other error by its class name.
 */
export function errorType(error: unknown): string {
  const source = error instanceof LockProviderError && error.cause !== undefined ? error.cause : error
  const code = (source as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code !== '' && code.length <= 64) return code
  if (error instanceof Error) return error.name
  return '_OTHER'
}
