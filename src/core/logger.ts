import { LockConfigurationError } from './errors.ts'
import type { LockExecution } from './diagnostics.ts'
import type { LockingTaskExecutorListener } from './executor-events.ts'
import type { LockConfiguration } from './lock-configuration.ts'
import { redact } from './redact.ts'

/** One logging method: `console.info` (message first) or pino's `logger.info` (fields first). */
export type LogMethod = (...args: unknown[]) => void

/**
 * Where the executor logs: `console`, or a pino (or bunyan) logger. A logger with a `bindings()`
 * method (pino's) is called with the fields first, `logger.warn({ lock }, message)`; any other with
 * the message first, `logger.warn(message, { lock })`. `debug` is optional.
 */
export interface ShedlockLogger {
  error: LogMethod
  warn: LogMethod
  info: LogMethod
  debug?: LogMethod
}

/** What each log line carries besides its message. */
type Fields = Record<string, string | number | undefined>

/**
 * A listener that logs what an operator wants to know, at these levels:
 * - `error`: a task failed, a lock was lost while its task ran, the store failed to lock;
 * - `warn`: a slot skipped because the lock was held, slots missed while every node was down, a
 *   failed release or run-ledger write;
 * - `info`: a task ran (with its duration), a missed slot caught up;
 * - `debug`: a lock held elsewhere (skipped), a slot done on another node, an extension.
 * Error messages are redacted (URL passwords, `password=` values). Each line has the fields
 * `lock` and `provider`, and `fencingToken` (a decimal string) once the lock was taken from a
 * store that hands out tokens.
 */
export function loggerListener(logger: ShedlockLogger): LockingTaskExecutorListener {
  if (
    logger === null ||
    typeof logger !== 'object' ||
    !['error', 'warn', 'info'].every((m) => typeof (logger as unknown as Record<string, unknown>)[m] === 'function')
  ) {
    throw new LockConfigurationError(
      'createLockingTaskExecutor(): logger must have error, warn and info methods: pass console, or a pino logger',
    )
  }
  const fieldsFirst = typeof (logger as { bindings?: unknown }).bindings === 'function'
  const log = (level: keyof ShedlockLogger, message: string, fields: Fields): void => {
    const method = logger[level] ?? (level === 'debug' ? undefined : logger.info)
    if (!method) return
    const clean = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined))
    if (fieldsFirst) method.call(logger, clean, `shedlock: ${message}`)
    else method.call(logger, `shedlock: ${message}`, clean)
  }
  // The token as a string: a bigint has no JSON, which most log transports write.
  const base = (configuration: LockConfiguration, execution: LockExecution): Fields => ({
    lock: configuration.name,
    provider: execution.provider,
    fencingToken: execution.fencingToken?.toString(),
  })
  return {
    onTaskFinished(configuration, outcome, execution) {
      if (execution.reentrant) return
      const ms = Math.round(outcome.durationMs)
      if (outcome.failed)
        log('error', `task "${configuration.name}" failed after ${ms} ms: ${errorText(outcome.error)}`, {
          ...base(configuration, execution),
          durationMs: ms,
        })
      else
        log('info', `task "${configuration.name}" ran in ${ms} ms`, {
          ...base(configuration, execution),
          durationMs: ms,
        })
    },
    onLockNotAcquired(configuration, execution) {
      log('debug', `task "${configuration.name}" skipped: its lock is held elsewhere`, base(configuration, execution))
    },
    onLockFailed(configuration, error, execution) {
      log(
        'error',
        `lock "${configuration.name}" could not be taken, the task did not run: ${errorText(error)}`,
        base(configuration, execution),
      )
    },
    onLockLost(configuration, reason, execution) {
      log(
        'error',
        `lock "${configuration.name}" lost while its task ran (another node may run it too): ${errorText(reason)}`,
        base(configuration, execution),
      )
    },
    onUnlockFailed(configuration, error, execution) {
      log(
        'warn',
        `lock "${configuration.name}" could not be released, it expires at ${configuration.lockAtMostUntil.toISOString()}: ${errorText(error)}`,
        base(configuration, execution),
      )
    },
    onLockExtended(configuration, execution) {
      log(
        'debug',
        `lock "${configuration.name}" extended until ${configuration.lockAtMostUntil.toISOString()}`,
        base(configuration, execution),
      )
    },
    onSlotDone(configuration, slot, execution) {
      log('debug', `slot ${slot.toISOString()} of "${configuration.name}" already ran or was skipped on some node`, {
        ...base(configuration, execution),
        slot: slot.toISOString(),
      })
    },
    onSlotSkipped(configuration, slot, execution) {
      log(
        'warn',
        `slot ${slot.toISOString()} of "${configuration.name}" skipped: its lock was held (a run of an earlier slot)`,
        {
          ...base(configuration, execution),
          slot: slot.toISOString(),
        },
      )
    },
    onSlotMissed(configuration, slot, execution) {
      log('warn', `slot ${slot.toISOString()} of "${configuration.name}" was missed: every node was down`, {
        ...base(configuration, execution),
        slot: slot.toISOString(),
      })
    },
    onSlotCaughtUp(configuration, slot, execution) {
      log('info', `slot ${slot.toISOString()} of "${configuration.name}" caught up`, {
        ...base(configuration, execution),
        slot: slot.toISOString(),
      })
    },
    onRunLedgerFailed(configuration, error, execution) {
      log(
        'warn',
        `the run of "${configuration.name}" could not be recorded in the run ledger (the run went on): ${errorText(error)}`,
        base(configuration, execution),
      )
    },
  }
}

/**
 * `listener` and `logger` as one listener: each hook calls the listener's, then the logger's; a
 * throw in one does not stop the other. `aroundTask` is the listener's alone.
 */
export function withLogger(
  listener: LockingTaskExecutorListener | undefined,
  logger: ShedlockLogger | undefined,
): LockingTaskExecutorListener | undefined {
  if (logger === undefined) return listener
  const logging = loggerListener(logger)
  if (listener === undefined) return logging
  const combined: LockingTaskExecutorListener = { ...listener }
  for (const [hook, fn] of Object.entries(logging) as [
    keyof LockingTaskExecutorListener,
    (...args: unknown[]) => void,
  ][]) {
    const own = listener[hook] as ((...args: unknown[]) => unknown) | undefined
    // The listener's result (or throw) goes on to the executor, which reports a failed hook.
    ;(combined as Record<string, unknown>)[hook] = (...args: unknown[]): unknown => {
      try {
        return typeof own === 'function' ? own.apply(listener, args) : undefined
      } finally {
        fn(...args)
      }
    }
  }
  return combined
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  return redact(text.split('\n')[0]!)
}
