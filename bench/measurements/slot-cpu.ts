import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { slotRecordName } from '../../src/core/slots.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import { inMemoryLockProvider, inMemoryRunLedger } from '../../src/providers/in-memory/index.ts'
import type { LibraryCpuRow } from '../result.ts'
import { median } from '../stats.ts'
import { cpuPerOp } from './library-cpu.ts'

const JOBS = 200
const NODES = 2

/**
 * The library's CPU per slot run of a fleet's tick, with no I/O: two nodes (executors with run
 * ledgers over one in-memory provider) each fire the same 200 `withLock(…, { slot })` functions
 * in one turn, so that one wins each job's slot and the other is refused, against the same store
 * calls by hand (the slot's record, the task's lock, its release and the ledger's record for the
 * winner; the refused record for the other). Per fire: the median over `rounds` runs of `ticks`
 * ticks, sides alternating.
 */
export async function measureSlotTickCpu(ticks: number, rounds: number): Promise<LibraryCpuRow> {
  const ours = oursTick()
  const bare = bareTick()
  const o: number[] = []
  const b: number[] = []
  for (let round = 0; round < rounds; round++) {
    // Alternating; each measurement after an untimed run of its own (cpuPerOp).
    const first = round % 2 === 0 ? ours : bare
    const second = first === ours ? bare : ours
    ;(first === ours ? o : b).push(await cpuPerFire(first, ticks))
    ;(second === ours ? o : b).push(await cpuPerFire(second, ticks))
  }
  const oursUs = median(o)
  const baselineUs = median(b)
  return {
    what: `a slot run of a tick (withLock slot, ${NODES} executors × ${JOBS} jobs with run ledgers, in memory)`,
    baseline: "the same store calls by hand: the slot's record, the task's lock, its release, the ledger's record",
    ops: ticks * JOBS * NODES,
    rounds,
    oursCpuPerOpUs: oursUs,
    baselineCpuPerOpUs: baselineUs,
    addedCpuUs: oursUs - baselineUs,
  }
}

type Tick = (slot: Date) => Promise<void>

// Every tick a slot of its own, one second after the last, far from any other run's.
let nextSlot = Date.UTC(2030, 0, 1)

// CPU per fire of one round of `ticks` ticks, each on a slot of its own.
async function cpuPerFire(tick: Tick, ticks: number): Promise<number> {
  const [perTick] = await cpuPerOp(
    () => {
      nextSlot += 1000
      return tick(new Date(nextSlot))
    },
    ticks,
    1,
  )
  return perTick! / (JOBS * NODES)
}

function oursTick(): Tick {
  const provider = inMemoryLockProvider()
  let current = new Date(0)
  const nodes = Array.from({ length: NODES }, () => {
    const executor = createLockingTaskExecutor(provider, { runLedger: inMemoryRunLedger({ keep: 2 }) })
    return Array.from({ length: JOBS }, (_, j) =>
      withLock(executor, { name: `slot-cpu-${j}`, lockAtMostFor: 30_000, slot: () => current }, () => j),
    )
  })
  let ran = 0
  return async (slot) => {
    current = slot
    const calls: Promise<number | undefined>[] = []
    for (const jobs of nodes) for (const job of jobs) calls.push(job())
    for (const result of await Promise.all(calls)) if (result !== undefined) ran++
    if (ran % JOBS !== 0) throw new Error(`slot runs: ${ran} runs after a tick, not a multiple of ${JOBS}`)
  }
}

function bareTick(): Tick {
  const provider = inMemoryLockProvider()
  const ledgers = Array.from({ length: NODES }, () => inMemoryRunLedger({ keep: 2 }))
  const fire = async (j: number, slot: Date, node: number): Promise<void> => {
    const name = `bare-slot-cpu-${j}`
    const ledger = ledgers[node]!
    const now = Date.now()
    const claim = await provider.lock(
      lockConfiguration({ name: slotRecordName(name, slot), lockAtMostFor: 86_400_000, createdAt: new Date(now) }),
    )
    if (!claim) return
    const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: 30_000, createdAt: new Date(now) }))
    if (!lock) throw new Error(`lock "${name}" was held after its release`)
    const startedAt = new Date()
    await lock.unlock()
    const at = new Date()
    await ledger.record({ name, slot, node: String(node), startedAt, finishedAt: at, outcome: 'ok', durationMs: 0 })
  }
  return async (slot) => {
    const calls: Promise<void>[] = []
    for (let node = 0; node < NODES; node++) for (let j = 0; j < JOBS; j++) calls.push(fire(j, slot, node))
    await Promise.all(calls)
  }
}
