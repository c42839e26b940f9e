import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockRecord } from '../core/lock-inspector.ts'
import { TRIGGER_TTL_MS, triggerOf, triggerRecordName } from '../core/trigger.ts'
import type { PauseTarget } from './pause-control.ts'

// The operator's "run now", as `shedlock trigger` does it (and the dashboard will): the record
// `<name>@trigger` held by `triggered by WHO` (core/trigger.ts) until an executor that polls for
// triggers runs the task and releases it.

// How often a trigger that waits for its pick-up reads its record.
const PICK_UP_POLL_MS = 250

/** What {@link takeTrigger} did: took the trigger, or found one pending; `record` is it, as read. */
export interface TakenTrigger {
  readonly result: 'triggered' | 'already-triggered'
  /** Who asked for the pending run: `--by`, or the first operator's for `'already-triggered'`. */
  readonly by: string
  /** The trigger record as read after taking it, for {@link withdrawTrigger}; `undefined` if it could not be read back. */
  readonly record: LockRecord | undefined
}

/**
 * Asks for one run of task `name` now: takes `<name>@trigger` as `holder` (a `triggerHolder()`)
 * for 10 minutes, unless a trigger is pending already. An executor polling for triggers runs the
 * task through its own lock and releases the record.
 */
export async function takeTrigger(target: PauseTarget, name: string, holder: string): Promise<TakenTrigger> {
  const recordName = triggerRecordName(name)
  // Twice at most: a pending trigger picked up between the read and the take frees the record.
  for (let attempt = 0; ; attempt++) {
    const pending = await target.inspector.get(recordName)
    const by = triggerOf(pending)
    if (by !== undefined) return { result: 'already-triggered', by, record: pending }
    const configuration = lockConfiguration({
      name: recordName,
      lockAtMostFor: TRIGGER_TTL_MS,
      lockAtLeastFor: TRIGGER_TTL_MS,
    })
    // Never unlocked here: the executor that runs the task releases it, or it lapses.
    if (await target.provider(holder).lock(configuration)) {
      const record = await target.inspector.get(recordName)
      return { result: 'triggered', by: triggerOf(record) ?? holder, record }
    }
    if (attempt >= 1) throw new Error(`the trigger record ${JSON.stringify(recordName)} is held by another tool`)
  }
}

/**
 * Waits up to `waitMs` for an executor to pick up the trigger `record` (its record released, or
 * taken again since); resolves to the milliseconds it took, or `undefined` when it is still pending.
 */
export async function waitForPickUp(
  target: Pick<PauseTarget, 'inspector'>,
  record: LockRecord,
  waitMs: number,
): Promise<number | undefined> {
  const start = Date.now()
  for (;;) {
    const now = await target.inspector.get(record.name)
    if (!now?.held || now.lockedBy !== record.lockedBy || now.lockedAt?.getTime() !== record.lockedAt?.getTime())
      return Date.now() - start
    const left = start + waitMs - Date.now()
    if (left <= 0) return undefined
    await sleep(Math.min(PICK_UP_POLL_MS, left))
  }
}

/** Withdraws a trigger nobody picked up: releases `record` if it is still that acquisition; true when it did. */
export function withdrawTrigger(target: Pick<PauseTarget, 'inspector'>, record: LockRecord): Promise<boolean> {
  return target.inspector.release(record)
}
