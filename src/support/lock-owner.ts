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

// Random bytes are drawn 1.5 KiB at a time: a randomBytes() call per acquisition cost as much CPU
// as the rest of the provider's work for it (profiled with npm run bench).
const POOL_BYTES = 6 * 256
let pool = Buffer.alloc(0)
let offset = 0

function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES)
    offset = 0
  }
  const hex = pool.toString('hex', offset, offset + bytes)
  offset += bytes
  return hex
}

/**
 * The identity stored with one acquisition: `<prefix>:<pid>:<random>`. It starts with the host
 * name (or the configured prefix) so operators can read it, and is unique per acquisition so that
 * two processes on one host, or a stale and a fresh holder in one process, never release or
 * extend each other's lock (Java ShedLock stores the bare host name, its issue #317).
 */
export function lockOwner(prefix: string = defaultLockedBy()): string {
  // 255 is the locked_by column width in ShedLock's DDL; the suffix takes at most 31 characters.
  return `${prefix.slice(0, 200)}:${process.pid}:${randomHex(6)}`
}
