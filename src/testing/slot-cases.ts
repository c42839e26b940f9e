import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { createLockingTaskExecutor, type TaskResult } from '../core/locking-task-executor.ts'
import { parseSlotRecordName, slotRecordName } from '../core/slots.ts'
import { FIVE_MINUTES, lockName } from './suite-support.ts'

/** How the `slots` group registers a case (the suite's own `add`). */
export type AddSlotCase = (
  group: 'slots',
  what: string,
  timeoutMs: number,
  run: () => Promise<void>,
  skip?: string,
) => void

/** What the `slots` group needs of the suite's options. */
export interface SlotCaseOptions {
  readonly slots: { inspector: boolean } | undefined
  readonly timeGranularityMs: number | undefined
}

/**
 * The `slots` group: what a store must do for slot runs (docs/slots.md), through executors over
 * the provider, as applications use it.
 */
export function slotCases(
  options: SlotCaseOptions,
  add: AddSlotCase,
  node: () => Promise<LockProvider>,
  lag: number,
): void {
  const g = Math.max(1, options.timeGranularityMs ?? 1)
  const short = Math.max(200, g)
  const declared = options.slots
  const noSlots = declared ? undefined : 'no slots option given'
  const noInspector = noSlots ?? (declared!.inspector ? undefined : 'the provider has no inspector()')
  const request = (name: string, slot: Date) => ({ name, lockAtMostFor: FIVE_MINUTES, lockAtLeastFor: 0, slot })
  // Whole seconds, in the past: slots are scheduled fire times, and a catch-up looks back.
  const slotsFrom = (count: number): Date[] => {
    const base = Math.floor(Date.now() / 1000) * 1000 - 60_000
    return Array.from({ length: count }, (_, k) => new Date(base + k * 1000))
  }
  const executors = async () =>
    [createLockingTaskExecutor(await node()), createLockingTaskExecutor(await node())] as const
  const names = (records: readonly { name: string }[]): string[] => records.map((r) => r.name)

  add(
    'slots',
    'the declared inspector() matches the provider',
    10_000,
    async () => {
      const provider = await node()
      assert.equal(
        typeof provider.inspector === 'function',
        declared!.inspector,
        declared!.inspector
          ? 'the provider has no inspector(); declare slots: { inspector: false }'
          : 'the provider has inspector(); declare slots: { inspector: true }',
      )
    },
    noSlots,
  )

  add(
    'slots',
    "a slot runs once across two executors: the other gets { executed: false, reason: 'slot-done' }, and the next slot runs",
    10_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [slot, next] = slotsFrom(2) as [Date, Date]
      const ran: number[] = []
      const task = ({ slot: s }: { slot: Date | undefined }): number => {
        ran.push(s!.getTime())
        return ran.length
      }
      assert.deepEqual(await a.executeWithLock(task, request(name, slot)), { executed: true, result: 1 })
      assert.deepEqual(
        await b.executeWithLock(task, request(name, slot)),
        { executed: false, reason: 'slot-done' },
        'another executor ran a slot that ran',
      )
      assert.deepEqual(
        await a.executeWithLock(task, request(name, slot)),
        { executed: false, reason: 'slot-done' },
        'the same executor ran a slot that ran',
      )
      assert.deepEqual(
        await b.executeWithLock(task, request(name, next)),
        { executed: true, result: 2 },
        'the next slot did not run',
      )
      assert.deepEqual(ran, [slot.getTime(), next.getTime()])
    },
    noSlots,
  )

  add(
    'slots',
    'of 8 attempts at one slot on two executors at once, one runs and seven find the slot done',
    10_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [slot] = slotsFrom(1) as [Date]
      let runs = 0
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 === 0 ? a : b).executeWithLock(() => void runs++, request(name, slot)),
        ),
      )
      assert.equal(runs, 1, `the slot ran ${runs} times`)
      assert.equal(results.filter((r) => r.executed).length, 1)
      assert.deepEqual(
        results.filter((r) => !r.executed),
        Array.from({ length: 7 }, () => ({ executed: false, reason: 'slot-done' })),
      )
    },
    noSlots,
  )

  add(
    'slots',
    'a failed slot counts as run: no executor runs it again',
    10_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [slot] = slotsFrom(1) as [Date]
      const failure = new Error('the task failed')
      await assert.rejects(
        a.executeWithLock(
          () => {
            throw failure
          },
          request(name, slot),
        ),
        (error: unknown) => error === failure,
      )
      let runs = 0
      for (const executor of [b, a])
        assert.deepEqual(
          await executor.executeWithLock(() => void runs++, request(name, slot)),
          { executed: false, reason: 'slot-done' },
          'a failed slot ran again',
        )
      assert.equal(runs, 0, 'a failed slot ran again')
    },
    noSlots,
  )

  add(
    'slots',
    "a slot that comes while the task's lock is held is skipped (reason 'held') and never runs afterwards",
    20_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [first, second, third] = slotsFrom(3) as [Date, Date, Date]
      let finish!: () => void
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const long = a.executeWithLock(
        async () => {
          started()
          await new Promise<void>((resolve) => (finish = resolve))
        },
        request(name, first),
      )
      await running
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      let skipped: TaskResult<void>
      try {
        skipped = await b.executeWithLock(task, request(name, second))
      } finally {
        finish()
      }
      assert.deepEqual(
        skipped,
        { executed: false, reason: 'held' },
        'a slot ran while a run of an earlier slot held the lock',
      )
      assert.deepEqual(await long, { executed: true, result: undefined })
      for (const executor of [a, b])
        assert.deepEqual(
          await executor.executeWithLock(task, request(name, second)),
          { executed: false, reason: 'slot-done' },
          'a skipped slot ran later',
        )
      assert.deepEqual(
        await b.executeWithLock(task, request(name, third)),
        { executed: true, result: undefined },
        'the slot after the skipped one did not run',
      )
      assert.deepEqual(ran, [third.getTime()])
    },
    noSlots,
  )

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
          (await executor.executeWithLock(() => {}, { ...request(name, slot), slotRetention: '1h' })).executed,
          true,
        )
      const { locks } = await provider.inspector!().list({ prefix: `${name}@` })
      assert.deepEqual(
        names(locks),
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
      const list = async (prefix: string): Promise<string[]> => names((await inspector.list({ prefix })).locks)
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

  add(
    'slots',
    "catchUp with policy 'all' on two executors at once runs each missed slot once, oldest first; a later catch-up finds nothing missed",
    20_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const schedule = slotsFrom(4)
      const fireTimes = (from: Date, to: Date): Date[] => schedule.filter((slot) => slot >= from && slot <= to)
      assert.equal((await a.executeWithLock(() => {}, request(name, schedule[0]!))).executed, true)
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      const catchUp = { policy: 'all' as const, within: '1h' as const, fireTimes }
      const lock = { name, lockAtMostFor: FIVE_MINUTES }
      const results = await Promise.all([a.catchUp(task, lock, catchUp), b.catchUp(task, lock, catchUp)])
      const missed = schedule.slice(1).map((slot) => slot.getTime())
      assert.deepEqual(ran, missed, 'the missed slots, each once, oldest first')
      const caughtUp = results.filter((result) => result.outcome === 'ran')
      assert.equal(caughtUp.length, 1, `catch-up outcomes: ${results.map((r) => r.outcome).join(', ')}`)
      assert.deepEqual(
        caughtUp[0]!.ran.map((slot) => slot.getTime()),
        missed,
      )
      // The other found the lock held (they overlapped), or nothing left to run (it came after).
      const other = results.find((result) => result !== caughtUp[0])!
      assert.ok(other.outcome === 'held' || other.outcome === 'nothing-missed', `the other catch-up: ${other.outcome}`)
      assert.equal((await b.catchUp(task, lock, catchUp)).outcome, 'nothing-missed')
      assert.deepEqual(
        await a.executeWithLock(task, request(name, schedule[2]!)),
        { executed: false, reason: 'slot-done' },
        'a caught-up slot ran again',
      )
      assert.deepEqual(ran, missed)
    },
    noInspector,
  )
}
