/**
 * Every error shedlock throws. They live in one module so that `instanceof` works the same for
 * users, providers and the conformance suite.
 *
 * Not getting a lock is never an error: `lock()` resolves to `undefined` and `executeWithLock()`
 * to `{ executed: false }`.
 */
import { redact } from './redact.ts'

/**
 * Base class of every shedlock error; never thrown directly. Its message has its secrets
 * replaced by `***` (the password of a URL, `password=...`; see `redact()`): a driver's
 * message quoted in it, or a connection string, never carries them into logs.
 */
export class ShedLockError extends Error {
  override name = 'ShedLockError'

  constructor(message?: string, options?: ErrorOptions) {
    super(message === undefined ? undefined : redact(message), options)
  }
}

/** Invalid lock name, duration or provider option; thrown before any store is touched. */
export class LockConfigurationError extends ShedLockError {
  override name = 'LockConfigurationError'
}

/** Options of a {@link LockProviderError}. */
export interface LockProviderErrorOptions {
  /** The driver error behind this one. */
  cause?: unknown
  /** Short provider name, e.g. `postgres`. */
  provider?: string
  /** The lock the failed operation was about. */
  lockName?: string
}

/**
 * The lock store failed (connection lost, missing table, name too long for the column...).
 * The task did not run. `cause` holds the driver's error.
 */
export class LockProviderError extends ShedLockError {
  override name = 'LockProviderError'
  /** Short provider name, e.g. `postgres`, when known. */
  readonly provider: string | undefined
  /** The lock the failed operation was about, when known. */
  readonly lockName: string | undefined

  constructor(message: string, options: LockProviderErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.provider = options.provider
    this.lockName = options.lockName
  }
}

/** A lock handle used after it was unlocked or extended: each handle is single-use. */
export class LockStateError extends ShedLockError {
  override name = 'LockStateError'
}

/** `assertLocked()` was called outside a locked task. */
export class NotLockedError extends ShedLockError {
  override name = 'NotLockedError'
}

/** Base class of the errors of `extendActiveLock()`. */
export class LockExtensionError extends ShedLockError {
  override name = 'LockExtensionError'
}

/** `extendActiveLock()` was called outside a locked task. */
export class NoActiveLockError extends LockExtensionError {
  override name = 'NoActiveLockError'
}

/** The active lock could not be extended: it expired, or its provider cannot extend locks. */
export class LockCannotBeExtendedError extends LockExtensionError {
  override name = 'LockCannotBeExtendedError'
}

/**
 * The reason a task's `AbortSignal` aborts: the lock can no longer be trusted, because
 * `lockAtMostUntil` passed without an extension or a keep-alive extension failed.
 */
export class LockLostError extends ShedLockError {
  override name = 'LockLostError'
}

/**
 * The reason a task's `AbortSignal` aborts when its executor is closed (`executor.close()`, on a
 * shutdown): the task should stop, so that its lock is released before the process exits.
 */
export class ExecutorClosedError extends ShedLockError {
  override name = 'ExecutorClosedError'
}
