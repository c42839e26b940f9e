import { randomUUID } from 'node:crypto'
import { type Duration, parseDuration } from '../../core/duration.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import { healthOf, type RunLedger, type RunRecord, withAbandoned } from '../../core/run-ledger.ts'

/** Options of {@link inMemoryRunLedger}. */
export interface InMemoryRunLedgerOptions {
  /** Runs kept per task name, newest first; older ones are dropped. @default 100 */
  keep?: number
  /** Runs older than this are not read back, and are dropped (of every task) at most every 10 minutes on a write; milliseconds or a duration string. @default "30d" */
  maxAge?: Duration
}

const SWEEP_EVERY_MS = 10 * 60_000

/**
 * A run ledger in this process's memory: for tests, and for a single process that wants a run
 * history without a store. It records nothing across processes.
 */
export function inMemoryRunLedger(options: InMemoryRunLedgerOptions = {}): RunLedger {
  const keep = Math.max(1, options.keep ?? 100)
  const maxAge = parseDuration(options.maxAge ?? '30d')
  if (maxAge <= 0) throw new LockConfigurationError('in-memory: maxAge must be longer than 0ms')
  // Per name, newest first.
  const runs = new Map<string, RunRecord[]>()
  const recent = (name: string): RunRecord[] => {
    const since = Date.now() - maxAge
    return (runs.get(name) ?? []).filter((run) => run.startedAt.getTime() >= since)
  }
  // A task that no longer runs (renamed, removed) loses its runs too, not only the one that writes.
  let nextSweep = 0
  const sweep = (): void => {
    const now = Date.now()
    if (now < nextSweep) return
    nextSweep = now + SWEEP_EVERY_MS
    for (const name of [...runs.keys()]) {
      const kept = recent(name)
      if (kept.length === 0) runs.delete(name)
      else runs.set(name, kept)
    }
  }
  const add = (record: RunRecord): void => {
    sweep()
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
      const started: RunRecord = Object.freeze({
        id,
        name: run.name,
        slot: run.slot,
        node: run.node,
        startedAt: run.startedAt,
        finishedAt: undefined,
        outcome: 'running',
        durationMs: undefined,
        error: undefined,
        fencingToken: run.fencingToken,
        nextFireAt: run.nextFireAt,
        triggeredBy: run.triggeredBy,
      })
      add(started)
      return {
        id,
        finish: async (end) => {
          const list = runs.get(run.name) ?? []
          const index = list.indexOf(started)
          if (index >= 0)
            list[index] = Object.freeze({
              ...started,
              finishedAt: end.finishedAt,
              outcome: end.outcome,
              durationMs: end.durationMs,
              error: end.error,
              nextFireAt: end.nextFireAt ?? started.nextFireAt,
            })
        },
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
          fencingToken: run.fencingToken,
          nextFireAt: run.nextFireAt,
          triggeredBy: run.triggeredBy,
        }),
      )
    },
    async history(name, historyOptions = {}) {
      return withAbandoned(recent(name).slice(0, Math.max(0, historyOptions.limit ?? 50)))
    },
    async health(name) {
      return healthOf(name, recent(name))
    },
    async tasks() {
      return [...runs.keys()]
        .sort()
        .map((name) => healthOf(name, recent(name)))
        .filter((health) => health.lastRun !== undefined)
    },
  }
}
