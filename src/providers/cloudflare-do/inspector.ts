import type { LockInspector, LockRecord } from '../../core/lock-inspector.ts'
import { byName } from '../../support/inspection.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { describeObjectError, type DurableObjectLockOptions, lockObject, PROVIDER } from './client.ts'
import type { LockReply } from './object.ts'

/** Options of {@link durableObjectLockInspector}: the provider's binding and object name. */
export type DurableObjectLockInspectorOptions = DurableObjectLockOptions

/**
 * Reads and force-releases the locks of a {@link ShedLockDurableObject}: one request per call,
 * read on the object's clock. A force-release sets `lockUntil` to now and `lockedBy` to
 * `"released"`; given a record, only if the lock still holds the acquisition read (its
 * `lockedBy` and `lockedAt`, which the holder's extensions keep).
 *
 * ```ts
 * import { durableObjectLockInspector, type DurableObjectLockNamespace } from 'shedlock/cloudflare-do'
 * declare const env: { LOCKS: DurableObjectLockNamespace }
 * const { locks } = await durableObjectLockInspector({ namespace: env.LOCKS }).list()
 * ```
 *
 * @throws LockConfigurationError when `namespace` is not a Durable Object namespace, or for an empty `objectName`.
 */
export function durableObjectLockInspector(options: DurableObjectLockInspectorOptions): LockInspector {
  const send = lockObject(options)
  const guard = storeGuard(describeObjectError)
  // lockUntil too, for an object of an earlier shedlock, which matches the expiry read.
  const readAs = new WeakMap<LockRecord, { lockedBy: string; lockedAt: number; lockUntil: number }>()
  const toRecord = (lock: LockReply, now: number): LockRecord => {
    const record: LockRecord = Object.freeze({
      name: lock.name,
      lockUntil: new Date(lock.lockUntil),
      lockedAt: new Date(lock.lockedAt),
      lockedBy: lock.lockedBy,
      held: lock.lockUntil > now,
      remainingMs: Math.max(0, lock.lockUntil - now),
    })
    readAs.set(record, { lockedBy: lock.lockedBy, lockedAt: lock.lockedAt, lockUntil: lock.lockUntil })
    return record
  }
  return {
    name: PROVIDER,
    clock: "the Durable Object's clock",
    list: (selection) =>
      guard('list', '', async () => {
        const { now, locks } = (await send({ op: 'list', prefix: selection?.prefix ?? '' })) as {
          now: number
          locks: LockReply[]
        }
        return { now: new Date(now), locks: locks.map((lock) => toRecord(lock, now)).sort(byName) }
      }),
    get: (name) =>
      guard('inspect', name, async () => {
        const { now, lock } = (await send({ op: 'get', name })) as { now: number; lock?: LockReply }
        return lock && toRecord(lock, now)
      }),
    release: (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      return guard('release', name, async () => {
        if (typeof lock !== 'string' && !lock.held) return false
        const expect = typeof lock === 'string' ? undefined : readAs.get(lock)
        return (await send({ op: 'release', name, ...(expect ? { expect } : {}) })).ok === true
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async () =>
        Number((await send({ op: 'removeExpired', prefix: selection?.prefix ?? '' })).removed),
      ),
  }
}
