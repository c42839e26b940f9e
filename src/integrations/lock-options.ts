import { type Duration, formatDuration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import type { ShedlockLogger } from '../core/logger.ts'
import {
  type CatchUpPolicy,
  type CatchUpResult,
  createLockingTaskExecutor,
  type LockingTaskExecutor,
  type LockingTaskExecutorListener,
} from '../core/locking-task-executor.ts'

/**
 * The catch-up of an integration: what to do, when a node starts, about the slots every node
 * missed (all were down at their fire time). See `executor.catchUp()` and docs/slots.md.
 */
export interface CatchUpSettings {
  /** `'skip'` (nothing), `'once'` (one run, for the latest missed slot) or `'all'` (each missed slot, oldest first). */
  policy: CatchUpPolicy
  /** How far back a missed slot still counts, in milliseconds or a duration string; at most the slot retention (24 h by default). */
  within: Duration
}

/** A lock provider, or an executor built on one (to keep its listener). What every integration accepts. */
export type ExecutorOrProvider = LockProvider | LockingTaskExecutor

/** True when `value` is a {@link LockingTaskExecutor} (it has `executeWithLock`). */
export function isExecutor(value: unknown): value is LockingTaskExecutor {
  return typeof (value as Partial<LockingTaskExecutor> | null)?.executeWithLock === 'function'
}

/** True when `value` is usable as an executor or a provider. */
export function isExecutorOrProvider(value: unknown): value is ExecutorOrProvider {
  return (
    typeof value === 'object' &&
    value !== null &&
    (isExecutor(value) || typeof (value as Partial<LockProvider>).lock === 'function')
  )
}

/**
 * The executor to run tasks with: `value` itself when it is one, else a new executor over the
 * provider (with `listener` and `logger`, if given).
 *
 * @throws LockConfigurationError naming `where` when `value` is neither.
 */
export function toExecutor(
  where: string,
  value: unknown,
  listener?: LockingTaskExecutorListener,
  logger?: ShedlockLogger,
): LockingTaskExecutor {
  if (isExecutor(value)) return value
  if (!isExecutorOrProvider(value)) {
    throw new LockConfigurationError(
      `${where}: expected a LockProvider (such as postgresLockProvider({ client })) or a LockingTaskExecutor (createLockingTaskExecutor(provider)), got ${kindOf(value)}`,
    )
  }
  return createLockingTaskExecutor(value as LockProvider, {
    ...(listener === undefined ? {} : { listener }),
    ...(logger === undefined ? {} : { logger }),
  })
}

/**
 * Checks a lock name given at definition time: a non-blank string, or a function that computes
 * it per call.
 *
 * @throws LockConfigurationError naming `where`.
 */
export function checkName(where: string, name: unknown): void {
  if (typeof name === 'function') return
  if (typeof name !== 'string') {
    throw new LockConfigurationError(
      `${where}: the lock name is ${name === undefined ? 'missing' : `${kindOf(name)}, not a string`}; pass name: "nightly-report" (the same on every node) or a function of the call's arguments`,
    )
  }
  if (name.trim() === '') {
    throw new LockConfigurationError(
      `${where}: the lock name ${JSON.stringify(name)} is blank; pass a non-empty name, e.g. "nightly-report"`,
    )
  }
}

/**
 * Parses whichever durations are given, and checks `lockAtLeastFor <= lockAtMostFor` when both
 * are known. Returns them in milliseconds.
 *
 * @throws LockConfigurationError naming `where` and the field.
 */
export function checkDurations(
  where: string,
  lockAtMostFor: Duration | undefined,
  lockAtLeastFor: Duration | undefined,
): { lockAtMostFor?: number; lockAtLeastFor?: number } {
  const atMost = lockAtMostFor === undefined ? undefined : parseField(where, 'lockAtMostFor', lockAtMostFor)
  const atLeast = lockAtLeastFor === undefined ? undefined : parseField(where, 'lockAtLeastFor', lockAtLeastFor)
  if (atMost !== undefined && atLeast !== undefined && atLeast > atMost) {
    throw new LockConfigurationError(
      `${where}: lockAtLeastFor (${show(lockAtLeastFor, atLeast)}) is longer than lockAtMostFor (${show(lockAtMostFor, atMost)}); make lockAtMostFor at least as long as lockAtLeastFor`,
    )
  }
  return {
    ...(atMost === undefined ? {} : { lockAtMostFor: atMost }),
    ...(atLeast === undefined ? {} : { lockAtLeastFor: atLeast }),
  }
}

/** The slot options every integration shares, parsed. */
export interface SlotSettings {
  /** Milliseconds; `undefined` for the executor's default. */
  slotRetention: number | undefined
  /** Parsed; `undefined` without catch-up. */
  catchUp: { policy: CatchUpPolicy; within: number } | undefined
}

/**
 * Checks `slotRetention` and `catchUp` given at definition time: a positive retention, a known
 * policy, a `within` no longer than the retention (when it is given), and catch-up only for slot
 * runs with a fixed name (a catch-up has no call arguments to compute a name from).
 *
 * @throws LockConfigurationError naming `where`.
 */
export function checkSlotSettings(
  where: string,
  options: { slot?: unknown; slotRetention?: unknown; catchUp?: unknown; name?: unknown },
): SlotSettings {
  const { slot, slotRetention, catchUp } = options
  let retention: number | undefined
  if (slotRetention !== undefined) {
    retention = parseField(where, 'slotRetention', slotRetention as Duration)
    if (!(retention > 0))
      throw new LockConfigurationError(
        `${where}: slotRetention must be more than 0, got ${JSON.stringify(slotRetention)}`,
      )
    if (slot === undefined || slot === false)
      throw new LockConfigurationError(`${where}: slotRetention is set without slot; it applies to slot runs only`)
  }
  if (catchUp === undefined) return { slotRetention: retention, catchUp: undefined }
  if (catchUp === null || typeof catchUp !== 'object')
    throw new LockConfigurationError(`${where}: catchUp must be { policy, within }, got ${kindOf(catchUp)}`)
  const { policy, within } = catchUp as Partial<CatchUpSettings>
  if (policy !== 'skip' && policy !== 'once' && policy !== 'all') {
    throw new LockConfigurationError(
      `${where}: catchUp.policy must be 'skip', 'once' or 'all', got ${JSON.stringify(policy) ?? String(policy)}`,
    )
  }
  if (within === undefined)
    throw new LockConfigurationError(
      `${where}: catchUp.within is required: how far back a missed slot still counts, e.g. '6h'`,
    )
  const windowMs = parseField(where, 'catchUp.within', within)
  if (retention !== undefined && windowMs > retention) {
    throw new LockConfigurationError(
      `${where}: catchUp.within (${show(within, windowMs)}) is longer than slotRetention (${show(slotRetention as Duration, retention)}); missed slots could not be told from run ones`,
    )
  }
  if (slot === undefined || slot === false) {
    throw new LockConfigurationError(
      `${where}: catchUp needs slot: a catch-up finds the slots nobody ran from the slot records that slot runs leave`,
    )
  }
  if (typeof options.name === 'function')
    throw new LockConfigurationError(
      `${where}: catchUp needs a fixed lock name, not a name function (a catch-up has no call arguments)`,
    )
  return { slotRetention: retention, catchUp: { policy, within: windowMs } }
}

/** What a catch-up that does nothing (no `catchUp` option, policy 'skip', or a shutdown) resolves to. */
export function skippedCatchUp(): CatchUpResult {
  return { outcome: 'skipped', missed: [], ran: [], failed: [], notRun: [] }
}

/** A `LockConfigurationError` of the core with `where` in front, to throw instead; other errors as they are. */
export function withContext(where: string, error: unknown): unknown {
  if (error instanceof LockConfigurationError)
    return new LockConfigurationError(`${where}: ${error.message}`, { cause: error })
  return error
}

/** `"nightly"`, `a function`, `null`… for messages. */
export function kindOf(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'object')
    return Array.isArray(value) ? 'an array' : 'an object without lock() or executeWithLock()'
  return `${typeof value} ${String(value)}`
}

function parseField(where: string, field: string, value: Duration): number {
  if (value === null)
    throw new LockConfigurationError(`${where}: ${field} is null; leave it out or give a duration such as "10m"`)
  try {
    return parseDuration(value)
  } catch (error) {
    throw new LockConfigurationError(
      `${where}: ${field} is invalid. ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    )
  }
}

function show(input: Duration | undefined, ms: number): string {
  return typeof input === 'string' ? input : formatDuration(ms)
}

/**
 * The slot a `slot` function returns for one call (`this` = `self`), checked: a function that
 * throws, or returns anything but a valid Date, is a configuration error naming `where`, and the
 * call does not run.
 */
export function slotFromFunction(
  slot: (...args: never[]) => unknown,
  self: unknown,
  args: unknown[],
  where: string,
): Date {
  let computed: unknown
  try {
    computed = (slot as (...args: unknown[]) => unknown).apply(self, args)
  } catch (error) {
    throw new LockConfigurationError(
      `${where}: the slot function threw: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    )
  }
  if (!(computed instanceof Date) || Number.isNaN(computed.getTime())) {
    throw new LockConfigurationError(
      `${where}: the slot function returned ${computed instanceof Date ? 'an Invalid Date' : kindOf(computed)}, not the slot (a valid Date); the call did not run`,
    )
  }
  return computed
}
