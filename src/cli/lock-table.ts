import type { LockRecord } from '../core/lock-inspector.ts'
import { pauseOf } from '../core/pause.ts'
import { triggerOf } from '../core/trigger.ts'
import { inert } from './inert.ts'

/** One lock as `shedlock list --json` prints it. Times are ISO-8601 UTC, `null` when the store does not keep them. */
export interface LockJson {
  name: string
  /**
   * `paused`: held by a pause (`shedlock pause`), whose holder says who paused it and why;
   * `triggered`: a pending `shedlock trigger` (the record `NAME@trigger`), held until a replica runs it.
   */
  state: 'held' | 'free' | 'paused' | 'triggered'
  lockedBy: string | null
  lockedAt: string | null
  lockUntil: string | null
  /** Milliseconds until `lockUntil` on the clock of `now`; 0 once passed; `null` when `lockUntil` is unknown. */
  remainingMs: number | null
}

/** `held`, `free`, `paused` (held by a pause) or `triggered` (a pending trigger), as `list` shows a record. */
export function stateOf(record: LockRecord): LockJson['state'] {
  if (!record.held) return 'free'
  return pauseOf(record) ? 'paused' : triggerOf(record) !== undefined ? 'triggered' : 'held'
}

/** The JSON form of a record. */
export function lockJson(record: LockRecord): LockJson {
  return {
    name: record.name,
    state: stateOf(record),
    lockedBy: record.lockedBy ?? null,
    lockedAt: record.lockedAt === undefined ? null : isoUtc(record.lockedAt),
    lockUntil: record.lockUntil === undefined ? null : isoUtc(record.lockUntil),
    remainingMs: record.remainingMs ?? null,
  }
}

/** A time as ISO-8601 UTC with milliseconds, e.g. `2030-01-01T00:00:00.000Z`. */
export function isoUtc(time: Date | number): string {
  return new Date(time).toISOString()
}

/**
 * A duration for people, two units at most: `45s`, `9m 58s`, `2h 5m`, `3d 4h`; `<1s` below a
 * second. Rounded down, so that a lock never looks held longer than it is.
 */
export function humanDuration(ms: number): string {
  if (ms < 1000) return '<1s'
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ]
  const parts: string[] = []
  let rest = Math.floor(ms)
  for (const [unit, size] of units) {
    const count = Math.floor(rest / size)
    rest -= count * size
    if (count > 0 || parts.length > 0) parts.push(`${count}${unit}`)
    if (parts.length === 2) break
  }
  return parts.filter((part, i) => i === 0 || !part.startsWith('0')).join(' ')
}

/** What a record's REMAINING column says: `9m 58s`, `expired 3m ago`, or why it is unknown. */
export function remainingText(record: LockRecord, now: Date): string {
  if (record.lockUntil === undefined) return 'unknown'
  const left = record.lockUntil.getTime() - now.getTime()
  return left > 0 ? humanDuration(left) : `expired ${humanDuration(-left)} ago`
}

/**
 * Aligned columns, two spaces apart, header first; the last column is not padded. Each cell is
 * made {@link inert}: cells hold what the store holds (names, holders, error messages).
 */
export function formatTable(header: readonly string[], given: readonly (readonly string[])[]): string {
  const rows = given.map((row) => row.map(inert))
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)))
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

/** The table of `shedlock list`. */
export function formatLocks(records: readonly LockRecord[], now: Date): string {
  return formatTable(
    ['NAME', 'STATE', 'LOCKED BY', 'LOCKED AT (UTC)', 'LOCK UNTIL (UTC)', 'REMAINING'],
    records.map((record) => [
      record.name,
      stateOf(record),
      record.lockedBy ?? '-',
      record.lockedAt === undefined ? '-' : isoUtc(record.lockedAt),
      record.lockUntil === undefined ? '-' : isoUtc(record.lockUntil),
      remainingText(record, now),
    ]),
  )
}

/**
 * `held by X since T until U (9m 58s left)`, X {@link inert}: what unlock and a skipped run say
 * about a lock; `paused by W (reason) since …` for a pause.
 */
export function describeHolder(record: LockRecord): string {
  const pause = pauseOf(record)
  const by = pause
    ? `paused by ${inert(pause.by)}${pause.reason ? ` (${inert(pause.reason)})` : ''}`
    : record.lockedBy === undefined
      ? 'held by an unknown holder (the store does not record it)'
      : `held by ${inert(record.lockedBy)}`
  const since = record.lockedAt === undefined ? '' : ` since ${isoUtc(record.lockedAt)}`
  const until =
    record.lockUntil === undefined
      ? ' until an expiry the store does not reveal'
      : ` until ${isoUtc(record.lockUntil)} (${humanDuration(record.remainingMs ?? 0)} left)`
  return `${by}${since}${until}`
}
