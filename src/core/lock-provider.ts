import type { Duration } from './duration.ts'
import type { LockInspector } from './lock-inspector.ts'
import type { LockConfiguration } from './lock-configuration.ts'

/**
 * A held lock. Each handle is single-use: unlock it once, or extend it once and use the handle
 * that `extend()` returns. Reuse throws `LockStateError`.
 *
 * Disposable: `await using lock = await provider.lock(configuration)` unlocks it when the block
 * ends (`lock()` may resolve to `undefined`, which `await using` skips). Disposing a handle that
 * was already unlocked or extended does nothing; dispose the handle `extend()` returned instead.
 * Build handles with `defineLock()`, which gives them all of this.
 */
export interface SimpleLock extends AsyncDisposable {
  /** The owner the store keeps for this acquisition (`locked_by`, unique per acquisition), where it keeps one. */
  readonly lockedBy?: string
  /**
   * The fencing token of this acquisition: greater than every token the store handed out before
   * for this lock name (across releases, expiries, takeovers and restarts), so that a resource the
   * task writes to can refuse a write that carries a lower one (docs/fencing.md). `undefined` where
   * the store cannot count (memcached) or the provider was not asked to (SQL without
   * `fencingTokens`). An extension keeps the token: it is the same acquisition.
   */
  readonly fencingToken?: bigint
  /**
   * Releases the lock, or keeps it until `lockAtLeastUntil` when that is later. Touches nothing
   * if another node holds the lock by now. Rejects with `LockProviderError` when the store fails;
   * the handle then stays usable, so the unlock may be retried.
   */
  unlock(): Promise<void>
}

/** A held lock whose provider can move its expiry. */
export interface ExtensibleLock extends SimpleLock {
  /**
   * Holds the lock for `lockAtMostFor` more, measured from now, and keeps it at least
   * `lockAtLeastFor` from now on unlock (both in milliseconds or duration strings). Resolves to
   * the new handle, or to `undefined` once the lock has expired (or another node holds it); either
   * way this handle is spent.
   */
  extend(lockAtMostFor: Duration, lockAtLeastFor: Duration): Promise<ExtensibleLock | undefined>
}

/**
 * A lock that extends itself while held (see `keepAliveLockProvider`). The executor watches
 * `signal` instead of `lockAtMostUntil`.
 */
export interface KeepAliveLock extends SimpleLock {
  /** Aborts, with a `LockLostError` reason, when an extension fails or comes too late. */
  readonly signal: AbortSignal
  /** Called after each successful extension with the new configuration. */
  onExtended: ((configuration: LockConfiguration) => void) | undefined
}

/**
 * A store of locks. `lock()` never waits: it resolves to the lock, or to `undefined` when another
 * node holds it, and rejects (with `LockProviderError`) only when the store fails.
 */
export interface LockProvider {
  /** Short name of the store, e.g. `"postgres"`, reported in diagnostics events, debug lines and telemetry. */
  readonly name?: string
  lock(configuration: LockConfiguration): Promise<SimpleLock | undefined>
  /**
   * The inspector of this provider's store, over the same client, table or key space. The
   * executor uses it for slot runs (to remove old slot records, and to find missed slots); every
   * provider of shedlock has one but memcached's, which cannot list its keys.
   */
  inspector?(): LockInspector
}

/** A provider whose store can be inspected: `inspector()` is there (every provider of shedlock but memcached's). */
export interface InspectableLockProvider extends LockProvider {
  inspector(): LockInspector
}

/** A provider whose locks can be extended while held. */
export interface ExtensibleLockProvider extends LockProvider {
  lock(configuration: LockConfiguration): Promise<ExtensibleLock | undefined>
}

/** True when `lock` has an `extend` method. */
export function isExtensibleLock(lock: SimpleLock): lock is ExtensibleLock {
  return typeof (lock as Partial<ExtensibleLock>).extend === 'function'
}

/** True when `lock` keeps itself alive (see `keepAliveLockProvider`). */
export function isKeepAliveLock(lock: SimpleLock): lock is KeepAliveLock {
  return (lock as Partial<KeepAliveLock>).signal instanceof AbortSignal
}

// A wrapper's provider, for records that must not get the wrapper's behaviour (the executor's
// slot records through a keep-alive wrapper, which would extend them). Internal.
const UNWRAPPED: unique symbol = Symbol('shedlock.unwrappedProvider')

/** Marks `wrapper` as a wrapper of `inner` (see {@link unwrappedProvider}). */
export function markWrapper<P extends LockProvider>(wrapper: P, inner: LockProvider): P {
  Object.defineProperty(wrapper, UNWRAPPED, { value: inner })
  return wrapper
}

/** The provider inside a wrapper marked by {@link markWrapper}, or `provider` itself. */
export function unwrappedProvider(provider: LockProvider): LockProvider {
  return (provider as { [UNWRAPPED]?: LockProvider })[UNWRAPPED] ?? provider
}

/**
 * What a paired acquisition resolved to: `first` not taken (and `second` not asked for), or
 * `first` taken, with `second` taken too or held elsewhere.
 */
export type PairedLocks =
  | readonly [first: undefined, second: undefined]
  | readonly [first: SimpleLock, second: SimpleLock | undefined]

/**
 * Takes `first` and, only once it is taken, `second`, in one round trip to the store: a slot's
 * record and its task's lock (slot-runs.ts), which would otherwise be two, one after the other,
 * before the task starts. Each handle is what `lock()` would have returned for its configuration.
 * Rejects as `lock()` does when the store fails; then neither is held (a pair that lands after the
 * provider's timeout is given back). Internal: providers attach it with {@link withLockPair}.
 */
export type LockPair = (first: LockConfiguration, second: LockConfiguration) => Promise<PairedLocks>

// Where a provider keeps its LockPair: a symbol, and not enumerable, so that a wrapper made by
// spreading a provider ({ ...provider, lock }) does not carry it past the wrapper's own lock().
const LOCK_PAIR: unique symbol = Symbol('shedlock.lockPair')

/** Gives `provider` its paired acquisition (see {@link LockPair}). */
export function withLockPair<P extends LockProvider>(provider: P, pair: LockPair): P {
  Object.defineProperty(provider, LOCK_PAIR, { value: pair })
  return provider
}

/** The paired acquisition of `provider`, where it has one. */
export function lockPairOf(provider: LockProvider): LockPair | undefined {
  return (provider as { [LOCK_PAIR]?: LockPair })[LOCK_PAIR]
}
