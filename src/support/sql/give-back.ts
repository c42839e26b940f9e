import type { Clock } from '../../core/clock.ts'
import { type LockConfiguration, lockConfiguration } from '../../core/lock-configuration.ts'
import { withTimeout } from '../with-timeout.ts'
import type { SqlAccessor } from './sql-accessor.ts'

// Giving back acquisitions nobody will run under: one that landed after its timeout, one whose
// reply was lost. Each release is owner-checked and touches no other acquisition's row.

/**
 * When an acquisition whose reply was lost (or did not come within the provider's timeout) is
 * given back, in milliseconds after the loss: an owner-checked release, each on whatever
 * connection the pool hands out (the lost one is gone), so that a statement that still commits
 * on the server, or committed before its reply was lost, does not keep the lock until
 * `lockAtMostFor`. An `UPDATE` that meets the acquire's row still being written waits for that
 * commit and then frees it; a row inserted later than the last attempt (past 31.5 s) stays
 * held. Each attempt touches only this acquisition's row (its `locked_by` is unique), so a lock
 * taken meanwhile by another node is never freed.
 */
export const GIVE_BACK_DELAYS_MS: readonly number[] = [0, 500, 1000, 2000, 4000, 8000, 16000]

/**
 * Calls `giveBack` at each of {@link GIVE_BACK_DELAYS_MS} (counted from now, added up), the ones
 * before `acquired`'s `lockAtMostUntil` on `clock`: after that the lock is free anyway. The timers
 * are unref'd, so that they never keep a process (the CLI's, say) alive after its work is done.
 */
export function giveBackOnSchedule(acquired: LockConfiguration, clock: Clock, giveBack: () => void): void {
  const until = acquired.lockAtMostUntil.getTime()
  let waited = 0
  for (const delay of GIVE_BACK_DELAYS_MS) {
    waited += delay
    if (clock.now() + waited >= until) return
    setTimeout(giveBack, waited).unref?.()
  }
}

/**
 * Frees the row of `acquired` now, whatever its `lockAtLeastFor`, if `owner` still holds it (the
 * release is owner-checked, so another acquisition's row is untouched): an acquisition nobody
 * will run under.
 */
export function unlockNow(
  accessor: Pick<SqlAccessor, 'unlock'>,
  acquired: LockConfiguration,
  owner: string,
): Promise<void> {
  const now = lockConfiguration({ name: acquired.name, lockAtMostFor: acquired.lockAtMostFor })
  return accessor.unlock(now, owner, acquired)
}

/** How one SQL provider gives back the acquisitions nobody will run under. Neither call waits or throws. */
export interface GiveBack {
  /**
   * An acquisition that landed after the provider's timeout: freed now (within the same timeout,
   * failures ignored) rather than blocking the name until `lockAtMostFor`. `acquired` `false`: nothing to free.
   */
  readonly late: (configuration: LockConfiguration, owner: string, acquired: boolean | bigint) => void
  /**
   * An acquisition whose reply was lost: it may have committed, or may still commit, so it is
   * given back on the schedule of {@link GIVE_BACK_DELAYS_MS}, never past its `lockAtMostUntil`
   * (then it is free anyway).
   */
  readonly lost: (configuration: LockConfiguration, owner: string) => void
}

/** The {@link GiveBack} of a provider of the store `store` over `accessor`, each release bounded by `timeoutMs`. */
export function sqlGiveBack(accessor: SqlAccessor, store: string, timeoutMs: number, clock: Clock): GiveBack {
  const late: GiveBack['late'] = (configuration, owner, acquired) => {
    if (acquired === false) return
    withTimeout(unlockNow(accessor, configuration, owner), timeoutMs, { store }).catch(() => {})
  }
  return {
    late,
    lost: (configuration, owner) => giveBackOnSchedule(configuration, clock, () => late(configuration, owner, true)),
  }
}
