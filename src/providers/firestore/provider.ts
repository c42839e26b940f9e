import { type Clock, systemClock } from '../../core/clock.ts'
import { defineLock } from '../../core/define-lock.ts'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { FencingFloor, parseFencingToken } from '../../support/fencing.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { type StoreAction, storeGuard } from '../../support/store-errors.ts'
import { withTimeout } from '../../support/with-timeout.ts'
import { checkCollection, type FirestoreLockCollection, type FirestoreSnapshot, writeAsRead } from './client.ts'
import {
  collectionLabel,
  describeFirestoreError,
  FENCING_TOKEN,
  firestoreDocumentId,
  LOCK_UNTIL,
  LOCKED_AT,
  LOCKED_BY,
  millisOf,
  PROVIDER,
} from './format.ts'
import { firestoreLockInspector } from './inspector.ts'

/** Options of {@link firestoreLockProvider}. */
export interface FirestoreLockProviderOptions {
  /**
   * The lock collection, e.g. `new Firestore().collection('shedlock')` (`shedlock` is Java
   * ShedLock's default: use it to share locks with Java nodes). Nothing needs creating: Firestore
   * makes the collection with its first document, and the provider reads documents by id only.
   */
  collection: FirestoreLockCollection
  /**
   * Prefix of the `lockedBy` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /**
   * The clock that decides expiry. As in Java ShedLock, `lockUntil` and `lockedAt` are written
   * from this process's time and compared with it, so nodes must keep their clocks in sync.
   * @default systemClock
   */
  clock?: Clock
  /**
   * How long one lock operation (two or three requests) may take before it rejects with
   * `LockProviderError`: the client retries an unreachable Firestore for about 45 s by itself.
   * A milliseconds number or a duration string. @default "10s"
   */
  timeout?: Duration
}

// Conditional writes that find the document changed since it was read: each re-reads it. Three
// rounds lost in a row means other nodes keep taking and releasing the lock: "held" then.
const ROUNDS = 3

/**
 * Locks as documents of a Firestore collection in Java ShedLock's format (one document per lock,
 * its id the lock name), through your `@google-cloud/firestore` client, so Java and Node nodes
 * exclude each other. Extensible; expiry is decided on each node's `clock`, as in Java; every lock
 * carries a `fencingToken` at no extra request. Nothing needs creating.
 *
 * ```ts
 * import { Firestore } from '@google-cloud/firestore'
 * import { firestoreLockProvider } from 'shedlock/firestore'
 * const provider = firestoreLockProvider({ collection: new Firestore().collection('shedlock') })
 * ```
 *
 * See docs/providers/firestore.md.
 *
 * @throws LockConfigurationError when `collection` is not a CollectionReference, `lockedBy` is
 *   empty, or `timeout` is not a positive duration.
 */
export function firestoreLockProvider(
  options: FirestoreLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { collection, lockedBy } = options ?? {}
  checkCollection(collection)
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `${PROVIDER}: lockedBy must be a non-empty string (it prefixes the lockedBy field), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const timeout = parseDuration(options.timeout ?? '10s')
  if (!(timeout > 0)) throw new LockConfigurationError(`${PROVIDER}: timeout must be longer than 0ms`)
  const clock = options.clock ?? systemClock
  const floor = new FencingFloor(clock)
  const storeCall = storeGuard(describeFirestoreError(collectionLabel(collection)))
  const guard = <T>(action: StoreAction, name: string, run: () => Promise<T>): Promise<T> =>
    storeCall(action, name, () => withTimeout(run(), timeout, { store: 'Firestore' }))

  /** Resolves to the acquisition's fencing token, or `false` when the lock is held. */
  const acquire = async (configuration: LockConfiguration, owner: string): Promise<bigint | false> => {
    const ref = collection.doc(firestoreDocumentId(configuration.name))
    for (let round = 0; round < ROUNDS; round++) {
      const snapshot = await ref.get()
      const now = clock.now()
      if (snapshot.exists) {
        const until = millisOf(snapshot.get(LOCK_UNTIL))
        if (until === undefined || until > now) return false
      }
      const token = floor.next(snapshot.exists ? tokenOf(snapshot) : undefined)
      const written = await writeAsRead(ref, snapshot, {
        [LOCK_UNTIL]: configuration.lockAtMostUntil,
        [LOCKED_AT]: new Date(now),
        [LOCKED_BY]: owner,
        [FENCING_TOKEN]: Number(token),
      })
      if (written) return token
    }
    return false
  }

  /**
   * Writes `change(snapshot, now)` to the document this acquisition holds; resolves to whether it
   * did. Nothing is written (and nothing recreated) when `change` declines: not ours, gone, expired.
   */
  const rewrite = async (
    name: string,
    change: (snapshot: FirestoreSnapshot, now: number) => Record<string, unknown> | undefined,
  ): Promise<boolean> => {
    const ref = collection.doc(firestoreDocumentId(name))
    for (let round = 0; round < ROUNDS; round++) {
      const snapshot = await ref.get()
      const data = snapshot.exists ? change(snapshot, clock.now()) : undefined
      if (!data) return false
      if (await writeAsRead(ref, snapshot, data)) return true
    }
    return false
  }

  return {
    name: PROVIDER,
    inspector: () => firestoreLockInspector({ collection, clock, timeout }),
    async lock(configuration) {
      checkLockRequest(PROVIDER, configuration, clock)
      firestoreDocumentId(configuration.name)
      const owner = lockOwner(lockedBy)
      const fencingToken = await guard('acquire', configuration.name, () => acquire(configuration, owner))
      if (fencingToken === false) return undefined
      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        fencingToken,
        unlock: async (current) => {
          await guard('release', current.name, () =>
            rewrite(current.name, (snapshot, now) =>
              snapshot.get(LOCKED_BY) === owner
                ? { [LOCK_UNTIL]: new Date(Math.max(now, current.lockAtLeastUntil.getTime())) }
                : undefined,
            ),
          )
        },
        extend: (next) =>
          guard('extend', next.name, () =>
            rewrite(next.name, (snapshot, now) => {
              const until = millisOf(snapshot.get(LOCK_UNTIL))
              return snapshot.get(LOCKED_BY) === owner && until !== undefined && until > now
                ? { [LOCK_UNTIL]: next.lockAtMostUntil }
                : undefined
            }),
          ),
      })
    },
  }
}

/** The document's fencing counter: an integer (a number, or a bigint with the client's `useBigInt`). */
export function tokenOf(snapshot: FirestoreSnapshot): bigint | undefined {
  const value = snapshot.get(FENCING_TOKEN)
  return typeof value === 'bigint' ? value : parseFencingToken(value)
}
