import { type Clock, systemClock } from '../../core/clock.ts'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { type LockConfiguration, lockConfiguration } from '../../core/lock-configuration.ts'
import {
  type ExtensibleLock,
  type ExtensibleLockProvider,
  type PairedLocks,
  withLockPair,
} from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { lockOwner } from '../lock-owner.ts'
import { checkLockRequest, nameTooLong, type StoreLimits } from '../lock-request.ts'
import { asStoreError, type DescribeStoreError, outcomeOf, type StoreAction, storeError } from '../store-errors.ts'
import { OperationTimeoutError, type TimedStoreCall, timedStoreCall, withTimeout } from '../with-timeout.ts'
import type { SqlTableOptions } from './sql-table.ts'

/** Options shared by the SQL providers. */
export interface SqlLockProviderOptions extends SqlTableOptions {
  /**
   * Prefix of the `locked_by` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * Let the database clock decide when locks expire, so that clock skew between app nodes cannot
   * run a task twice. `false` uses this process's clock (see `clock`), stored as UTC.
   * @default true
   */
  useDbTime?: boolean
  /** The app clock, used when `useDbTime` is `false`. @default systemClock */
  clock?: Clock
  /**
   * How long one lock statement (acquire, release, extend; the wait for a free pool connection
   * included) may take, in milliseconds or a duration string; then it rejects with
   * `LockProviderError` and the task does not run. A connection to a server that vanished (a
   * failover, a cut link) otherwise waits until the operating system gives the socket up, which
   * is minutes. An acquire that still commits after its timeout is given back as soon as it lands.
   * @default "10s"
   */
  timeout?: Duration
}

/** What the lock table can hold, as {@link SqlAccessor.readLimits} found it. */
export interface SqlTableLimits extends StoreLimits {
  /** The longest name the name column holds, in characters (Unicode code points). `undefined`: no limit (a `text` column). */
  readonly maxNameLength?: number
  /** Where the limit comes from, for the error message, e.g. `column name of shedlock, VARCHAR(64)`. */
  readonly nameColumn?: string
}

/** The three statements of one SQL dialect. Each is a single statement, run outside any caller transaction. */
export interface SqlAccessor {
  /**
   * Reads what the table can hold, before the first acquire; later acquires reuse the answer.
   * Resolves to `undefined` when it cannot tell (the table is missing, say): the answer is then
   * not kept, and the acquire statement runs, so that it reports the problem as it always does.
   * A rejection reaches the caller as the acquire's `LockProviderError`. Omitted: no limits.
   */
  readLimits?(): Promise<SqlTableLimits | undefined>
  /**
   * Throws `LockConfigurationError` for a name the table cannot keep apart from another (say,
   * one with a trailing space where the store ignores them), before anything is sent. Omitted:
   * every name is kept apart.
   */
  checkName?(name: string): void
  /**
   * Inserts the row, or takes over an expired one. Resolves to `false` when another holds the
   * lock; else to the acquisition's fencing token when the table's `fencingTokens` is on, `true`
   * when it is off.
   */
  acquire(configuration: LockConfiguration, owner: string): Promise<boolean | bigint>
  /**
   * Optional: takes `first` and, in the same statement only if it took it, `second` (a slot's
   * record and its task's lock: see `LockPair`). Resolves to what {@link acquire} would have
   * resolved to for each, `second` `false` when `first` is. Omitted: slot runs take them one
   * after the other.
   */
  acquirePair?(
    first: LockConfiguration,
    firstOwner: string,
    second: LockConfiguration,
    secondOwner: string,
  ): Promise<readonly [boolean | bigint, boolean | bigint]>
  /**
   * Optional: {@link unlock}, sent with the other releases of this turn of the event loop in one
   * statement. The task locks of paired acquires (slot runs) are released so: a scheduled tick
   * releases them together. Omitted: `unlock`.
   */
  unlockInBatch?(current: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<void>
  /** Moves `lock_until` of a row this acquisition still holds. Resolves to `true` when it did. */
  extend(next: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<boolean>
  /** Sets `lock_until` to `max(now, lockAtLeastUntil)` on a row this acquisition holds; other rows are untouched. */
  unlock(current: LockConfiguration, owner: string, acquired: LockConfiguration): Promise<void>
}

/**
 * The `LockProvider` around a dialect's {@link SqlAccessor}: one statement per acquire attempt
 * (the first acquire of a provider also runs {@link SqlAccessor.readLimits}), one per release, no
 * cache of known rows (a row deleted by hand is simply recreated), and a `locked_by` value unique
 * to each acquisition (and, with `fencingTokens`, its token from the acquire statement). A name or a deadline past the table's limits rejects with
 * `LockConfigurationError` before the acquire or extend statement is sent.
 */
export function sqlLockProvider(
  name: string,
  accessor: SqlAccessor,
  options: SqlLockProviderOptions,
  describe: DescribeStoreError,
): ExtensibleLockProvider {
  if (options.lockedBy !== undefined && (typeof options.lockedBy !== 'string' || options.lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `lockedBy must be a non-empty string (it prefixes the locked_by column), got ${JSON.stringify(options.lockedBy)}`,
    )
  }
  const clock = options.clock ?? systemClock
  const timeoutMs = parseDuration(options.timeout ?? DEFAULT_SQL_TIMEOUT)
  if (!(timeoutMs > 0))
    throw new LockConfigurationError(
      `${name}: timeout must be longer than 0ms, got ${JSON.stringify(options.timeout)}; it bounds each lock statement, e.g. "10s"`,
    )
  const describeTimed: DescribeStoreError = (error, action, lockName) =>
    error instanceof OperationTimeoutError
      ? timedOut(name, action, lockName, timeoutMs, error)
      : describe(error, action, lockName)
  const call: TimedStoreCall<unknown> = { store: name, timeoutMs, describe: describeTimed }
  // A late acquisition: nobody runs under it, so free it now rather than block the name until
  // lockAtMostFor. The release is owner-checked and touches no other acquisition's row.
  const giveBack: GiveBack = (configuration, owner, acquired) => {
    if (acquired === false) return
    withTimeout(unlockNow(accessor, configuration, owner), timeoutMs, { store: name }).catch(() => {})
  }
  // The steps of one timed acquire. The timeout's cost (bench overhead, 3 processes,
  // 2026-11-27): client CPU ratio at 16 callers 1.12 on MySQL and 1.10 on PostgreSQL, against
  // 1.05 and 1.06 with no timeout; the p50 ratios did not move (1.02, 0.99).
  class Acquire {
    readonly configuration: LockConfiguration
    readonly owner: string
    constructor(configuration: LockConfiguration, owner: string) {
      this.configuration = configuration
      this.owner = owner
    }
    start(): Promise<boolean | bigint> {
      return accessor.acquire(this.configuration, this.owner)
    }
    late(acquired: boolean | bigint): void {
      giveBack(this.configuration, this.owner, acquired)
    }
  }

  // Read once; concurrent first acquires share one reading. An unknown answer or a failure is
  // not kept: the next acquire reads again.
  let known: SqlTableLimits | undefined = accessor.readLimits ? undefined : {}
  let reading: Promise<SqlTableLimits | undefined> | undefined
  const limits = async (): Promise<SqlTableLimits> => {
    if (known) return known
    reading ??= withTimeout(accessor.readLimits!(), timeoutMs, { store: name }).finally(() => {
      reading = undefined
    })
    const read = await reading
    if (read) known = read
    return read ?? {}
  }

  const checkLimits = (configuration: LockConfiguration, limits: SqlTableLimits): void =>
    checkTableLimits(name, clock, configuration, limits)

  // The checks before an acquire statement is sent: the request, the name, the table's limits.
  // A promise only while the limits are still to be read: an await on every acquire cost 1–2 µs
  // of CPU a lock (bench overhead, MySQL 16 callers: 6.27–7.31 µs added, 4.63–5.37 without).
  const prepare = (configuration: LockConfiguration): Promise<void> | undefined => {
    checkLockRequest(name, configuration, clock)
    accessor.checkName?.(configuration.name)
    if (!known) return readAndCheck(configuration)
    checkLimits(configuration, known)
    return undefined
  }
  const readAndCheck = async (configuration: LockConfiguration): Promise<void> => {
    let tableLimits: SqlTableLimits
    try {
      tableLimits = await limits()
    } catch (error) {
      throw asStoreError(error, describeTimed, 'acquire', configuration.name)
    }
    checkLimits(configuration, tableLimits)
  }

  // The handle of an acquisition the statement made.
  // `batched`: released with the turn's other releases, where the accessor can (a paired task lock).
  const handleOf = (
    configuration: LockConfiguration,
    owner: string,
    acquired: true | bigint,
    batched = false,
  ): ExtensibleLock =>
    defineLock(configuration, {
      clock,
      lockedBy: owner,
      ...(typeof acquired === 'bigint' ? { fencingToken: acquired } : {}),
      unlock: (current) =>
        timedStoreCall(call, 'release', current.name, () =>
          batched && accessor.unlockInBatch
            ? accessor.unlockInBatch(current, owner, configuration)
            : accessor.unlock(current, owner, configuration),
        ) as Promise<void>,
      extend: async (next) => {
        // A lock was acquired, so the limits are known; a name past them rejects.
        checkLimits(next, known ?? {})
        return timedStoreCall(call, 'extend', next.name, () =>
          accessor.extend(next, owner, configuration),
        ) as Promise<boolean>
      },
    })

  // timedStoreCall(): one promise per store call, its timeout and the error mapping in it (the
  // timeout's measured cost: see Acquire above).
  const provider: ExtensibleLockProvider = {
    name,
    async lock(configuration) {
      const reading = prepare(configuration)
      if (reading) await reading
      const owner = lockOwner(options.lockedBy)
      const acquired = (await timedStoreCall(call, 'acquire', configuration.name, new Acquire(configuration, owner))) as
        | boolean
        | bigint
      return acquired === false ? undefined : handleOf(configuration, owner, acquired)
    },
  }
  if (!accessor.acquirePair) return provider
  return withLockPair(provider, async (first, second): Promise<PairedLocks> => {
    // As lock(): a promise only while the table's limits are unread.
    const reading = prepare(first) ?? prepare(second)
    if (reading) {
      await reading
      await prepare(second)
    }
    const steps = new AcquirePair(
      accessor,
      giveBack,
      [first, lockOwner(options.lockedBy)],
      [second, lockOwner(options.lockedBy)],
    )
    const [one, two] = (await timedStoreCall(call, 'acquire', first.name, steps)) as readonly [
      boolean | bigint,
      boolean | bigint,
    ]
    if (one === false) return [undefined, undefined]
    return [
      handleOf(first, steps.firstOwner, one),
      two === false ? undefined : handleOf(second, steps.secondOwner, two, true),
    ]
  })
}

/**
 * `first`, then `second` only if `first` was taken: two statements, for a paired acquire whose one
 * statement could not run (a concurrency failure rolled it back). A failure of the second gives
 * the first back (owner-checked), so that a claim is never kept for a task that did not start.
 */
export async function acquireOneAfterOther(
  accessor: SqlAccessor,
  first: LockConfiguration,
  firstOwner: string,
  second: LockConfiguration,
  secondOwner: string,
): Promise<readonly [boolean | bigint, boolean | bigint]> {
  const one = await accessor.acquire(first, firstOwner)
  if (one === false) return [false, false]
  try {
    return [one, await accessor.acquire(second, secondOwner)]
  } catch (error) {
    await unlockNow(accessor, first, firstOwner).catch(() => {})
    throw error
  }
}

/**
 * Frees the row of `acquired` now, whatever its `lockAtLeastFor`, if `owner` still holds it (the
 * release is owner-checked, so another acquisition's row is untouched): an acquisition nobody
 * will run under.
 */
export function unlockNow(accessor: SqlAccessor, acquired: LockConfiguration, owner: string): Promise<void> {
  const now = lockConfiguration({ name: acquired.name, lockAtMostFor: acquired.lockAtMostFor })
  return accessor.unlock(now, owner, acquired)
}

// Throws before anything is sent for a name or a deadline the table cannot hold.
function checkTableLimits(store: string, clock: Clock, configuration: LockConfiguration, limits: SqlTableLimits): void {
  const max = limits.maxNameLength
  // Code points are never more than UTF-16 units: count them only when it could matter.
  if (max !== undefined && configuration.name.length > max) {
    const size = [...configuration.name].length
    if (size > max)
      throw nameTooLong(
        limits.nameColumn ? `${store} (${limits.nameColumn})` : store,
        configuration.name,
        size,
        max,
        'characters',
        'the name',
      )
  }
  if (limits.latestDeadline) checkLockRequest(store, configuration, clock, { latestDeadline: limits.latestDeadline })
}

type GiveBack = (configuration: LockConfiguration, owner: string, acquired: boolean | bigint) => void

// The steps of one timed paired acquire: a pair that lands late is given back, both of it.
class AcquirePair {
  readonly accessor: SqlAccessor
  readonly giveBack: GiveBack
  readonly first: LockConfiguration
  readonly firstOwner: string
  readonly second: LockConfiguration
  readonly secondOwner: string
  constructor(
    accessor: SqlAccessor,
    giveBack: GiveBack,
    [first, firstOwner]: readonly [LockConfiguration, string],
    [second, secondOwner]: readonly [LockConfiguration, string],
  ) {
    this.accessor = accessor
    this.giveBack = giveBack
    this.first = first
    this.firstOwner = firstOwner
    this.second = second
    this.secondOwner = secondOwner
  }
  start(): Promise<readonly [boolean | bigint, boolean | bigint]> {
    return this.accessor.acquirePair!(this.first, this.firstOwner, this.second, this.secondOwner)
  }
  late([one, two]: readonly [boolean | bigint, boolean | bigint]): void {
    this.giveBack(this.first, this.firstOwner, one)
    this.giveBack(this.second, this.secondOwner, two)
  }
}

/** The default of {@link SqlLockProviderOptions.timeout}. */
export const DEFAULT_SQL_TIMEOUT = '10s'

// What a timed-out statement means for the caller, and the two settings that end the wait sooner.
function timedOut(
  store: string,
  action: StoreAction,
  lockName: string,
  timeoutMs: number,
  error: OperationTimeoutError,
): ReturnType<DescribeStoreError> {
  return storeError(
    store,
    action,
    lockName,
    `no reply within the provider's timeout (${timeoutMs}ms): the server is down or unreachable, a failover is under way, or the pool has no free connection; ${outcomeOf(action)}. Give the pool's connections a timeout of their own below this one (pg: query_timeout), so that a connection to a vanished server is dropped rather than kept busy, or raise timeout`,
    error,
  )
}

/**
 * Where a release with database time counts `lockAtLeastFor` from, and how many seconds.
 * - The handle of the acquisition itself: from `locked_at`, the database's clock at acquisition,
 *   as Java ShedLock does. No app clock is involved.
 * - An extended handle: its `lockAtLeastFor` counts from the extension's start, which the
 *   database never saw. What is left of it, measured on this process's clock (only a difference
 *   of two readings, so skew does not matter), counts from the database's now. Anchoring it at
 *   `locked_at` plus an offset would add the acquisition's latency: an extended lock released
 *   with `lockAtLeastFor` 0 would stay held that much longer.
 */
export interface LockAtLeastAnchor {
  readonly from: 'lockedAt' | 'now'
  readonly seconds: number
}

/** See {@link LockAtLeastAnchor}. */
export function lockAtLeastAnchor(
  current: LockConfiguration,
  acquired: LockConfiguration,
  clock: Clock,
): LockAtLeastAnchor {
  if (current === acquired) return { from: 'lockedAt', seconds: current.lockAtLeastFor / 1000 }
  return { from: 'now', seconds: Math.max(0, current.lockAtLeastUntil.getTime() - clock.now()) / 1000 }
}

/**
 * The fencing token an acquire statement returned (a BIGINT column: a number, a bigint or a
 * numeric string, depending on the driver), as a bigint.
 * @throws TypeError for anything else (no row, NULL): the statement did not return the column.
 */
export function fencingTokenOf(value: unknown): bigint {
  if (typeof value === 'bigint') return value
  if ((typeof value === 'number' && Number.isSafeInteger(value)) || (typeof value === 'string' && /^\d+$/.test(value)))
    return BigInt(value)
  throw new TypeError(
    `the acquire statement returned ${value === undefined ? 'no fencing token' : `the fencing token ${String(value)}`}, where it writes a positive integer; does the client return the rows of INSERT ... RETURNING (or MySQL's insertId)?`,
  )
}
