import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { FencingFloor, parseFencingToken } from '../../support/fencing.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkName,
  checkSpace,
  type DatastoreClient,
  describeDatastoreError,
  FENCING_TOKEN,
  kindLabel,
  LOCK_UNTIL,
  LOCKED_AT,
  LOCKED_BY,
  type LockSpace,
  lockKey,
  PROVIDER,
  timeOf,
} from './format.ts'
import { datastoreLockInspector } from './inspector.ts'
import { propertiesOf, readIn, transact } from './transaction.ts'

/** Options of {@link datastoreLockProvider}. */
export interface DatastoreLockProviderOptions {
  /**
   * Your `@google-cloud/datastore` client, e.g. `new Datastore({ projectId: 'my-project' })`; it
   * talks to the emulator when `DATASTORE_EMULATOR_HOST` is set. The provider never closes it.
   */
  datastore: DatastoreClient
  /** The kind of the lock entities: Java ShedLock's default, `lock`, shares locks with Java nodes. @default "lock" */
  kind?: string
  /** The namespace of the lock entities. @default the client's namespace (the default namespace unless the client names one) */
  namespace?: string
  /**
   * Prefix of the `locked_by` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * The clock that decides expiry. Datastore has no server time a transaction can read (Java
   * ShedLock uses its JVM's clock too), so nodes must keep their clocks in sync. @default systemClock
   */
  clock?: Clock
}

/**
 * Locks as entities of Google Cloud Datastore (or Firestore in Datastore mode) in Java ShedLock's
 * format (kind `lock`, keyed by the lock name), through your `@google-cloud/datastore` client,
 * so Java and Node nodes exclude each other: one optimistic transaction per acquisition.
 * Extensible; expiry is decided on each node's `clock`, as in Java; every lock carries a
 * `fencingToken` at no extra request. Nothing needs creating.
 *
 * ```ts
 * import { Datastore } from '@google-cloud/datastore'
 * import { datastoreLockProvider } from 'shedlock/datastore'
 * const provider = datastoreLockProvider({ datastore: new Datastore({ projectId: 'my-project' }) })
 * ```
 *
 * See docs/providers/datastore.md.
 *
 * @throws LockConfigurationError for a missing client, an invalid kind or namespace, or an empty `lockedBy`.
 */
export function datastoreLockProvider(
  options: DatastoreLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const space = checkSpace(options)
  const { lockedBy } = options
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `datastore: lockedBy must be a non-empty string (it prefixes the locked_by property), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('datastore: clock must have a now() method returning epoch milliseconds')
  const guard = storeGuard(describeDatastoreError(kindLabel(space)))
  const floor = new FencingFloor(clock)

  return {
    name: PROVIDER,
    inspector: () => datastoreLockInspector({ ...options, clock }),
    async lock(configuration: LockConfiguration) {
      checkLockRequest(PROVIDER, configuration, clock)
      checkName(configuration.name)
      const owner = lockOwner(lockedBy)
      const fencingToken = await guard('acquire', configuration.name, () =>
        acquire(space, clock, floor, configuration, owner),
      )
      if (fencingToken === false) return undefined
      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        fencingToken,
        unlock: async (current) => {
          // Another holder by now (or no entity): leave it alone.
          await guard('release', current.name, () =>
            moveOwn(space, current.name, owner, () => Math.max(clock.now(), current.lockAtLeastUntil.getTime())),
          )
        },
        extend: (next) =>
          guard('extend', next.name, () =>
            moveOwn(space, next.name, owner, (until) =>
              until > clock.now() ? next.lockAtMostUntil.getTime() : undefined,
            ),
          ),
      })
    },
  }
}

/** Takes the lock if it is free; resolves to `false` when it is held, else to the acquisition's fencing token. */
function acquire(
  space: LockSpace,
  clock: Clock,
  floor: FencingFloor,
  configuration: LockConfiguration,
  owner: string,
): Promise<false | bigint> {
  const key = lockKey(space, configuration.name)
  return transact<false | bigint>(space, async (transaction) => {
    const entity = await readIn(transaction, key)
    const now = clock.now()
    if (entity) {
      const until = timeOf(entity[LOCK_UNTIL])
      // Held, or no lock_until to compare (Java's takeover needs one too).
      if (until === undefined || until > now) return { value: false as const, write: false }
    }
    const token = floor.next(counterOf(entity?.[FENCING_TOKEN]))
    const data = {
      ...(entity ? propertiesOf(entity) : {}),
      [LOCK_UNTIL]: configuration.lockAtMostUntil,
      [LOCKED_AT]: new Date(now),
      [LOCKED_BY]: owner,
      [FENCING_TOKEN]: space.datastore.int(String(token)),
    }
    if (entity) transaction.update({ key, data })
    else transaction.insert({ key, data })
    return { value: token, write: true }
  })
}

/**
 * Moves `lock_until` of the lock `owner` holds to what `next` returns for its current
 * `lock_until` (nothing when `next` returns `undefined`). Resolves to whether it moved it.
 */
function moveOwn(
  space: LockSpace,
  name: string,
  owner: string,
  next: (until: number) => number | undefined,
): Promise<boolean> {
  const key = lockKey(space, name)
  return transact(space, async (transaction) => {
    const entity = await readIn(transaction, key)
    const until = timeOf(entity?.[LOCK_UNTIL])
    if (!entity || entity[LOCKED_BY] !== owner || until === undefined) return { value: false, write: false }
    const moved = next(until)
    if (moved === undefined) return { value: false, write: false }
    transaction.update({ key, data: { ...propertiesOf(entity), [LOCK_UNTIL]: new Date(moved) } })
    return { value: true, write: true }
  })
}

/** The stored counter: an integer the client wrapped (`{ value: '…' }`), or a plain number; `undefined` when absent or not a count. */
export function counterOf(value: unknown): bigint | undefined {
  if (typeof value === 'object' && value !== null && 'value' in value)
    return parseFencingToken(String((value as { value: unknown }).value))
  return parseFencingToken(value)
}
