import type { Clock } from '../../core/clock.ts'
import { defineLock } from '../../core/define-lock.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLock } from '../../core/lock-provider.ts'
import { type TimedStoreCall, timedStoreCall } from '../with-timeout.ts'
import type { SqlAccessor } from './sql-accessor.ts'
import type { TableLimitChecks } from './sql-table-limits.ts'

// The handle of an acquisition the acquire statement made: its release and its extension, each
// one timed statement, owner-checked by the acquisition's own `locked_by`.

/**
 * The handle of the acquisition of `configuration` by `owner`; `acquired` is what the acquire
 * statement resolved to (a bigint: the fencing token). `batched`: released with the turn's other
 * releases, where the accessor can (a paired task lock).
 */
export type HandleOf = (
  configuration: LockConfiguration,
  owner: string,
  acquired: true | bigint,
  batched?: boolean,
) => ExtensibleLock

/** The {@link HandleOf} of a provider over `accessor`, its statements run through `call`. */
export function sqlLockHandles(
  accessor: SqlAccessor,
  clock: Clock,
  call: TimedStoreCall<unknown>,
  checks: TableLimitChecks,
): HandleOf {
  return (configuration, owner, acquired, batched = false) =>
    defineLock(configuration, {
      clock,
      lockedBy: owner,
      ...(typeof acquired === 'bigint' ? { fencingToken: acquired } : {}),
      unlock: (current) =>
        timedStoreCall(call, 'release', current.name, () =>
          batched && accessor.unlockInBatch
            ? accessor.unlockInBatch(current, owner, configuration)
            : accessor.unlock(current, owner, configuration),
        ) as Promise<void>,
      extend: async (next) => {
        // A lock was acquired, so the limits are known; a name past them rejects.
        checks.beforeExtend(next)
        return timedStoreCall(call, 'extend', next.name, () =>
          accessor.extend(next, owner, configuration),
        ) as Promise<boolean>
      },
    })
}
