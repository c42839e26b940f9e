import type { LockProvider } from '../core/lock-provider.ts'
import type { LockingTaskExecutor, TaskResult } from '../core/locking-task-executor.ts'
import { FIVE_MINUTES } from './suite-support.ts'

/** How the `slots` group registers a case (the suite's own `add`). */
export type AddSlotCase = (
  group: 'slots',
  what: string,
  timeoutMs: number,
  run: () => Promise<void>,
  skip?: string,
) => void

/** What the `slots` group's cases share: how to add one, the nodes, why cases are skipped, timings (ms). */
export interface SlotSuiteContext {
  readonly add: AddSlotCase
  /** A new provider instance: another node. */
  node(): Promise<LockProvider>
  /** Two executors, each over a new node. */
  executors(): Promise<readonly [LockingTaskExecutor, LockingTaskExecutor]>
  /** Why every case is skipped: no `slots` option given. */
  readonly noSlots: string | undefined
  /** Why the cases that read slot records are skipped: no slots, or no inspector. */
  readonly noInspector: string | undefined
  /** Why the paired acquisition's cases are skipped: no slots, or none declared. */
  readonly noPair: string | undefined
  /** The shortest lockAtMostFor the cases use. */
  readonly short: number
  /** The store's expiry lag. */
  readonly lag: number
}

/** A request for the run of `slot` of the task `name`, holding its lock for five minutes at most. */
export function slotRequest(
  name: string,
  slot: Date,
): { name: string; lockAtMostFor: number; lockAtLeastFor: number; slot: Date } {
  return { name, lockAtMostFor: FIVE_MINUTES, lockAtLeastFor: 0, slot }
}

/**
 * `count` slots a second apart, the first a minute ago. Whole seconds, in the past: slots are
 * scheduled fire times, and a catch-up looks back.
 */
export function slotsFrom(count: number): Date[] {
  const base = Math.floor(Date.now() / 1000) * 1000 - 60_000
  return Array.from({ length: count }, (_, k) => new Date(base + k * 1000))
}

/** The names of `records`, in their order. */
export function recordNames(records: readonly { name: string }[]): string[] {
  return records.map((r) => r.name)
}

/**
 * A slot run of `name` on `executor` that holds the task's lock until `finish()`: resolves once
 * its task has started. `run` settles with the run's outcome after `finish()`.
 */
export async function holdingRun(
  executor: LockingTaskExecutor,
  name: string,
  slot: Date,
): Promise<{ finish: () => void; run: Promise<TaskResult<void>> }> {
  let finish!: () => void
  let started!: () => void
  const running = new Promise<void>((resolve) => (started = resolve))
  const run = executor.executeWithLock(
    async () => {
      started()
      await new Promise<void>((resolve) => (finish = resolve))
    },
    slotRequest(name, slot),
  )
  await running
  return { finish, run }
}
