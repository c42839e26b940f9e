/** What a value `ADDED:<ISO time>@<owner>` says; fields are `undefined` when the value has another shape. */
export interface AddedValue {
  /** Epoch milliseconds of the ISO time: when the holder took the lock, on its own clock. */
  readonly lockedAt: number | undefined
  readonly lockedBy: string | undefined
}

const ADDED = /^ADDED:([^@]*)@([\s\S]*)$/

/**
 * Reads the value the Redis, etcd and memcached providers (and Java ShedLock) store with each
 * lock: `ADDED:<ISO-8601 time>@<owner>`, where the owner is `<host>:<pid>:<random>` from shedlock
 * and `<host>` or `<host>:<uuid>` from Java.
 */
export function parseAddedValue(value: string): AddedValue {
  const match = ADDED.exec(value)
  if (!match) return { lockedAt: undefined, lockedBy: undefined }
  const time = Date.parse(match[1]!)
  return { lockedAt: Number.isNaN(time) ? undefined : time, lockedBy: match[2] === '' ? undefined : match[2] }
}
