import assert from 'node:assert/strict'
import { type LockPair, lockPairOf, type PairedLocks } from '../core/lock-provider.ts'
import { slotRecordName } from '../core/slots.ts'
import { lockName, mustLock, suiteConfiguration } from './suite-support.ts'
import type { SlotSuiteContext } from './slot-support.ts'

/**
 * A provider's paired acquisition (a slot's record and its task's lock in one round trip), where
 * it has one: the task's lock is only taken once the record is, each handle holds and releases
 * its own lock, and a lock held elsewhere is left as it is.
 */
export function slotPairCases(suite: SlotSuiteContext): void {
  const { add, node, noPair } = suite
  const paired = async (): Promise<LockPair> => {
    const pair = lockPairOf(await node())
    assert.ok(pair, 'the provider has no paired acquisition; declare slots: { paired: false }')
    return pair
  }
  const names = (): { claim: string; task: string } => {
    const task = lockName()
    return { claim: slotRecordName(task, new Date(Date.UTC(2026, 0, 1, 12))), task }
  }

  add(
    'slots',
    'paired: both free, the slot record and the task lock are taken, held, and released each by its handle',
    10_000,
    async () => {
      const pair = await paired()
      const other = await node()
      const { claim, task } = names()
      const [record, lock] = await pair(suiteConfiguration(claim), suiteConfiguration(task))
      assert.ok(record, 'the free slot record was not taken')
      assert.ok(lock, 'the free task lock was not taken')
      assert.equal(await other.lock(suiteConfiguration(claim)), undefined, 'the slot record is not held')
      assert.equal(await other.lock(suiteConfiguration(task)), undefined, 'the task lock is not held')
      await lock.unlock()
      await (await mustLock(other, suiteConfiguration(task))).unlock()
      assert.equal(await other.lock(suiteConfiguration(claim)), undefined, "the task lock's release freed the record")
      await record.unlock()
      await (await mustLock(other, suiteConfiguration(claim))).unlock()
    },
    noPair,
  )

  add(
    'slots',
    'paired: a slot record held elsewhere takes nothing, and the task lock stays free',
    10_000,
    async () => {
      const pair = await paired()
      const other = await node()
      const { claim, task } = names()
      const held = await mustLock(other, suiteConfiguration(claim))
      const answer: PairedLocks = await pair(suiteConfiguration(claim), suiteConfiguration(task))
      assert.deepEqual(answer, [undefined, undefined])
      await (await mustLock(other, suiteConfiguration(task))).unlock()
      await held.unlock()
    },
    noPair,
  )

  add(
    'slots',
    "paired: a task lock held elsewhere still gives the slot record, and the holder's lock is untouched",
    10_000,
    async () => {
      const pair = await paired()
      const other = await node()
      const third = await node()
      const { claim, task } = names()
      const holder = await mustLock(other, suiteConfiguration(task))
      const [record, lock] = await pair(suiteConfiguration(claim), suiteConfiguration(task))
      assert.ok(record, 'the free slot record was not taken')
      assert.equal(lock, undefined, 'the task lock was taken while held')
      assert.equal(await third.lock(suiteConfiguration(claim)), undefined, 'the slot record is not held')
      assert.equal(await third.lock(suiteConfiguration(task)), undefined, "the holder's task lock was freed")
      await holder.unlock()
      await (await mustLock(third, suiteConfiguration(task))).unlock()
      await record.unlock()
    },
    noPair,
  )

  add(
    'slots',
    'paired: the task lock carries a fencing token where lock() gives one, above the one of its last holder',
    10_000,
    async () => {
      const pair = await paired()
      const other = await node()
      const { claim, task } = names()
      const before = await mustLock(other, suiteConfiguration(task))
      await before.unlock()
      const [record, lock] = await pair(suiteConfiguration(claim), suiteConfiguration(task))
      assert.ok(record && lock, 'the free pair was not taken')
      if (before.fencingToken === undefined) assert.equal(lock.fencingToken, undefined, 'lock() gives no token')
      else
        assert.ok(
          lock.fencingToken !== undefined && lock.fencingToken > before.fencingToken,
          `token ${lock.fencingToken} after ${before.fencingToken}`,
        )
      await Promise.all([lock.unlock(), record.unlock()])
    },
    noPair,
  )
}
