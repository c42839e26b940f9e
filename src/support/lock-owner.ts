import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'

let host: string | undefined

/** The default `lockedBy` prefix: this machine's host name (read once: it is a system call). */
export function defaultLockedBy(): string {
  if (host === undefined) {
    try {
      host = hostname() || 'unknown'
    } catch {
      host = 'unknown'
    }
  }
  return host
}

// The suffix is a 48-bit count in hex, started at a random value when the process (or worker
// thread) first takes a lock: unique within the process for 2^48 acquisitions, and as unlikely to
// meet another process's as a random value per acquisition was, without drawing random bytes
// and formatting them for each one (that showed in the CPU per lock). Guessing the next owner
// gains nothing: a client that can read a lock's value can also overwrite it. Measured against
// randomBytes(6) per owner (bench overhead, 3 processes, 2026-11-27): at 16 callers p50 ratio
// 1.05 against 1.20 on Redis, 0.99 against 1.16 on memcached; CPU ratio 1.03 against 1.22.
const HEX = Array.from({ length: 256 }, (_, byte) => (byte + 256).toString(16).slice(1))
let high = -1 // upper 24 bits
let low = 0 // lower 24 bits
let headPrefix: string | undefined
// All of the owner but its last two hex digits, for `headPrefix` and the current `low >>> 8`:
// one concatenation per owner instead of three (each showed in the CPU per lock).
let head = ''
let headLow = -1

/**
 * The identity stored with one acquisition: `<prefix>:<pid>:<12 hex digits>`. It starts with
 * the host name (or the configured prefix) so operators can read it, and is unique per
 * acquisition so that two processes on one host, or a stale and a fresh holder in one process,
 * never release or extend each other's lock (Java ShedLock stores the bare host name, its issue
 * #317).
 */
export function lockOwner(prefix: string = defaultLockedBy()): string {
  if (high < 0) {
    const start = randomBytes(6)
    high = start.readUIntBE(0, 3)
    low = start.readUIntBE(3, 3)
    headPrefix = undefined
  } else if (++low === 0x1000000) {
    low = 0
    high = (high + 1) & 0xffffff
    headPrefix = undefined
  }
  if (prefix !== headPrefix || low >>> 8 !== headLow) {
    // 255 is the locked_by column width in ShedLock's DDL; the suffix takes at most 31 characters.
    head = `${prefix.slice(0, 200)}:${process.pid}:${HEX[high >>> 16]}${HEX[(high >>> 8) & 255]}${HEX[high & 255]}${HEX[low >>> 16]}${HEX[(low >>> 8) & 255]}`
    headPrefix = prefix
    headLow = low >>> 8
  }
  return head + HEX[low & 255]!
}
