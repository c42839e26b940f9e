import assert from 'node:assert/strict'
import { type LockProvider, lockPairOf } from '../core/lock-provider.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { slotPairCases } from './slot-pair-cases.ts'
import { slotRecordCases } from './slot-record-cases.ts'
import { owedSlotCases } from './owed-cases.ts'
import { catchUpCases, heldSlotCases, slotOnceCases } from './slot-run-cases.ts'
import type { AddSlotCase, SlotSuiteContext } from './slot-support.ts'

/** What the `slots` group needs of the suite's options. */
export interface SlotCaseOptions {
  readonly slots: { inspector: boolean; paired?: boolean } | undefined
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
  const declared = options.slots
  const noSlots = declared ? undefined : 'no slots option given'
  const suite: SlotSuiteContext = {
    add,
    node,
    executors: async () => [createLockingTaskExecutor(await node()), createLockingTaskExecutor(await node())] as const,
    noSlots,
    noInspector: noSlots ?? (declared!.inspector ? undefined : 'the provider has no inspector()'),
    noPair: noSlots ?? (declared!.paired ? undefined : 'no paired acquisition declared (slots: { paired })'),
    short: Math.max(200, g),
    lag,
  }

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
    'the declared paired acquisition matches the provider',
    10_000,
    async () => {
      const has = lockPairOf(await node()) !== undefined
      assert.equal(
        has,
        declared!.paired ?? false,
        has
          ? 'the provider takes a slot record and its task lock in one round trip; declare slots: { paired: true }'
          : 'the provider has no paired acquisition; declare slots: { paired: false }',
      )
    },
    noSlots,
  )

  slotOnceCases(suite)
  heldSlotCases(suite)
  owedSlotCases(suite)
  slotRecordCases(suite)
  catchUpCases(suite)
  slotPairCases(suite)
}
