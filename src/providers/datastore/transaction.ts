import { setTimeout as sleep } from 'node:timers/promises'
import { type DatastoreKey, type DatastoreTransaction, isContention, type LockSpace } from './format.ts'

// Datastore transactions are optimistic: a commit after another transaction changed an entity
// this one read fails with ABORTED. A lock attempt that lost such a race reads again, and then
// sees the winner's lock, so the provider retries a few times before giving up.

const ATTEMPTS = 10

/** What a unit of work decided: its result, and whether its queued mutations are to be committed. */
export interface Outcome<T> {
  readonly value: T
  readonly write: boolean
}

/**
 * Runs `work` in a transaction, commits it when it asks to write, and runs it again (in a new
 * transaction, after a short random pause) when its read or commit lost a race, at most ten times.
 * @throws the client's error (the last contention error when every attempt lost)
 */
export function transact<T>(
  space: LockSpace,
  work: (transaction: DatastoreTransaction) => Promise<Outcome<T>>,
): Promise<T> {
  // Another transaction committed first: a new one reads again, after it.
  return retryContention(() => attemptIn(space.datastore.transaction(), work))
}

/**
 * Runs `request` (a read, or a write that is whole and so can be sent twice) again after a short
 * random pause while Datastore aborts it for contention, at most ten times in all.
 * @throws the client's error (the last contention error when every attempt lost)
 */
export async function retryContention<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request()
    } catch (error) {
      if (!isContention(error) || attempt >= ATTEMPTS) throw error
      await sleep(Math.random() * 10 * Math.min(attempt, 5))
    }
  }
}

async function attemptIn<T>(
  transaction: DatastoreTransaction,
  work: (transaction: DatastoreTransaction) => Promise<Outcome<T>>,
): Promise<T> {
  await transaction.run()
  let outcome: Outcome<T>
  try {
    outcome = await work(transaction)
  } catch (error) {
    await transaction.rollback().catch(() => undefined)
    throw error
  }
  if (!outcome.write) {
    // Nothing to write: end the transaction without waiting for it.
    transaction.rollback().catch(() => undefined)
    return outcome.value
  }
  await transaction.commit()
  return outcome.value
}

/** Reads the entity under `key` in `transaction`, with integers wrapped so that a rewrite keeps their type and digits. */
export async function readIn(
  transaction: DatastoreTransaction,
  key: DatastoreKey,
): Promise<Record<string, unknown> | undefined> {
  const [entity] = await transaction.get(key, { wrapNumbers: true })
  return (entity ?? undefined) as Record<string, unknown> | undefined
}

/** The entity's own properties (not its key), to write back with some of them changed, as Java ShedLock's updates do. */
export function propertiesOf(entity: Record<string, unknown>): Record<string, unknown> {
  const properties: Record<string, unknown> = {}
  for (const name of Object.keys(entity)) properties[name] = entity[name]
  return properties
}
