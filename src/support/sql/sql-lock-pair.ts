import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { LockPair, PairedLocks } from '../../core/lock-provider.ts'
import { timedStoreCall } from '../with-timeout.ts'
import { type GiveBack, unlockNow } from './give-back.ts'
import type { SqlAccessor } from './sql-accessor.ts'
import type { AcquireParts } from './sql-acquire.ts'

// The paired acquisition of a SQL provider (a slot's record and its task's lock, see `LockPair`):
// one statement where the dialect has `acquirePair`, else two, one after the other.

/** The `LockPair` of a SQL provider whose accessor has `acquirePair`. */
export function sqlLockPair(parts: AcquireParts): LockPair {
  const { accessor, call, checks, giveBack, handleOf, newOwner } = parts
  return async (first, second): Promise<PairedLocks> => {
    // As lock(): a promise only while the table's limits are unread.
    const reading = checks.beforeAcquire(first) ?? checks.beforeAcquire(second)
    if (reading) {
      await reading
      await checks.beforeAcquire(second)
    }
    const steps = new AcquirePair(accessor, giveBack, [first, newOwner()], [second, newOwner()])
    const [one, two] = (await timedStoreCall(call, 'acquire', first.name, steps)) as readonly [
      boolean | bigint,
      boolean | bigint,
    ]
    if (one === false) return [undefined, undefined]
    return [
      handleOf(first, steps.firstOwner, one),
      two === false ? undefined : handleOf(second, steps.secondOwner, two, true),
    ]
  }
}

/**
 * `first`, then `second` only if `first` was taken: two statements, for a paired acquire whose one
 * statement could not run (a concurrency failure rolled it back). A failure of the second gives
 * the first back (owner-checked), so that a claim is never kept for a task that did not start.
 */
export async function acquireOneAfterOther(
  accessor: Pick<SqlAccessor, 'acquire' | 'unlock'>,
  first: LockConfiguration,
  firstOwner: string,
  second: LockConfiguration,
  secondOwner: string,
): Promise<readonly [boolean | bigint, boolean | bigint]> {
  const one = await accessor.acquire(first, firstOwner)
  if (one === false) return [false, false]
  try {
    return [one, await accessor.acquire(second, secondOwner)]
  } catch (error) {
    await unlockNow(accessor, first, firstOwner).catch(() => {})
    throw error
  }
}

// The steps of one timed paired acquire: a pair that lands late, or whose reply was lost, is
// given back, both of it.
class AcquirePair {
  readonly accessor: SqlAccessor
  readonly giveBack: GiveBack
  readonly first: LockConfiguration
  readonly firstOwner: string
  readonly second: LockConfiguration
  readonly secondOwner: string
  constructor(
    accessor: SqlAccessor,
    giveBack: GiveBack,
    [first, firstOwner]: readonly [LockConfiguration, string],
    [second, secondOwner]: readonly [LockConfiguration, string],
  ) {
    this.accessor = accessor
    this.giveBack = giveBack
    this.first = first
    this.firstOwner = firstOwner
    this.second = second
    this.secondOwner = secondOwner
  }
  start(): Promise<readonly [boolean | bigint, boolean | bigint]> {
    return this.accessor.acquirePair!(this.first, this.firstOwner, this.second, this.secondOwner)
  }
  late([one, two]: readonly [boolean | bigint, boolean | bigint]): void {
    this.giveBack.late(this.first, this.firstOwner, one)
    this.giveBack.late(this.second, this.secondOwner, two)
  }
  onTimeout(): void {
    if (this.accessor.replyLost) this.lost()
  }
  recover(error: unknown): undefined {
    if (this.accessor.replyLost?.(error) === true) this.lost()
    return undefined
  }
  lost(): void {
    this.giveBack.lost(this.first, this.firstOwner)
    this.giveBack.lost(this.second, this.secondOwner)
  }
}
