import { LockConfigurationError } from './errors.ts'

/**
 * How long a slot's record is kept by default: 24 hours. For as long as it is kept, no node runs
 * that slot again, whatever its clock or scheduler says; it must exceed the worst clock skew and
 * scheduling delay between nodes (seconds), and the catch-up window.
 */
export const DEFAULT_SLOT_RETENTION = '24h'

// `<name>@<slot>`, the slot in ISO-8601 basic format (no '-' or ':', which some stores escape).
const SLOT_SUFFIX = /@(\d{8}T\d{6}(?:\.\d{3})?Z)$/

/**
 * The name of the record that says slot `slot` of lock `name` ran (or was skipped) somewhere:
 * `<name>@<slot>` with the slot in ISO-8601 basic format, e.g. `nightly-report@20261124T020000Z`
 * (milliseconds only when not zero). It is a lock record of its own, in the provider's format, held
 * for the slot retention: on a SQL store a row of the lock table, on Redis a key.
 *
 * @throws LockConfigurationError for a slot that is not a valid Date.
 */
export function slotRecordName(name: string, slot: Date): string {
  if (!(slot instanceof Date) || Number.isNaN(slot.getTime())) {
    throw new LockConfigurationError(
      `Lock "${name}": slot must be a valid Date (the scheduled fire time), got ${slot instanceof Date ? 'an Invalid Date' : typeof slot}`,
    )
  }
  const at = slot.getTime()
  // The jobs of one tick share a slot: its stamp is made once (its regexes were 2.3 % of a
  // profile of slot runs).
  if (at !== stampOf.at) stampOf = { at, stamp: slot.toISOString().replace(/[-:]/g, '').replace('.000Z', 'Z') }
  return `${name}@${stampOf.stamp}`
}

// The last slot's stamp (ISO-8601 basic), by its epoch ms.
let stampOf = { at: Number.NaN, stamp: '' }

/** The lock name and slot of a slot record's name, or `undefined` when `recordName` is not one. */
export function parseSlotRecordName(recordName: string): { name: string; slot: Date } | undefined {
  const match = SLOT_SUFFIX.exec(recordName)
  if (!match) return undefined
  const basic = match[1]!
  const iso = `${basic.slice(0, 4)}-${basic.slice(4, 6)}-${basic.slice(6, 11)}:${basic.slice(11, 13)}:${basic.slice(13)}`
  const slot = new Date(iso)
  return Number.isNaN(slot.getTime()) ? undefined : { name: recordName.slice(0, match.index), slot }
}

/**
 * The name of the record a catch-up of lock `name` holds while it runs: `<name>@catch-up`. A node
 * whose slot finds the task's lock held looks it up: held, the lock is a catch-up's, and the slot
 * waits for it to end instead of being recorded as skipped. Not a slot record: its suffix is no
 * date.
 */
export function catchUpMarkerName(name: string): string {
  return `${name}@catch-up`
}

// `<name>@o<slot without its Z>`: as long as the slot's record (a name that fits one fits the
// other), and not a slot record (its suffix does not start with a digit), so a catch-up's scan of
// the task's slot records passes over it.
const OWED_SUFFIX = /@o(\d{8}T\d{6}(?:\.\d{3})?)$/

/**
 * The name of the record that says slot `slot` of lock `name` is owed: it was due while the task's
 * lock was held (by a run of an earlier slot, a catch-up, a holder that died) or every node missed
 * it, and it runs once the lock frees, on whichever node takes it next (docs/slots.md).
 * `<name>@o<slot>`, the slot in ISO-8601 basic format without its `Z` (it is UTC all the same),
 * e.g. `nightly-report@o20261124T020000`: as long as the slot's own record. Held for the slot
 * retention, removed once the slot ran.
 *
 * @throws LockConfigurationError for a slot that is not a valid Date.
 */
export function owedRecordName(name: string, slot: Date): string {
  const record = slotRecordName(name, slot)
  return `${name}@o${record.slice(name.length + 1, -1)}`
}

/** The lock name and slot of an owed record's name, or `undefined` when `recordName` is not one. */
export function parseOwedRecordName(recordName: string): { name: string; slot: Date } | undefined {
  const match = OWED_SUFFIX.exec(recordName)
  if (!match) return undefined
  return parseSlotRecordName(`${recordName.slice(0, match.index)}@${match[1]}Z`)
}
