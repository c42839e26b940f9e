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
  const pairs = pairSupport(suite)
  pairTakeCases(pairs)
  pairBatchCases(pairs)
}

// What the paired cases share: the suite's hooks, the pair of a fresh node, and fresh names.
function pairSupport(suite: SlotSuiteContext) {
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
  return { add, node, noPair, paired, names }
}

type PairSupport = ReturnType<typeof pairSupport>

/** One pair at a time: what is taken, held and released, and what is left alone. */
function pairTakeCases({ add, node, noPair, paired, names }: PairSupport): void {
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

/** Pairs asked for, and task locks released, in one turn of the event loop: one batch where the store batches. */
function pairBatchCases({ add, node, noPair, paired, names }: PairSupport): void {
  add(
    'slots',
    'paired: pairs asked for in the same turn (one batch, where the store batches) each get their own answer',
    20_000,
    async () => {
      const pair = await paired()
      const other = await node()
      const free = Array.from({ length: 4 }, names)
      const claimHeld = Array.from({ length: 3 }, names)
      const taskHeld = Array.from({ length: 3 }, names)
      const twice = names()
      const holders = [
        ...(await Promise.all(claimHeld.map(({ claim }) => mustLock(other, suiteConfiguration(claim))))),
        ...(await Promise.all(taskHeld.map(({ task }) => mustLock(other, suiteConfiguration(task))))),
      ]
      // Every request made before any answer: one turn of the event loop.
      const ask = ({ claim, task }: { claim: string; task: string }): Promise<PairedLocks> =>
        pair(suiteConfiguration(claim), suiteConfiguration(task))
      const asked = [...free, ...claimHeld, ...taskHeld, twice, twice].map(ask)
      const answers = await Promise.all(asked)
      const [freeAnswers, claimHeldAnswers, taskHeldAnswers, twiceAnswers] = [
        answers.slice(0, 4),
        answers.slice(4, 7),
        answers.slice(7, 10),
        answers.slice(10),
      ]
      for (const [record, lock] of freeAnswers) assert.ok(record && lock, 'a free pair was not taken')
      for (const answer of claimHeldAnswers) assert.deepEqual(answer, [undefined, undefined], 'a held record was taken')
      for (const [record, lock] of taskHeldAnswers) {
        assert.ok(record, 'the free record of a held task lock was not taken')
        assert.equal(lock, undefined, 'a held task lock was taken')
      }
      const winners = twiceAnswers.filter(([record]) => record !== undefined)
      assert.equal(winners.length, 1, 'one pair asked for twice in the same turn was taken by both or neither')
      assert.ok(winners[0]![1], 'the task lock of the pair asked for twice was not taken')
      // Each answer is the store's: what was taken is held, what was left is still the holder's,
      // and the task lock of a record held elsewhere was never asked for.
      for (const { claim, task } of [...free, ...claimHeld, ...taskHeld, twice]) {
        assert.equal(await other.lock(suiteConfiguration(claim)), undefined, `the slot record ${claim} is not held`)
        if (claimHeld.some((p) => p.task === task)) await (await mustLock(other, suiteConfiguration(task))).unlock()
        else assert.equal(await other.lock(suiteConfiguration(task)), undefined, `the task lock ${task} is not held`)
      }
      await Promise.all(holders.map((h) => h.unlock()))
      await Promise.all(answers.flatMap((answer) => answer.flatMap((h) => (h ? [h.unlock()] : []))))
      for (const { claim, task } of [...free, ...taskHeld]) {
        await (await mustLock(other, suiteConfiguration(claim))).unlock()
        await (await mustLock(other, suiteConfiguration(task))).unlock()
      }
    },
    noPair,
  )

  add(
    'slots',
    'paired: task locks released in the same turn keep each its own lockAtLeastFor, and only their own',
    20_000,
    async () => {
      const pair = await paired()
      const other = await node()
      const atLeast = 1_500
      const kept = [names(), names()]
      const freed = names()
      const answers = await Promise.all([
        ...kept.map(({ claim, task }) => pair(suiteConfiguration(claim), suiteConfiguration(task, 60_000, atLeast))),
        pair(suiteConfiguration(freed.claim), suiteConfiguration(freed.task)),
      ])
      const locks = answers.map(([record, lock]) => {
        assert.ok(record && lock, 'a free pair was not taken')
        return lock
      })
      const released = Date.now()
      await Promise.all(locks.map((lock) => lock.unlock()))
      await (await mustLock(other, suiteConfiguration(freed.task))).unlock()
      for (const { task } of kept)
        if (Date.now() - released < atLeast - 300)
          assert.equal(await other.lock(suiteConfiguration(task)), undefined, `${task} was freed within lockAtLeastFor`)
      await new Promise((resolve) => setTimeout(resolve, atLeast + 300 - (Date.now() - released)))
      for (const { task } of kept) await (await mustLock(other, suiteConfiguration(task))).unlock()
      await Promise.all(answers.map(([record]) => record!.unlock()))
    },
    noPair,
  )
}
