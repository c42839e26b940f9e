import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { LockInspector, LockRecord } from '../core/lock-inspector.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { pauseOf, type TaskPause } from '../core/pause.ts'

// The operator's pause and resume, as `shedlock pause`/`resume` and the dashboard both do them: a
// pause is the task's lock held by `paused by WHO — REASON` (core/pause.ts), taken only while no
// run holds it, and a resume releases it only if a pause holds it.

// A pause "until resumed" still needs a lock_until every store can hold: MySQL/MariaDB TIMESTAMP
// columns (Java ShedLock's DDL) end on 2038-01-19, so 2038-01-01, or 10 years when that is sooner.
const UNTIL_RESUMED_END = Date.UTC(2038, 0, 1)
const UNTIL_RESUMED_MS = 10 * 365 * 86_400_000
// How often a pause that waits reads the lock of the run it waits for.
const WAIT_POLL_MS = 1_000
// Reads that found the lock free, then lost it to another node before the pause took it.
const MAX_RACES = 3

/** Where a pause is taken: the store's inspector, and its provider holding locks as `lockedBy`. */
export interface PauseTarget {
  readonly inspector: LockInspector
  provider(lockedBy: string): LockProvider
}

/**
 * Why a pause or a resume changed nothing: a run holds the lock (`record`), the lock changed
 * between its read and the release, or other nodes took it each time it was free.
 */
export class PauseRefused extends Error {
  readonly why: 'held-by-run' | 'changed' | 'raced'
  /** The lock as last read: the run's, for `'held-by-run'`; undefined when free or not read. */
  readonly record: LockRecord | undefined

  constructor(message: string, why: PauseRefused['why'], record: LockRecord | undefined) {
    super(message)
    this.name = 'PauseRefused'
    this.why = why
    this.record = record
  }
}

/** How long a pause "until resumed" holds the lock, from `now` (epoch ms): 10 years, or until 2038-01-01 if sooner. */
export function untilResumedMs(now: number): number {
  return Math.min(UNTIL_RESUMED_MS, UNTIL_RESUMED_END - now)
}

/**
 * Takes the lock of task `name` as `holder` (a `pauseHolder()`) for `forMs` (default: until
 * resumed), unless a pause holds it already; while a run holds it, reads it again every second for
 * up to `waitMs` (default 0: no wait). A provider's `LockConfigurationError` (a duration it
 * cannot hold) passes through.
 * @throws PauseRefused when a run still holds the lock, or other nodes kept taking it.
 */
export async function takePause(
  target: PauseTarget,
  name: string,
  holder: string,
  forMs?: number,
  waitMs = 0,
): Promise<{ result: 'paused' | 'already-paused'; pause: TaskPause }> {
  const provider = target.provider(holder)
  const deadline = Date.now() + waitMs
  for (let races = 0; ; ) {
    const record = await target.inspector.get(name)
    const existing = pauseOf(record)
    if (existing) return { result: 'already-paused', pause: existing }
    if (record?.held) {
      const left = deadline - Date.now()
      if (left <= 0) throw new PauseRefused(`lock ${JSON.stringify(name)} is held by a run`, 'held-by-run', record)
      await sleep(Math.min(WAIT_POLL_MS, left))
      continue
    }
    const lockAtMostFor = forMs ?? untilResumedMs(Date.now())
    const configuration = lockConfiguration({ name, lockAtMostFor, lockAtLeastFor: lockAtMostFor })
    // Never unlocked: the lock is the pause, until a resume releases it or lockAtMostFor passes.
    if (await provider.lock(configuration)) {
      const taken = pauseOf(await target.inspector.get(name))
      const read = { name, lockedBy: holder, held: true, lockUntil: configuration.lockAtMostUntil }
      return { result: 'paused', pause: taken ?? pauseOf({ ...read, lockedAt: undefined, remainingMs: undefined })! }
    }
    if (++races >= MAX_RACES)
      throw new PauseRefused(
        `lock ${JSON.stringify(name)} was taken by another node each time it was free; try again`,
        'raced',
        undefined,
      )
  }
}

/**
 * Ends the pause of task `name`: releases its lock if, and only if, a pause holds it, as read (a
 * lock taken since is left alone).
 * @throws PauseRefused when a run holds the lock, or the lock changed between the read and the release.
 */
export async function endPause(
  inspector: LockInspector,
  name: string,
): Promise<{ result: 'resumed' | 'not-paused'; pause: TaskPause | undefined }> {
  const record = await inspector.get(name)
  const pause = pauseOf(record)
  if (record?.held && !pause)
    throw new PauseRefused(`lock ${JSON.stringify(name)} is held by a run, not a pause`, 'held-by-run', record)
  if (!pause) return { result: 'not-paused', pause: undefined }
  if (await inspector.release(record!)) return { result: 'resumed', pause }
  throw new PauseRefused(
    `lock ${JSON.stringify(name)} changed after it was read; nothing was released`,
    'changed',
    await inspector.get(name),
  )
}

/**
 * The pauses among the locks of `names` (one read each), for `status`; a lock that cannot be read
 * counts as no pause.
 */
export async function pausesOf(inspector: LockInspector, names: readonly string[]): Promise<Map<string, TaskPause>> {
  const read = await Promise.all(
    names.map(async (name) => [name, pauseOf(await inspector.get(name).catch(() => undefined))] as const),
  )
  return new Map(read.filter((entry): entry is readonly [string, TaskPause] => entry[1] !== undefined))
}
