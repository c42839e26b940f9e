import { LockProviderError } from '../core/errors.ts'

/** What a provider or an inspector asks of its store, as error messages name it. */
export type StoreAction = 'acquire' | 'extend' | 'release' | 'inspect' | 'list' | 'record' | 'history'

const OUTCOME: Readonly<Record<StoreAction, string>> = {
  acquire: 'the task was not run',
  extend: 'the lock was not extended',
  release: 'the lock stays held until it expires',
  inspect: 'nothing was changed',
  list: 'nothing was changed',
  record: 'the run is missing from the history',
  history: 'nothing was changed',
}

/** What a failed `action` means for the caller, for error advice: "the task was not run", … */
export function outcomeOf(action: StoreAction): string {
  return OUTCOME[action]
}

/** The message of any thrown value. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * Node's socket error codes that mean "the store is not reachable right now" (refused, reset,
 * timed out, no route, no name): each store's error mapping reads them, beside its driver's own.
 */
export const SOCKET_FAILURE_CODES: readonly string[] = [
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]

// Providers import redact() under this name, from before it hid more than URL passwords.
export { redact, redact as redactUrlPasswords } from '../core/redact.ts'

/**
 * The `LockProviderError` of a failed store call: `<provider>: could not <action> lock "<name>":
 * <advice>`, `<provider>: could not list the locks: <advice>`, or (reading runs)
 * `<provider>: could not read the run history[ of "<name>"]: <advice>`.
 */
export function storeError(
  provider: string,
  action: StoreAction,
  lockName: string,
  advice: string,
  cause: unknown,
): LockProviderError {
  if (action === 'list')
    return new LockProviderError(`${provider}: could not list the locks: ${advice}`, { cause, provider })
  // A read of the run history (history(), health(), tasks()): about runs, not locks.
  if (action === 'history')
    return new LockProviderError(
      `${provider}: could not read the run history${lockName === '' ? '' : ` of "${lockName}"`}: ${advice}`,
      { cause, provider, ...(lockName === '' ? {} : { lockName }) },
    )
  if (action === 'record')
    return new LockProviderError(`${provider}: could not record a run of "${lockName}" in the run history: ${advice}`, {
      cause,
      provider,
      lockName,
    })
  return new LockProviderError(`${provider}: could not ${action} lock "${lockName}": ${advice}`, {
    cause,
    provider,
    lockName,
  })
}

/** Turns what a store call threw into the `LockProviderError` the caller gets. */
export type DescribeStoreError = (error: unknown, action: StoreAction, lockName: string) => LockProviderError

/** What a failed store call rejects with: a `LockProviderError` as it is, anything else through `describe`. */
export function asStoreError(
  error: unknown,
  describe: DescribeStoreError,
  action: StoreAction,
  lockName: string,
): LockProviderError {
  return error instanceof LockProviderError ? error : describe(error, action, lockName)
}

/** The one wrapper around every store call of a provider: rejects with {@link asStoreError}. */
export function storeGuard(
  describe: DescribeStoreError,
): <T>(action: StoreAction, lockName: string, run: () => Promise<T>) => Promise<T> {
  return async (action, lockName, run) => {
    try {
      return await run()
    } catch (error) {
      throw asStoreError(error, describe, action, lockName)
    }
  }
}
