import { expect } from 'vitest'
import { LOCK_AT_MOST_FOR } from './common.ts'
import { startHolder } from './holders.ts'
import type { PrivateNetwork } from './netns.ts'
import type { Row } from './results.ts'
import { type Fault, type FleetNode, holderScenario } from './scenario.ts'

/** The two holder faults: cut off the store (its namespace's link down), or frozen (SIGSTOP). */
export type HolderFault = 'isolated' | 'stopped'

/** Both faults, with the words of their rows. */
export const HOLDER_FAULTS: readonly { kind: HolderFault; fault: string }[] = [
  { kind: 'isolated', fault: 'holder isolated (keeps running on the minority side)' },
  { kind: 'stopped', fault: 'holder frozen (SIGSTOP) past lockAtMostFor' },
]

/**
 * One holder fault on a topology: a holder process (support/holder.mjs) in node `holderNode`'s
 * namespace takes the lock `name` with `job` (its store and addresses), the fault strikes while
 * its task runs, and `fleet` tries until the lock is taken again. Asserts what must hold on
 * every store: the store never hands the lock out before the holder's lockAtMostUntil, it is
 * not stuck, and the holder's task ends by LockLostError; cut off, it ends by its own
 * lockAtMostUntil (no overlap); frozen, it overlaps the next holder only until it wakes and
 * looks at its signal (under a second). Returns the row.
 */
export async function holderFaultRow(options: {
  net: PrivateNetwork
  holderNode: string
  dir: string
  topology: string
  kind: HolderFault
  job: Record<string, unknown>
  name: string
  fleet: readonly FleetNode[]
}): Promise<Row> {
  const { net, holderNode, kind, name } = options
  const fault = HOLDER_FAULTS.find((f) => f.kind === kind)!.fault
  const holder = startHolder(net, holderNode, { ...options.job, name, lockAtMostFor: LOCK_AT_MOST_FOR }, options.dir)
  const strikes: Fault =
    kind === 'isolated'
      ? { strike: async () => net.isolate(holderNode), restore: async () => {} }
      : {
          strike: async () => {
            holder.child.kill('SIGSTOP')
          },
          restore: async () => {
            holder.child.kill('SIGCONT')
          },
        }
  const { row, granted, ended } = await holderScenario(
    { topology: options.topology, option: 'off', fault },
    holder,
    options.fleet,
    strikes,
    name,
  ).finally(() => {
    net.heal(holderNode)
    holder.child.kill('SIGCONT')
    holder.child.kill('SIGKILL')
  })
  expect(row.doubleGrantsStore).toBe(0)
  expect(row.stuckAfterRecovery).toBe(0)
  expect(ended.reason).toBe('LockLostError')
  if (kind === 'isolated') {
    // Cut off, the holder's own watchdog ends its task at its lockAtMostUntil, before the next
    // holder starts: no overlap.
    expect(ended.at).toBeLessThanOrEqual(granted.until + 100)
    expect(row.doubleGrantsTasks).toBe(0)
  } else {
    // Frozen, it sees the lock lost only when it wakes: its task went on for that long after
    // the next grant (the limitation docs/guarantees.md states).
    expect(row.overlapMs).toBeLessThan(1_000)
  }
  return row
}
