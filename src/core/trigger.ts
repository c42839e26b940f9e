import type { LockRecord } from './lock-inspector.ts'

// A trigger ("run now", `shedlock trigger NAME`) is a lock record of its own beside the task's,
// held by an operator: executors that poll for triggers find it held and run the task through the
// task's own lock. Its holder's name marks it, as a pause's does (pause.ts).
const TRIGGERED_BY = 'triggered by '
// The suffix a shedlock provider adds to the `lockedBy` prefix (support/lock-owner.ts).
const OWNER_SUFFIX = /:\d+:[0-9a-f]{12}$/
// locked_by is 255 characters in ShedLock's DDL; the owner suffix takes up to 31.
const MAX_HOLDER = 200

/** How long a trigger waits for an executor to pick it up before it lapses by itself: 10 minutes, in milliseconds. */
export const TRIGGER_TTL_MS: number = 10 * 60_000

/**
 * The record that asks for one run of task `name` now: `<name>@trigger`. Not a slot record (its
 * suffix is no date) nor an owed one (`@o<digits>`) nor a catch-up's (`@catch-up`), so slot scans
 * pass over it.
 */
export function triggerRecordName(name: string): string {
  return `${name}@trigger`
}

/** True for the name of a trigger record (`<name>@trigger`), held or not. */
export function isTriggerRecordName(name: string): boolean {
  return name.endsWith('@trigger') && name.length > '@trigger'.length
}

/** The `lockedBy` prefix of a trigger by `by`: `triggered by alice@ops`, at most 200 characters. */
export function triggerHolder(by: string): string {
  return `${TRIGGERED_BY}${by.trim() || 'unknown'}`.slice(0, MAX_HOLDER)
}

/** Who asked for the run `record` stands for, when it is a held trigger (`triggered by …`); `undefined` otherwise. */
export function triggerOf(record: LockRecord | undefined): string | undefined {
  if (!record?.held || !record.lockedBy?.startsWith(TRIGGERED_BY)) return undefined
  return record.lockedBy.slice(TRIGGERED_BY.length).replace(OWNER_SUFFIX, '')
}
