import { randomUUID } from 'node:crypto'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import {
  healthOf,
  healthOfTasks,
  type RunEnd,
  type RunLedger,
  type RunRecord,
  type RunStart,
  withAbandoned,
} from '../core/run-ledger.ts'
import { runHandle } from './run-handle.ts'
import { storedOutcome, storedToken } from './stored-run.ts'
import { pruneDelayOf, retentionOf, type RunRetentionOptions, runPruner } from './run-pruner.ts'
import { type DescribeStoreError, storeGuard } from './store-errors.ts'
import { withTimeout } from './with-timeout.ts'

// The run history of the document stores (Firestore, Datastore): one document per task, holding
// its name and when its latest run started, and under it one document per run, whose key sorts
// newest first. A task's history is then a read of its runs in key order, which the stores serve
// from the indexes they keep by themselves: no composite index to create. Each store's module
// maps these documents onto its own (a subcollection, an entity group).

/** Options of the document ledgers (`firestoreRunLedger`, `datastoreRunLedger`). */
export interface DocumentRunLedgerOptions extends RunRetentionOptions {
  /** How long one request to the store may take, milliseconds or a duration string. @default "10s" */
  timeout?: Duration
}

/** One run's document, as every document store writes it. Times are `Date`s; the store converts them. */
export interface RunDocument {
  readonly name: string
  readonly slot: Date | null
  readonly node: string
  readonly startedAt: Date
  readonly finishedAt: Date | null
  readonly outcome: string
  readonly durationMs: number | null
  readonly errorType: string | null
  readonly errorMessage: string | null
  /** Decimal text: a store's 64-bit integers and JavaScript numbers would each lose digits somewhere. */
  readonly fencingToken: string | null
  readonly nextFireAt: Date | null
  readonly triggeredBy: string | null
}

/** The field names of {@link RunDocument}, for stores that list what they write (Datastore's unindexed properties). */
export const RUN_FIELDS: readonly (keyof RunDocument)[] = [
  'name',
  'slot',
  'node',
  'startedAt',
  'finishedAt',
  'outcome',
  'durationMs',
  'errorType',
  'errorMessage',
  'fencingToken',
  'nextFireAt',
  'triggeredBy',
]

/** A task's own document: its name, and when the run written last started (what `tasks()` and the sweep read). */
export interface TaskDocument {
  readonly name: string
  readonly lastStartedAt: Date
}

/** A run document as read back: its key, and its fields as the store returns them. */
export interface StoredRunDocument {
  readonly key: string
  readonly fields: Readonly<Record<string, unknown>>
}

/** What a document store does for {@link documentRunLedger}: each method one request or one commit. */
export interface RunDocuments {
  /** Short store name, as `RunLedger.name`. */
  readonly provider: string
  /** Where the runs live, for messages and the debug log, e.g. `collection "shedlock_runs"`. */
  readonly where: string
  /** Epoch ms of a time field as the store reads it back; `undefined` for anything else. */
  timeOf(value: unknown): number | undefined
  /** Writes the run's document under its task, whole; with `task`, the task's document too, in the same commit. */
  write(key: string, run: RunDocument, task: TaskDocument | undefined): Promise<void>
  /** The task's first `limit` run documents in key order: newest first. */
  runs(name: string, limit: number): Promise<StoredRunDocument[]>
  /** The keys of the task's first `limit` run documents, in key order, without their fields. */
  runKeys(name: string, limit: number): Promise<string[]>
  /** Deletes these run documents of the task, at most 500, in one commit. */
  deleteRuns(name: string, keys: readonly string[]): Promise<void>
  /** Every task document (paged by the store as it needs). */
  tasks(): Promise<TaskDocument[]>
  /** Deletes the task's document if its latest run still started before `cutoff` (epoch ms): no run was written meanwhile. */
  forgetTask(name: string, cutoff: number): Promise<void>
}

// A run key: the start's distance to the last time a Date holds, in 16 digits (newer runs sort
// first), then a random UUID, so that two runs started in one millisecond keep two documents.
const LAST_MS = 8_640_000_000_000_000
const KEY = /^(\d{16})-[0-9a-f-]{36}$/

/** A new run's key: it sorts before the keys of runs that started earlier. */
export function runKey(startedAt: Date): string {
  const inverted = LAST_MS - Math.max(0, Math.min(LAST_MS, startedAt.getTime()))
  return `${String(inverted).padStart(16, '0')}-${randomUUID()}`
}

/** When the run of `key` started (epoch ms), or `undefined` for a key that is not a run key. */
export function startOfKey(key: string): number | undefined {
  const match = KEY.exec(key)
  return match ? LAST_MS - Number(match[1]) : undefined
}

// Keys read per sweep step, and deleted per commit (the most a commit takes on both stores).
const PAGE = 500

/**
 * The {@link RunLedger} over a document store: `record()` is one commit of the run's document and
 * its task's; `start()` the same with the run `running`, and its handle's `finish()` one write of
 * the run's document over it. Old runs are deleted by a {@link runPruner}, apart from the writes;
 * reads never return more than `keep` runs, nor runs older than `maxAge`.
 *
 * @throws LockConfigurationError for a bad `keep`, `maxAge`, `pruneDelay` or `timeout`.
 */
export function documentRunLedger(
  store: RunDocuments,
  options: DocumentRunLedgerOptions,
  describe: DescribeStoreError,
): RunLedger {
  const { keep, maxAge } = retentionOf(store.provider, options)
  const timeout = parseDuration(options.timeout ?? '10s')
  if (timeout <= 0) throw new LockConfigurationError(`${store.provider}: timeout must be longer than 0ms`)
  const guard = storeGuard(describe)
  const bounded = <T>(promise: Promise<T>): Promise<T> => withTimeout(promise, timeout, { store: store.provider })
  const pruner = runPruner({
    label: store.where,
    keep,
    maxAge,
    delayMs: pruneDelayOf(options.pruneDelay),
    sweep: (cutoff) => sweep(store, bounded, cutoff),
    prune: (name, cutoff) => prune(store, bounded, name, keep, cutoff),
  })

  const write = async (key: string, run: RunStart, end: RunEnd | undefined, withTask: boolean): Promise<void> => {
    const task = withTask ? { name: run.name, lastStartedAt: run.startedAt } : undefined
    await bounded(store.write(key, documentOf(run, end), task))
    pruner.wrote(run.name)
  }
  // Runs older than maxAge are never read back, whether or not a prune has deleted them yet.
  const read = async (name: string, limit: number): Promise<RunRecord[]> => {
    const since = Date.now() - maxAge
    const runs: RunRecord[] = []
    for (const document of limit > 0 ? await bounded(store.runs(name, limit)) : []) {
      const run = recordOf(store, name, document)
      if (run && run.startedAt.getTime() >= since) runs.push(run)
    }
    return runs
  }

  return {
    name: store.provider,
    start: (run) =>
      guard('record', run.name, async () => {
        const key = runKey(run.startedAt)
        await write(key, run, undefined, true)
        // The task's document already names this run's start.
        return runHandle(store.provider, key, (end) => guard('record', run.name, () => write(key, run, end, false)))
      }),
    record: (run) => guard('record', run.name, () => write(runKey(run.startedAt), run, run, true)),
    history: (name, historyOptions = {}) =>
      guard('history', name, async () =>
        withAbandoned(await read(name, Math.min(keep, Math.max(0, historyOptions.limit ?? 50)))),
      ),
    health: (name) => guard('history', name, async () => healthOf(name, await read(name, keep))),
    tasks: () =>
      guard('history', '', async () => {
        const since = Date.now() - maxAge
        const names = (await bounded(store.tasks()))
          .filter((task) => task.lastStartedAt.getTime() >= since)
          .map((task) => task.name)
          .sort()
        return healthOfTasks(names, (name) => read(name, keep))
      }),
  }
}

function documentOf(run: RunStart, end: RunEnd | undefined): RunDocument {
  return {
    name: run.name,
    slot: run.slot ?? null,
    node: run.node.slice(0, 255),
    startedAt: run.startedAt,
    finishedAt: end?.finishedAt ?? null,
    outcome: end?.outcome ?? 'running',
    durationMs: end ? Math.round(end.durationMs) : null,
    errorType: end?.error?.type ?? null,
    errorMessage: end?.error?.message ?? null,
    fencingToken: run.fencingToken === undefined ? null : String(run.fencingToken),
    // A run's end knows the later fire time; its start its own.
    nextFireAt: end?.nextFireAt ?? run.nextFireAt ?? null,
    triggeredBy: run.triggeredBy?.slice(0, 255) ?? null,
  }
}

/** A run document as a run; `undefined` for one without a start (not written by a ledger). */
function recordOf(store: RunDocuments, name: string, { key, fields }: StoredRunDocument): RunRecord | undefined {
  const date = (value: unknown): Date | undefined => {
    const ms = store.timeOf(value)
    return ms === undefined ? undefined : new Date(ms)
  }
  const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined)
  const startedAt = date(fields.startedAt)
  if (!startedAt) return undefined
  const errorType = text(fields.errorType)
  return Object.freeze({
    id: key,
    name,
    slot: date(fields.slot),
    node: text(fields.node) ?? '',
    startedAt,
    finishedAt: date(fields.finishedAt),
    outcome: storedOutcome(fields.outcome),
    durationMs: typeof fields.durationMs === 'number' ? fields.durationMs : undefined,
    error: errorType === undefined ? undefined : { type: errorType, message: text(fields.errorMessage) ?? '' },
    fencingToken: storedToken(fields.fencingToken),
    nextFireAt: date(fields.nextFireAt),
    triggeredBy: text(fields.triggeredBy),
  })
}

type Bounded = <T>(promise: Promise<T>) => Promise<T>

/** Deletes the task's runs beyond its `keep` newest, and those older than `cutoff`. */
async function prune(store: RunDocuments, bounded: Bounded, name: string, keep: number, cutoff: number): Promise<void> {
  const keys = await bounded(store.runKeys(name, keep + PAGE))
  const old = keys.filter((key, index) => index >= keep || (startOfKey(key) ?? cutoff) < cutoff)
  await deleteRuns(store, bounded, name, old)
}

// A commit holds at most 500 writes on both stores: larger deletes go in several.
async function deleteRuns(store: RunDocuments, bounded: Bounded, name: string, keys: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += PAGE) await bounded(store.deleteRuns(name, keys.slice(i, i + PAGE)))
}

/**
 * Deletes the runs of every task whose latest run started before `cutoff`, and then the task's
 * document, unless a run was written meanwhile; true when a task had more runs than one step reads.
 */
async function sweep(store: RunDocuments, bounded: Bounded, cutoff: number): Promise<boolean> {
  let more = false
  for (const task of await bounded(store.tasks())) {
    if (task.lastStartedAt.getTime() >= cutoff) continue
    const keys = await bounded(store.runKeys(task.name, PAGE))
    const old = keys.filter((key) => (startOfKey(key) ?? cutoff) < cutoff)
    await deleteRuns(store, bounded, task.name, old)
    if (keys.length >= PAGE) more = true
    else if (old.length === keys.length) await bounded(store.forgetTask(task.name, cutoff))
  }
  return more
}
