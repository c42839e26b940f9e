import assert from 'node:assert/strict'
import type { LockingTaskExecutor, TaskResult } from '../core/locking-task-executor.ts'
import { FIVE_MINUTES, lockName } from './suite-support.ts'
import { holdingRun, type SlotSuiteContext, slotRequest, slotsFrom } from './slot-support.ts'

/** Each slot runs once across executors, at once or one after another, and a failed slot counts as run. */
export function slotOnceCases(suite: SlotSuiteContext): void {
  const { add, executors, noSlots } = suite

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
      assert.deepEqual(await a.executeWithLock(task, slotRequest(name, slot)), { executed: true, result: 1 })
      assert.deepEqual(
        await b.executeWithLock(task, slotRequest(name, slot)),
        { executed: false, reason: 'slot-done' },
        'another executor ran a slot that ran',
      )
      assert.deepEqual(
        await a.executeWithLock(task, slotRequest(name, slot)),
        { executed: false, reason: 'slot-done' },
        'the same executor ran a slot that ran',
      )
      assert.deepEqual(
        await b.executeWithLock(task, slotRequest(name, next)),
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
          (i % 2 === 0 ? a : b).executeWithLock(() => void runs++, slotRequest(name, slot)),
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
          slotRequest(name, slot),
        ),
        (error: unknown) => error === failure,
      )
      let runs = 0
      for (const executor of [b, a])
        assert.deepEqual(
          await executor.executeWithLock(() => void runs++, slotRequest(name, slot)),
          { executed: false, reason: 'slot-done' },
          'a failed slot ran again',
        )
      assert.equal(runs, 0, 'a failed slot ran again')
    },
    noSlots,
  )
}

/** A slot that finds the task's lock held is skipped for good. */
export function heldSlotCases(suite: SlotSuiteContext): void {
  const { add, executors, noSlots } = suite

  add(
    'slots',
    "overlap 'skip': a slot that comes while the task's lock is held is skipped (reason 'held') and never runs afterwards",
    20_000,
    async () => {
      const name = lockName()
      const [a, b] = await executors()
      const [first, second, third] = slotsFrom(3) as [Date, Date, Date]
      const { finish, run: long } = await holdingRun(a, name, first)
      const ran: number[] = []
      const task = ({ slot }: { slot: Date | undefined }): void => void ran.push(slot!.getTime())
      let skipped: TaskResult<void>
      try {
        skipped = await b.executeWithLock(task, { ...slotRequest(name, second), overlap: 'skip' })
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
          await executor.executeWithLock(task, slotRequest(name, second)),
          { executed: false, reason: 'slot-done' },
          'a skipped slot ran later',
        )
      assert.deepEqual(
        await b.executeWithLock(task, slotRequest(name, third)),
        { executed: true, result: undefined },
        'the slot after the skipped one did not run',
      )
      assert.deepEqual(ran, [third.getTime()])
    },
    noSlots,
  )
}

/** A catch-up on two executors at once runs each missed slot once, oldest first. */
export function catchUpCases(suite: SlotSuiteContext): void {
  const { add, executors, noInspector } = suite

  add(
    'slots',
    "catchUp with policy 'all' on two executors at once runs each missed slot once, oldest first; a later catch-up finds nothing missed",
    20_000,
    async () => {
      const [a, b] = await executors()
      // Closed at the end: a catch-up that found the lock held retries in the background, and
      // must not reach the store after the suite has closed its client.
      try {
        await twoCatchUps(a, b)
      } finally {
        await Promise.all([a.close(), b.close()])
      }
    },
    noInspector,
  )

  async function twoCatchUps(a: LockingTaskExecutor, b: LockingTaskExecutor): Promise<void> {
    const name = lockName()
    const schedule = slotsFrom(4)
    const fireTimes = (from: Date, to: Date): Date[] => schedule.filter((slot) => slot >= from && slot <= to)
    assert.equal((await a.executeWithLock(() => {}, slotRequest(name, schedule[0]!))).executed, true)
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
    // Asked of the one that did not catch up: a catch-up that found the lock held retries in the
    // background, and its retry (which finds nothing) may hold the lock at this moment; asking
    // that executor again takes its retry over instead of contending with it.
    const later = results[0] === caughtUp[0] ? b : a
    assert.equal((await later.catchUp(task, lock, catchUp)).outcome, 'nothing-missed')
    assert.deepEqual(
      await a.executeWithLock(task, slotRequest(name, schedule[2]!)),
      { executed: false, reason: 'slot-done' },
      'a caught-up slot ran again',
    )
    assert.deepEqual(ran, missed)
  }
}
