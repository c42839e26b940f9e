import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from '../../../src/index.ts'
import type { LockProvider, SimpleLock } from '../../../src/core/lock-provider.ts'

/** One node of the fleet: it takes locks through a provider of its own (its own client or pool). */
export interface FleetNode {
  readonly name: string
  /** The node's provider now (a SQL node's pool follows the primary after a promotion). */
  provider(): LockProvider
}

/** What one topology does when the scenario asks for a fault. */
export interface Faults {
  /** Cuts the replica's (standby's) link to the primary, so that what the primary commits is not replicated. */
  cutReplication(): void
  /** Kills the primary (SIGKILL) and heals the replication link; a SQL topology promotes its standby, Sentinel does so by itself. */
  killPrimary(): Promise<void>
  /** After the scenario: waits for the failover and brings the killed node back as a replica (standby). */
  restore(): Promise<void>
}

/** One row of the table: a topology, its option, one fault. */
export interface Row {
  topology: string
  option: string
  fault: string
  attempts: number
  grants: number
  /** Acquisitions that failed with a LockProviderError (a store that is down, unreplicated, read-only). */
  errors: number
  /** Grants made while another node's grant had not reached its lockAtMostUntil (the tasks' view). */
  doubleGrants: number
  /** From the fault until any node got the lock again, in milliseconds. */
  unavailableMs: number | null
  /** 1 when no node could take the lock even after lockAtMostFor had passed since the fault. */
  stuckAfterRecovery: number
}

// Longer than a failover takes here (Sentinel 2-3 s, a promotion about 4 s), with room for a
// loaded machine: shorter, a lost lock could expire before the new primary serves, hiding the window.
const LOCK_AT_MOST_FOR = 10_000

/**
 * The scenario of a row: node 0 takes the lock (after `cutReplication()` when `beforeReplication`),
 * the primary is killed and the store fails over, and the other nodes try every 250 ms until
 * lockAtMostFor has passed since the fault and 3 s more. Every grant is held to its
 * lockAtMostUntil (a task that runs that long), so a grant while another is held is a double grant.
 */
export async function killPrimaryScenario(
  topology: string,
  option: string,
  nodes: readonly FleetNode[],
  faults: Faults,
  beforeReplication: boolean,
  name: string,
): Promise<Row> {
  const config = () => lockConfiguration({ name, lockAtMostFor: LOCK_AT_MOST_FOR, lockAtLeastFor: 0 })
  const held: { node: string; from: number; until: number }[] = []
  const row: Row = {
    topology,
    option,
    fault: beforeReplication ? 'primary killed, lock not replicated' : 'primary killed, lock replicated',
    attempts: 0,
    grants: 0,
    errors: 0,
    doubleGrants: 0,
    unavailableMs: null,
    stuckAfterRecovery: 0,
  }
  const attempt = async (node: FleetNode): Promise<SimpleLock | undefined> => {
    row.attempts++
    const start = Date.now()
    try {
      const lock = await node.provider().lock(config())
      if (lock) {
        const now = Date.now()
        // Measured from the request: the holder's own lockAtMostUntil is no later than that.
        if (held.some((h) => h.node !== node.name && h.until > now + 50)) row.doubleGrants++
        held.push({ node: node.name, from: now, until: start + LOCK_AT_MOST_FOR })
        row.grants++
      }
      return lock
    } catch {
      row.errors++
      return undefined
    }
  }

  if (beforeReplication) faults.cutReplication()
  // A synchronous commit waits for the cut standby: do not wait for it here, the kill ends it.
  const first = attempt(nodes[0]!)
  await Promise.race([first, sleep(1_500)])
  if (!beforeReplication) await sleep(300)
  const faultAt = Date.now()
  await faults.killPrimary()
  await first
  // The killed node comes back as a replica while the others try; the scenario ends 3 s after
  // both that and lockAtMostFor, and a lock no node could take since the recovery is stuck.
  let recoveredAt = Number.POSITIVE_INFINITY
  // A failed restore ends the loop too (and fails the row below): without it the loop waited
  // for a recovery that never came until the test's timeout, which hid the restore's error and
  // left the loop running into the next scenario.
  const restored = faults.restore().finally(() => {
    recoveredAt = Date.now()
  })
  restored.catch(() => {})
  let turn = 1
  while (Date.now() < Math.max(faultAt + LOCK_AT_MOST_FOR, recoveredAt) + 3_000) {
    const node = nodes[turn]!
    turn = turn === nodes.length - 1 ? 1 : turn + 1
    const lock = await attempt(node)
    if (lock && row.unavailableMs === null) row.unavailableMs = Date.now() - faultAt
    await sleep(250)
  }
  await restored
  // Nodes tried every 250 ms to the end, 3 s after the recovery and lockAtMostFor: unless the
  // store refuses every grant, one of them holds the lock now.
  const end = Date.now()
  if (!held.some((h) => h.until > end - 500)) row.stuckAfterRecovery = 1
  return row
}

/** Writes `rows` as JSON and as a Markdown table to test/ha/results/, and returns the table. */
export function writeResults(rows: readonly Row[], skipped: readonly string[]): string {
  const dir = new URL('../results/', import.meta.url).pathname
  mkdirSync(dir, { recursive: true })
  const header =
    '| topology | option | fault | attempts | grants | errors | double grants | no lock for (ms) | stuck after recovery |'
  const lines = [header, '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |']
  for (const r of rows) {
    lines.push(
      `| ${r.topology} | ${r.option} | ${r.fault} | ${r.attempts} | ${r.grants} | ${r.errors} | ${r.doubleGrants === 0 ? 0 : `**${r.doubleGrants}**`} | ${r.unavailableMs ?? '–'} | ${r.stuckAfterRecovery} |`,
    )
  }
  const table = lines.join('\n')
  const at = new Date().toISOString()
  writeFileSync(join(dir, 'latest.json'), `${JSON.stringify({ at, node: process.version, rows, skipped }, null, 2)}\n`)
  writeFileSync(
    join(dir, 'latest.md'),
    `Run of ${at} (${process.version}); lockAtMostFor ${LOCK_AT_MOST_FOR} ms.\n\n${table}\n`,
  )
  return table
}
