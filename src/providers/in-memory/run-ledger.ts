import { randomUUID } from 'node:crypto'
import { healthOf, type RunLedger, type RunRecord } from '../../core/run-ledger.ts'

/** Options of {@link inMemoryRunLedger}. */
export interface InMemoryRunLedgerOptions {
  /** Runs kept per task name, newest first; older ones are dropped. @default 100 */
  keep?: number
}

/**
 * A run ledger in this process's memory: for tests, and for a single process that wants a run
 * history without a store. It records nothing across processes.
 */
export function inMemoryRunLedger(options: InMemoryRunLedgerOptions = {}): RunLedger {
  const keep = Math.max(1, options.keep ?? 100)
  // Per name, newest first.
  const runs = new Map<string, RunRecord[]>()
  const add = (record: RunRecord): void => {
    const list = runs.get(record.name) ?? []
    // Newest first, by start time, as the SQL ledgers read them back.
    const at = list.findIndex((run) => run.startedAt.getTime() <= record.startedAt.getTime())
    list.splice(at < 0 ? list.length : at, 0, record)
    list.length = Math.min(list.length, keep)
    runs.set(record.name, list)
  }
  return {
    name: 'in-memory',
    async start(run) {
      const id = randomUUID()
      add(
        Object.freeze({
          id,
          name: run.name,
          slot: run.slot,
          node: run.node,
          startedAt: run.startedAt,
          finishedAt: undefined,
          outcome: 'running',
          durationMs: undefined,
          error: undefined,
        }),
      )
      return id
    },
    async finish(id, end) {
      for (const list of runs.values()) {
        const index = list.findIndex((run) => run.id === id)
        if (index < 0) continue
        list[index] = Object.freeze({ ...list[index]!, finishedAt: end.finishedAt, outcome: end.outcome, durationMs: end.durationMs, error: end.error })
        return
      }
    },
    async record(run) {
      add(
        Object.freeze({
          id: randomUUID(),
          name: run.name,
          slot: run.slot,
          node: run.node,
          startedAt: run.startedAt,
          finishedAt: run.finishedAt,
          outcome: run.outcome,
          durationMs: run.durationMs,
          error: run.error,
        }),
      )
    },
    async history(name, historyOptions = {}) {
      return (runs.get(name) ?? []).slice(0, Math.max(0, historyOptions.limit ?? 50))
    },
    async health(name) {
      return healthOf(name, runs.get(name) ?? [])
    },
    async tasks() {
      return [...runs.keys()].sort().map((name) => healthOf(name, runs.get(name)!))
    },
  }
}
