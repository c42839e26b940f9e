import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { owedRecordName } from '../core/slots.ts'
import { holdingRun, type SlotSuiteContext, slotRequest, slotsFrom } from './slot-support.ts'
import { lockName } from './suite-support.ts'

// How long a case waits for owed slots to run once the lock frees: the waiters poll every 2 s at
// most, and a lease lapses within its length plus the store's expiry lag.
const DRAIN_WAIT_MS = 15_000

/** Polls `check` until it holds or `ms` pass; the assertion names what was awaited. */
async function eventually(what: string, ms: number, check: () => boolean): Promise<void> {
  const until = Date.now() + ms
  while (!check() && Date.now() < until) await sleep(50)
  assert.ok(check(), what)
}

/**
 * At least once (docs/slots.md, "Owed slots"): a slot due while the task's lock is held is owed in
 * the store and runs once the lock frees; a holder that dies frees it within its lease; owed slots
 * left by a node that died run on the next holder.
 */
export function owedSlotCases(suite: SlotSuiteContext): void {
  const { add, executors, node, noInspector, lag } = suite

  add(
    'slots',
    "overlap 'all' (the default): slots that come while the lock is held are owed (reason 'owed') and each runs once the lock frees, oldest first",
    30_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [first, ...later] = slotsFrom(4) as [Date, Date, Date, Date]
      const { finish, run: long } = await holdingRun(a, name, first)
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      const answers = []
      try {
        for (const slot of later) answers.push(await b.executeWithLock(task, slotRequest(name, slot)))
      } finally {
        finish()
      }
      assert.deepEqual(
        answers,
        Array(3).fill({ executed: false, reason: 'owed' }),
        'a slot ran, or was dropped, while the lock was held',
      )
      await long
      await eventually('the owed slots did not all run once the lock freed', DRAIN_WAIT_MS, () => ran.length >= 3)
      await sleep(500)
      assert.deepEqual(
        ran,
        later.map((slot) => slot.getTime()),
        'each owed slot runs once, oldest first',
      )
      for (const slot of later)
        assert.deepEqual(
          await a.executeWithLock(task, slotRequest(name, slot)),
          { executed: false, reason: 'slot-done' },
          'an owed slot ran again',
        )
      const inspector = (await node()).inspector!()
      for (const slot of later)
        assert.notEqual(
          (await inspector.get(owedRecordName(name, slot)))?.held,
          true,
          'an owed record stayed after its run',
        )
      await Promise.all([a.close(), b.close()])
    },
    noInspector,
  )

  add(
    'slots',
    'a holder that died (its lease not renewed) frees the lock within the lease, and the slots due meanwhile run, once',
    30_000,
    async () => {
      const name = lockName()
      const provider = await node()
      const lease = Math.max(2_000, lag * 2)
      // What a dead node leaves: the task's lock, held for one lease and never renewed.
      const dead = await provider.lock(lockConfiguration({ name, lockAtMostFor: lease }))
      assert.ok(dead, 'the task lock could not be taken')
      const executor = createLockingTaskExecutor(await node(), { lease })
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      const slots = slotsFrom(2)
      for (const slot of slots)
        assert.deepEqual(await executor.executeWithLock(task, slotRequest(name, slot)), {
          executed: false,
          reason: 'owed',
        })
      await eventually(
        'the slots owed to a dead holder did not run after its lease',
        lease + lag + DRAIN_WAIT_MS,
        () => ran.length >= 2,
      )
      assert.deepEqual(
        ran,
        slots.map((slot) => slot.getTime()),
      )
      await executor.close()
    },
    noInspector,
  )

  add(
    'slots',
    'owed slots left by a node that died (owed, never run) are run by the next catch-up, once',
    30_000,
    async () => {
      const name = lockName()
      const provider = await node()
      const [ran0, ...owed] = slotsFrom(3) as [Date, Date, Date]
      const executor = createLockingTaskExecutor(await node())
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      assert.equal((await executor.executeWithLock(task, slotRequest(name, ran0))).executed, true)
      // What a node that died before it ran them leaves: an owed record per slot (a node that owes
      // a slot gives its claim back; the node that runs it claims it then).
      for (const slot of owed) {
        const record = owedRecordName(name, slot)
        assert.ok(await provider.lock(lockConfiguration({ name: record, lockAtMostFor: '1h' })), `${record} not taken`)
      }
      ran.length = 0
      const result = await executor.catchUp(
        task,
        { name, lockAtMostFor: '1m' },
        {
          policy: 'all',
          within: '10m',
          fireTimes: () => [],
        },
      )
      assert.deepEqual(result.ran, owed, 'the owed slots did not run')
      assert.deepEqual(
        ran,
        owed.map((slot) => slot.getTime()),
      )
      const again = await executor.catchUp(
        task,
        { name, lockAtMostFor: '1m' },
        {
          policy: 'all',
          within: '10m',
          fireTimes: () => [],
        },
      )
      assert.deepEqual(again.ran, [], 'an owed slot ran twice')
      await executor.close()
    },
    noInspector,
  )
}
