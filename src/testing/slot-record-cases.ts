import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { parseSlotRecordName, slotRecordName } from '../core/slots.ts'
import { FIVE_MINUTES, lockName } from './suite-support.ts'
import { recordNames, type SlotSuiteContext, slotRequest, slotsFrom } from './slot-support.ts'

/** The records slot runs leave, read through the inspector: listed under `<name>@`, and removed once expired. */
export function slotRecordCases(suite: SlotSuiteContext): void {
  const { add, node, noInspector, short, lag } = suite

  add(
    'slots',
    "the inspector lists a slot's record under '<name>@', held for the slot retention",
    10_000,
    async () => {
      const name = lockName()
      const provider = await node()
      const executor = createLockingTaskExecutor(provider)
      const slots = slotsFrom(2)
      for (const slot of slots)
        assert.equal(
          (await executor.executeWithLock(() => {}, { ...slotRequest(name, slot), slotRetention: '1h' })).executed,
          true,
        )
      const { locks } = await provider.inspector!().list({ prefix: `${name}@` })
      assert.deepEqual(
        recordNames(locks),
        slots.map((slot) => slotRecordName(name, slot)),
        'the slot records listed under the prefix',
      )
      for (const [i, record] of locks.entries()) {
        assert.deepEqual(parseSlotRecordName(record.name), { name, slot: slots[i] })
        assert.equal(record.held, true, `${record.name} is not held: a slot's record is never released`)
        if (record.remainingMs !== undefined)
          assert.ok(
            record.remainingMs > 55 * 60_000,
            `${record.name} expires in ${record.remainingMs} ms, not after the slot retention (1h)`,
          )
      }
    },
    noInspector,
  )

  add(
    'slots',
    "removeExpired({ prefix: '<name>@' }) removes the task's expired slot records and nothing else",
    4 * short + 2 * lag + 20_000,
    async () => {
      const name = lockName()
      const other = lockName()
      const provider = await node()
      const [expired1, expired2, live] = slotsFrom(3) as [Date, Date, Date]
      const take = async (recordName: string, lockAtMostFor: number): Promise<void> => {
        assert.ok(
          await provider.lock(lockConfiguration({ name: recordName, lockAtMostFor })),
          `could not take ${recordName}`,
        )
      }
      // As a slot run leaves them: taken, never released.
      await take(slotRecordName(name, expired1), short)
      await take(slotRecordName(name, expired2), short)
      await take(slotRecordName(other, expired1), short)
      await take(name, short)
      await take(slotRecordName(name, live), FIVE_MINUTES)
      await sleep(2 * short + 50 + lag)
      const inspector = provider.inspector!()
      const list = async (prefix: string): Promise<string[]> => recordNames((await inspector.list({ prefix })).locks)
      // What lies outside the prefix: another task's expired slot record, the task's own expired lock.
      const outside = async () => ({
        otherTask: await list(`${other}@`),
        ownLock: (await inspector.get(name)) !== undefined,
      })
      // Stores that expire records by themselves (Redis, etcd) have dropped the expired ones already.
      const before = await list(`${name}@`)
      const outsideBefore = await outside()
      const removed = await inspector.removeExpired({ prefix: `${name}@` })
      assert.deepEqual(await list(`${name}@`), [slotRecordName(name, live)], 'the slot records left under the prefix')
      assert.equal(
        removed,
        before.length - 1,
        `removeExpired() said it removed ${removed} records, of ${JSON.stringify(before)}`,
      )
      assert.deepEqual(
        await outside(),
        outsideBefore,
        "removeExpired() touched a record outside its prefix: another task's slot record, or the task's own lock",
      )
    },
    noInspector,
  )
}
