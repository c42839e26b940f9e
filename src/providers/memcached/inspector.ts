import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord } from '../../core/lock-inspector.ts'
import { parseAddedValue } from '../../support/added-value.ts'
import { storeError, storeGuard } from '../../support/store-errors.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import {
  DEFAULT_ENVIRONMENT,
  describeMemcachedError,
  memcachedKeyPrefix,
  memcachedLockKey,
  PROVIDER,
  textOf,
} from './format.ts'

/** The part of a `memjs` 1.3 `Client` that {@link memcachedLockInspector} calls (the promise forms): the provider's client will do. */
export interface MemcachedInspectorClient {
  /** Resolves to `{ value: null }` when the key is missing; memjs gives the value as a Buffer. */
  get(key: string): Promise<{ value: unknown }>
  /** Resolves to `false` if the key was missing. */
  delete(key: string): Promise<boolean>
}

/** Options of {@link memcachedLockInspector}: the provider's client and environment. */
export interface MemcachedLockInspectorOptions {
  /** Your memjs 1.3 client (the provider's). */
  client: MemcachedInspectorClient
  /** The middle part of every key, `shedlock:<environment>:<name>`: the provider's. @default "default" */
  environment?: string
  /** How long one memcached call may take, in milliseconds or a duration string; past it, the call rejects with `LockProviderError`. @default "5s" */
  timeout?: Duration
}

/**
 * Reads and force-releases single locks of the memcached lock provider, in its (and Java
 * ShedLock's) format: keys `shedlock:<environment>:<name>` (names memcached cannot carry are
 * escaped, see `memcachedLockKey`) holding `ADDED:<ISO time>@<owner>`.
 *
 * What memcached allows:
 * - `list()` always rejects with `LockProviderError`: memcached cannot enumerate its keys.
 * - `get(name)` reads one key. memcached does not reveal expiries, so `lockUntil` and
 *   `remainingMs` are `undefined`, and a lock is `held` as long as its key exists (memcached
 *   deletes it when it expires); `lockedAt` (the holder's clock) and `lockedBy` come from the value.
 * - `release(nameOrRecord)` deletes the key, after reading it again and finding the value it was
 *   read with (for a name, the value just read). memjs has no compare-and-swap, so this is
 *   get-then-delete: a lock that expires and is taken by another node in the milliseconds between
 *   the two is deleted too. The holder's later unlock finds its value gone and changes nothing
 *   (the operator wins).
 *
 * ```ts
 * import memjs from 'memjs'
 * import { memcachedLockInspector } from 'shedlock/memcached'
 * const inspector = memcachedLockInspector({ client: memjs.Client.create('127.0.0.1:11211') })
 * const record = await inspector.get('nightly-report')
 * if (record) await inspector.release(record)
 * ```
 *
 * `get` and `release` reject with `LockConfigurationError` for a name that has no key (see
 * `memcachedLockKey`): no lock can have it.
 *
 * @throws LockConfigurationError for a missing client, an invalid `environment`, or a `timeout`
 *   that is not a positive duration.
 */
export function memcachedLockInspector(options: MemcachedLockInspectorOptions): LockInspector {
  const { client } = options ?? {}
  if (!client || typeof client.get !== 'function' || typeof client.delete !== 'function') {
    throw new LockConfigurationError(
      "memcached: pass your memjs client as { client }, e.g. memjs.Client.create('127.0.0.1:11211')",
    )
  }
  const environment = options.environment ?? DEFAULT_ENVIRONMENT
  const prefix = memcachedKeyPrefix(environment)
  const timeout = parseDuration(options.timeout ?? '5s')
  if (timeout <= 0) throw new LockConfigurationError('memcached: timeout must be longer than 0 ms')
  const guard = storeGuard((error, action, name) => describeMemcachedError(error, action, name, 'inspector'))
  const bounded = <T>(call: () => Promise<T>): Promise<T> =>
    withTimeout(Promise.resolve().then(call), timeout, { store: 'memcached' })
  // The value a record was read with: release(record) deletes the key only while it holds that.
  const readAs = new WeakMap<LockRecord, string>()

  const valueAt = async (key: string): Promise<string | undefined> =>
    textOf((await bounded(() => client.get(key))).value)
  const read = async (name: string, key: string): Promise<LockRecord | undefined> => {
    const value = await valueAt(key)
    if (value === undefined) return undefined
    const added = parseAddedValue(value)
    const record: LockRecord = Object.freeze({
      name,
      lockUntil: undefined,
      lockedAt: added.lockedAt === undefined ? undefined : new Date(added.lockedAt),
      lockedBy: added.lockedBy,
      held: true,
      remainingMs: undefined,
    })
    readAs.set(record, value)
    return record
  }

  return {
    name: PROVIDER,
    clock: "this host's clock (memcached does not reveal expiries)",
    list: async (): Promise<LockList> => {
      throw storeError(
        PROVIDER,
        'list',
        '',
        `memcached cannot enumerate its keys (${prefix}*), so its locks cannot be listed; read one lock with get(name)`,
        undefined,
      )
    },
    get: async (name) => {
      // Thrown as it is: a name without a key is the caller's to fix, and no lock has it.
      const key = memcachedLockKey(name, environment)
      return guard('inspect', name, () => read(name, key))
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      const key = memcachedLockKey(name, environment)
      return guard('release', name, async () => {
        if (typeof lock !== 'string' && !lock.held) return false
        const expected = typeof lock === 'string' ? undefined : readAs.get(lock)
        // Given a record read here, only the value it was read with; given a name, the value it holds now.
        const current = await valueAt(key)
        if (current === undefined || (expected !== undefined && current !== expected)) return false
        return bounded(() => client.delete(key))
      })
    },
    // memcached drops a lock's key when its expiry passes: there is never an expired record.
    removeExpired: async () => 0,
  }
}
