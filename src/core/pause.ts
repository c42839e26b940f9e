import { debuglog } from 'node:util'
import type { LockInspector, LockRecord } from './lock-inspector.ts'
import type { RunError } from './run-ledger.ts'

const debug = debuglog('shedlock')

// A pause is the task's own lock, held by an operator: every node (Java ShedLock's too) finds it
// held and skips the task, with nothing new in the store. What marks it is its holder's name,
// which shedlock's providers store as `<lockedBy>:<pid>:<12 hex digits>` and Java as it is.
const PAUSED_BY = 'paused by '
// The suffix a shedlock provider adds to the `lockedBy` prefix (support/lock-owner.ts).
const OWNER_SUFFIX = /:\d+:[0-9a-f]{12}$/
// ' — ' parts the operator from the reason; an operator name never holds it (see pauseHolder).
const REASON_SEPARATOR = ' — '
// locked_by is 255 characters in ShedLock's DDL; the owner suffix takes up to 31, and the
// providers cut the prefix at 200.
const MAX_HOLDER = 200

/** A pause of a task, read from its lock: who paused it, why, and until when. */
export interface TaskPause {
  /** Who paused it, as `shedlock pause` was told (`--by`, or the operator's user and host). */
  readonly by: string
  /** Why, when a reason was given. */
  readonly reason: string | undefined
  /** When the pause ends by itself (`--for`); far ahead for a pause until resumed. */
  readonly until: Date | undefined
}

/**
 * The `lockedBy` prefix of a pause by `by`, with `reason`: what `shedlock pause` holds the task's
 * lock as. At most 200 characters (the reason is cut first).
 */
export function pauseHolder(by: string, reason?: string): string {
  const who = by.replaceAll(REASON_SEPARATOR, ' - ').trim() || 'unknown'
  const head = `${PAUSED_BY}${who}`.slice(0, MAX_HOLDER)
  const why = reason?.trim()
  if (!why || head.length + REASON_SEPARATOR.length >= MAX_HOLDER) return head
  return `${head}${REASON_SEPARATOR}${why}`.slice(0, MAX_HOLDER)
}

/** True when `lockedBy` is a pause's holder: `paused by …`, with or without a provider's owner suffix. */
export function isPauseHolder(lockedBy: string | undefined): lockedBy is string {
  return lockedBy?.startsWith(PAUSED_BY) === true
}

/** The pause `record` holds, when it is a held lock whose holder is a pause; `undefined` otherwise. */
export function pauseOf(record: LockRecord | undefined): TaskPause | undefined {
  if (!record?.held || !isPauseHolder(record.lockedBy)) return undefined
  const holder = record.lockedBy.slice(PAUSED_BY.length).replace(OWNER_SUFFIX, '')
  const at = holder.indexOf(REASON_SEPARATOR)
  return {
    by: at < 0 ? holder : holder.slice(0, at),
    reason: at < 0 ? undefined : holder.slice(at + REASON_SEPARATOR.length),
    until: record.lockUntil,
  }
}

/** One line for people: `paused by alice (deploy) until 2026-12-07T10:00:00.000Z`. */
export function describePause(pause: TaskPause): string {
  const why = pause.reason ? ` (${pause.reason})` : ''
  return `paused by ${pause.by}${why}${pause.until ? ` until ${pause.until.toISOString()}` : ''}`
}

/**
 * The record of lock `name`, read through `inspector` after the lock was found held, to tell a
 * pause from a run: one read, on the losing path only. No inspector, or a failed read, gives
 * `undefined`, which counts as no pause (the task is skipped as `'held'` either way).
 */
export async function readHolder(
  inspector: () => LockInspector | undefined,
  name: string,
): Promise<LockRecord | undefined> {
  try {
    return await inspector()?.get(name)
  } catch (error) {
    debug(
      'Lock "%s": could not read its holder to tell a pause: %s',
      name,
      error instanceof Error ? error.message : error,
    )
    return undefined
  }
}

/** What a slot skipped during `pause` records as its cause in the run ledger. */
export function pauseCause(pause: TaskPause): RunError {
  return { type: 'Paused', message: describePause(pause) }
}

/** What a slot skipped because a run held the lock records as its cause: that run's holder. */
export function heldCause(lockedBy: string): RunError {
  return { type: 'LockHeld', message: `the lock was held by ${lockedBy}` }
}

/** What a slot folded into a later one's run (policy `'once'`) records as its cause. */
export const FOLDED_CAUSE: RunError = {
  type: 'Folded',
  message: "folded into the run of a later slot (policy 'once'): that one run stands for it",
}
