import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import type { RunLedger } from '../../src/core/run-ledger.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import type { CallCounter } from '../counting.ts'
import type { CallCount, RoundTripRow } from '../result.ts'
import { TriggerPoller } from '../../src/core/trigger-poller.ts'
import { DEFAULT_PRUNE_DELAY_MS } from '../../src/support/run-pruner.ts'
import type { RawOperations, StoreSetup } from '../setups/setup.ts'

/** What one side (ours or the baseline) has to do, reduced to acquire-or-undefined and release. */
interface Side {
  acquire(name: string): Promise<{ release(): Promise<void> } | undefined>
}

function countOf(samples: number[], methods: Record<string, number>): CallCount {
  return { mean: samples.reduce((a, b) => a + b, 0) / samples.length, max: Math.max(...samples), methods }
}

async function countSide(
  side: Side,
  counter: CallCounter,
  names: (i: number) => string,
  samples: number,
): Promise<RoundTripRow['ours']> {
  const acquire: number[] = []
  const release: number[] = []
  const losing: number[] = []
  const methods = { acquire: {}, release: {}, losingAcquire: {} } as Record<
    'acquire' | 'release' | 'losingAcquire',
    Record<string, number>
  >
  // One untimed pass first: a script cache (Redis EVALSHA) or a lazily created parent node (ZooKeeper) is a one-time cost.
  const warm = await side.acquire(names(-1))
  await warm?.release()
  for (let i = 0; i < samples; i++) {
    counter.reset()
    const lock = await side.acquire(names(i))
    if (!lock) throw new Error(`uncontended lock "${names(i)}" was not acquired`)
    acquire.push(counter.total)
    methods.acquire = { ...counter.byMethod }
    counter.reset()
    const second = await side.acquire(names(i))
    if (second) throw new Error(`a second acquisition of "${names(i)}" succeeded while it was held`)
    losing.push(counter.total)
    methods.losingAcquire = { ...counter.byMethod }
    counter.reset()
    await lock.release()
    release.push(counter.total)
    methods.release = { ...counter.byMethod }
  }
  return {
    acquire: countOf(acquire, methods.acquire),
    release: countOf(release, methods.release),
    losingAcquire: countOf(losing, methods.losingAcquire),
  }
}

/**
 * Round trips: store calls per acquire, per release and per losing acquire (the name held by
 * another acquisition), counted by a proxy around the client, for ours and for the baseline.
 */
export async function measureRoundTrips(setup: StoreSetup, runId: string, samples: number): Promise<RoundTripRow> {
  const { provider, raw, counter, runLedger } = setup.counted()
  const ours: Side = {
    async acquire(name) {
      const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: 60_000 }))
      return lock && { release: () => lock.unlock() }
    },
  }
  const baseline: Side = raw satisfies RawOperations
  return {
    store: setup.name,
    samples,
    ours: await countSide(ours, counter, (i) => `${runId}-rt-o${i}`, samples),
    baseline: await countSide(baseline, counter, (i) => `${runId}-rt-b${i}`, samples),
    ...(runLedger ? { slotRun: await countSlotRuns(provider, runLedger, counter, `${runId}-rt-slot`, samples) } : {}),
    ...(provider.inspector
      ? { triggerPoll: await countTriggerPoll(provider, counter, `${runId}-rt-trig`, samples) }
      : {}),
  }
}

// The tasks of a replica whose executor polls for triggers, as docs/usage.md states its cost for.
const POLLED_TASKS = 20

/**
 * One poll for triggers, as an executor with `triggers: { poll }` does it every poll, over
 * {@link POLLED_TASKS} tasks it ran, none triggered (the common case): store calls and process CPU.
 */
async function countTriggerPoll(provider: LockProvider, counter: CallCounter, prefix: string, samples: number) {
  const names = Array.from({ length: POLLED_TASKS }, (_, k) => `${prefix}-${k}`)
  const inspector = provider.inspector!()
  // An hour apart: the timer never fires during the measurement; poll() is called by hand.
  const poller = new TriggerPoller(
    3_600_000,
    () => inspector,
    () => {
      throw new Error('no trigger was taken, yet the poll found one')
    },
  )
  for (const name of names) poller.remember(() => undefined, lockConfiguration({ name, lockAtMostFor: 60_000 }))
  await poller.poll() // untimed: a first read may prepare statements
  const calls: number[] = []
  let methods: Record<string, number> = {}
  const cpu = process.cpuUsage()
  for (let i = 0; i < samples; i++) {
    counter.reset()
    if ((await poller.poll()) !== 0) throw new Error('a poll found a trigger that nobody took')
    calls.push(counter.total)
    methods = { ...counter.byMethod }
  }
  const used = process.cpuUsage(cpu)
  poller.stop()
  return {
    tasks: POLLED_TASKS,
    polls: samples,
    calls: countOf(calls, methods),
    cpuUs: (used.user + used.system) / samples,
  }
}

// How long after the prune delay the housekeeping is waited for.
const HOUSEKEEPING_MARGIN_MS = 1_000

/**
 * A slot run with a run ledger, as a scheduler's tick does it: one node runs each slot, another
 * finds it done. One task name for every sample (its slots a second apart), as a scheduled task
 * has. The ledger deletes old rows apart from the runs (a timer, the SQL ledgers' `pruneDelay`):
 * those statements are counted after the last run, as `housekeeping`.
 */
async function countSlotRuns(
  provider: LockProvider,
  runLedger: RunLedger,
  counter: CallCounter,
  name: string,
  samples: number,
) {
  const executor = createLockingTaskExecutor(provider, { runLedger })
  const base = Math.floor(Date.now() / 1000) * 1000 - samples * 1000
  const request = { name, lockAtMostFor: 60_000 }
  // An untimed first slot: the executor's first sweep of the task's slot records, and the ledger's
  // first sweep of every task, are once-per-10-minutes costs.
  await executor.executeWithLock(() => undefined, { ...request, slot: new Date(base - 1000) })
  await new Promise((resolve) => setTimeout(resolve, 50))
  const winner: number[] = []
  const loser: number[] = []
  let winnerMethods: Record<string, number> = {}
  let loserMethods: Record<string, number> = {}
  for (let i = 0; i < samples; i++) {
    const slot = new Date(base + i * 1000)
    counter.reset()
    const ran = await executor.executeWithLock(() => undefined, { ...request, slot })
    if (!ran.executed) throw new Error(`slot ${slot.toISOString()} of "${name}" did not run`)
    winner.push(counter.total)
    winnerMethods = { ...counter.byMethod }
    counter.reset()
    const done = await executor.executeWithLock(() => undefined, { ...request, slot })
    if (done.executed || done.reason !== 'slot-done')
      throw new Error(`slot ${slot.toISOString()} of "${name}" ran twice`)
    loser.push(counter.total)
    loserMethods = { ...counter.byMethod }
  }
  // The ledger's housekeeping runs apart from the runs, on a timer (the SQL ledgers' pruneDelay):
  // counted here, after the last run, so that it is neither hidden nor charged to one run.
  counter.reset()
  await new Promise((resolve) => setTimeout(resolve, DEFAULT_PRUNE_DELAY_MS + HOUSEKEEPING_MARGIN_MS))
  const housekeeping = { calls: counter.total, runs: samples + 1, methods: { ...counter.byMethod } }
  await executor.close()
  return { winner: countOf(winner, winnerMethods), loser: countOf(loser, loserMethods), housekeeping }
}
