import { execFileSync, spawnSync } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * `SHEDLOCK_HA_FULL=1`: every option with every fault (the long matrix, about twice the default
 * run). Without it, the rows that mean the most: each store's lock lost or kept by its weakest
 * and its safe setting, and one of each kind of fault.
 */
export const fullMatrix = process.env.SHEDLOCK_HA_FULL === '1'

// Longer than a failover takes here (Sentinel 2-3 s, a promotion about 4 s, a quorum's election
// up to 8 s), with room for a loaded machine: shorter, a lost lock could expire before the new
// primary serves, hiding the window.
export const LOCK_AT_MOST_FOR = 10_000

/** Polls `check` every 100 ms until it holds; throws, naming `what`, after `ms`. Each check is bounded to 5 s. */
export async function until(
  check: () => boolean | Promise<boolean>,
  ms: number,
  what: string | (() => string),
): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    // A probe stuck on a dead peer's connection must not outlast the deadline unnoticed.
    const left = Math.max(deadline - Date.now(), 100)
    if (
      await Promise.race([Promise.resolve(check()).catch(() => false), sleep(Math.min(left, 5_000)).then(() => false)])
    )
      return
    if (Date.now() > deadline)
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'string' ? what : what()}`)
    await sleep(100)
  }
}

/** The uid and gid of a system user (the servers that refuse to run as root run as theirs). */
export function ids(user: string): [number, number] {
  const line = execFileSync('getent', ['passwd', user], { encoding: 'utf8' }).trim()
  const [, , uid, gid] = line.split(':')
  return [Number(uid), Number(gid)]
}

/** Whether `command args` runs and exits 0 (a server's binary is installed). */
export function runs(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0
}
