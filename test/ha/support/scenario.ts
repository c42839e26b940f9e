import { setTimeout as sleep } from 'node:timers/promises'
import type { LockProvider, SimpleLock } from '../../../src/core/lock-provider.ts'
import { createLockingTaskExecutor, lockConfiguration } from '../../../src/index.ts'
import { LOCK_AT_MOST_FOR } from './common.ts'
import { newRow, type Row } from './results.ts'

/** One node of the fleet: it takes locks through a provider of its own (its own client or pool). */
export interface FleetNode {
  readonly name: string
  /** The node's provider now (a SQL node's pool follows the primary after a promotion). */
  provider(): LockProvider
}

/** What a topology does for one fault of a scenario. */
export interface Fault {
  /** Before node 0 takes the lock: e.g. cuts the replica's link, so that the lock is not replicated. */
  prepare?(): void
  /** The fault, while node 0 holds the lock (or waits for it): crash the primary, isolate the leader. */
  strike(): Promise<void>
  /** Brings the topology back to the state a scenario starts from (failed over, the failed node back). */
  restore(): Promise<void>
}

/** A grant: who, from when (the reply), and its lockAtMostUntil (from the request: the earliest the store may free it). */
interface Grant {
  node: string
  from: number
  until: number
}

/**
 * Counts what the fleet's lock() calls got. Every grant is held to its lockAtMostUntil (a task
 * that runs that long), so a grant while another's has not reached its lockAtMostUntil is a
 * double grant, in the store's view and in the tasks' alike.
 */
class Tally {
  readonly grants: Grant[] = []
  // What the fleet holds, released before the stuck check (support/scenario.ts, checkStuck).
  readonly #handles: SimpleLock[] = []
  readonly row: Row
  readonly name: string
  constructor(row: Row, name: string) {
    this.row = row
    this.name = name
  }

  async attempt(node: FleetNode): Promise<SimpleLock | undefined> {
    this.row.attempts++
    const start = Date.now()
    try {
      const lock = await node
        .provider()
        .lock(lockConfiguration({ name: this.name, lockAtMostFor: LOCK_AT_MOST_FOR, lockAtLeastFor: 0 }))
      if (lock) {
        this.#handles.push(lock)
        this.granted({ node: node.name, from: Date.now(), until: start + LOCK_AT_MOST_FOR })
      }
      if (process.env.SHEDLOCK_HA_DEBUG)
        console.log(this.name, node.name, start, Date.now() - start, lock ? 'granted' : 'held')
      return lock
    } catch (error) {
      if (process.env.SHEDLOCK_HA_DEBUG) console.log(this.name, node.name, start, Date.now() - start, String(error))
      this.row.errors++
      return undefined
    }
  }

  granted(grant: Grant): void {
    // 50 ms: the other grant's request and reply bound when the store wrote it.
    if (this.grants.some((h) => h.node !== grant.node && h.until > grant.from + 50)) {
      this.row.doubleGrantsStore++
      this.row.doubleGrantsTasks++
    }
    this.grants.push(grant)
    this.row.grants++
  }

  /** From when the lock was free to take (the fault, or the end of a grant made before it) to the next grant. */
  measureNoLock(faultAt: number, first: Grant | undefined): void {
    const before = this.grants.filter((g) => g !== first && g.from < faultAt)
    if (first) before.push(first)
    const freeFrom = Math.max(faultAt, ...before.map((g) => g.until))
    const next = this.grants.find((g) => !before.includes(g) && g.from >= faultAt)
    this.row.noLockMs = next ? Math.max(0, next.from - freeFrom) : null
  }

  /**
   * After the recovery, the fleet gives back what it holds (a handle lost in the failover may
   * fail to) and a node must then get the lock within 5 s of the last grant's lockAtMostUntil:
   * otherwise the lock is stuck (or the store refuses every grant). Judging from the last
   * attempts of the loop instead counted a grant that expired just before the loop ended.
   */
  async checkStuck(nodes: readonly FleetNode[]): Promise<void> {
    await Promise.all(this.#handles.map((h) => h.unlock().catch(() => {})))
    const deadline = Math.max(Date.now(), ...this.grants.map((g) => g.until)) + 5_000
    const probe = new Tally(newRow('', '', ''), this.name)
    for (let turn = 0; Date.now() < deadline; turn++) {
      const lock = await probe.attempt(nodes[turn % nodes.length]!)
      if (lock) {
        await lock.unlock().catch(() => {})
        return
      }
      await sleep(250)
    }
    this.row.stuckAfterRecovery = 1
  }
}

/**
 * The failover scenario of a row: node 0 takes the lock (after `fault.prepare()`, when given),
 * the fault strikes, and the other nodes try every 250 ms while the topology is restored, until
 * lockAtMostFor has passed since the fault and 3 s after the restore.
 */
export async function failoverScenario(
  meta: { topology: string; option: string; fault: string },
  nodes: readonly FleetNode[],
  fault: Fault,
  name: string,
): Promise<Row> {
  const row = newRow(meta.topology, meta.option, meta.fault)
  const tally = new Tally(row, name)
  fault.prepare?.()
  // A synchronous commit waits for the cut standby: do not wait for it here, the fault ends it.
  const first = tally.attempt(nodes[0]!)
  await Promise.race([first, sleep(1_500)])
  // Time for a replica on a healthy link to receive the lock.
  if (!fault.prepare) await sleep(300)
  const faultAt = Date.now()
  if (process.env.SHEDLOCK_HA_DEBUG) console.log(name, 'fault', faultAt)
  await fault.strike()
  await first
  const firstGrant = tally.grants.find((g) => g.node === nodes[0]!.name)
  let recoveredAt = Number.POSITIVE_INFINITY
  // A failed restore ends the loop too (and fails the row below): without it the loop waited
  // for a recovery that never came until the test's timeout, which hid the restore's error and
  // left the loop running into the next scenario.
  const restored = fault.restore().finally(() => {
    recoveredAt = Date.now()
  })
  restored.catch(() => {})
  let turn = 1
  while (Date.now() < Math.max(faultAt + LOCK_AT_MOST_FOR, recoveredAt) + 3_000) {
    const node = nodes[turn]!
    turn = turn === nodes.length - 1 ? 1 : turn + 1
    await tally.attempt(node)
    await sleep(250)
  }
  await restored
  tally.measureNoLock(faultAt, firstGrant)
  await tally.checkStuck(nodes)
  return row
}

/** What a holder process (support/holder.mjs) reports on its stdout, one JSON line each. */
export interface HolderReport {
  /** The task started: `at` (epoch ms), and its lock's lockAtMostUntil. */
  granted?: { at: number; until: number }
  /** The task ended: `at`, and the name of the signal's reason (LockLostError when its lock expired). */
  ended?: { at: number; reason: string }
  /** executeWithLock() did not run the task, or failed. */
  skipped?: string
  error?: string
}

/** A holder process in a namespace of its own, started by the test; see holder.mjs. */
export interface Holder {
  /** Resolves to the next report with `key` (rejects after `ms`). */
  next(key: keyof HolderReport, ms: number): Promise<HolderReport>
}

/**
 * A holder fault: a holder process takes the lock and runs a task that lasts until its signal
 * aborts; then `fault.strike()` cuts the holder off the store (its namespace's link down) or
 * freezes it (SIGSTOP), and the fleet tries every 250 ms until the lock is taken again and the
 * holder's task has ended. `overlapMs` is how long the holder's task ran after that next grant
 * (negative: it ended first); a task that ran on past the next grant is a double grant in the
 * tasks' view, a next grant before the holder's lockAtMostUntil one in the store's.
 */
export async function holderScenario(
  meta: { topology: string; option: string; fault: string },
  holder: Holder,
  nodes: readonly FleetNode[],
  fault: Fault,
  name: string,
): Promise<{ row: Row; granted: { at: number; until: number }; ended: { at: number; reason: string } }> {
  const row = newRow(meta.topology, meta.option, meta.fault)
  const tally = new Tally(row, name)
  const report = await holder.next('granted', 20_000)
  const granted = report.granted!
  row.attempts++
  row.grants++
  const ended = holder.next('ended', LOCK_AT_MOST_FOR * 3)
  ended.catch(() => {})
  await sleep(300)
  const faultAt = Date.now()
  await fault.strike()
  let next: Grant | undefined
  let turn = 0
  while (Date.now() < granted.until + LOCK_AT_MOST_FOR) {
    const before = tally.grants.length
    await tally.attempt(nodes[turn]!)
    turn = (turn + 1) % nodes.length
    if (tally.grants.length > before && !next) next = tally.grants.at(-1)
    if (next) break
    await sleep(250)
  }
  await fault.restore()
  const end = (await ended).ended!
  if (next) {
    if (next.from < granted.until - 50) row.doubleGrantsStore++
    row.overlapMs = end.at - next.from
    if (row.overlapMs > 0) row.doubleGrantsTasks++
    row.noLockMs = Math.max(0, next.from - Math.max(faultAt, granted.until))
  } else row.stuckAfterRecovery = 1
  return { row, granted, ended: end }
}

/**
 * The slot scenario: three nodes fire one slot a second for `slots` seconds, node a on time, b
 * 2 s late and c 7 s late (timers that drift apart, a node that was busy); `fault` is prepared
 * before the first slot and strikes at the middle one, so that c fires the slots before it
 * after the store failed over. A slot run twice is a duplicate; a slot fired on every node that
 * ran nowhere, never run.
 */
export async function slotScenario(
  meta: { topology: string; option: string; fault: string },
  nodes: readonly FleetNode[],
  fault: Fault,
  name: string,
  slots = 8,
): Promise<Row> {
  const row = newRow(meta.topology, meta.option, meta.fault)
  const runs = new Map<number, string[]>()
  const first = Math.ceil(Date.now() / 1000) * 1000 + 1000
  const lateness = [0, 2_000, 7_000]
  fault.prepare?.()
  const fire = async (i: number, slot: number): Promise<void> => {
    const node = nodes[i]!
    await sleep(Math.max(0, slot + lateness[i]! - Date.now()))
    row.attempts++
    try {
      // A fresh executor for a node whose provider changed (a SQL pool that follows the primary).
      const executor = createLockingTaskExecutor(node.provider())
      await executor.executeWithLock(
        // Counted by the slot the run is for (taskContext's): an owed slot can be run by the
        // drain of another call's waiter, with that call's task (the same task, its own slot).
        (context) => {
          const ran = context.slot?.getTime() ?? slot
          runs.set(ran, [...(runs.get(ran) ?? []), node.name])
          row.grants++
        },
        { name, lockAtMostFor: LOCK_AT_MOST_FOR, lockAtLeastFor: 0 },
        { slot: new Date(slot) },
      )
    } catch {
      row.errors++
    }
  }
  const fires: Promise<void>[] = []
  for (let k = 0; k < slots; k++) for (let i = 0; i < nodes.length; i++) fires.push(fire(i, first + k * 1000))
  await sleep(Math.max(0, first + Math.floor(slots / 2) * 1000 - Date.now()))
  await fault.strike()
  const restored = fault.restore()
  await Promise.all(fires)
  await restored
  let duplicates = 0
  let never = 0
  for (let k = 0; k < slots; k++) {
    const ran = runs.get(first + k * 1000)?.length ?? 0
    if (ran > 1) duplicates++
    if (ran === 0) never++
  }
  row.duplicateSlotRuns = duplicates
  row.slotsNeverRun = never
  // Two runs of one slot are a double grant of the slot's record in both views.
  row.doubleGrantsStore = duplicates
  row.doubleGrantsTasks = duplicates
  return row
}
