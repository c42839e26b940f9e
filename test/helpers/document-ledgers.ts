// What the document ledgers (Firestore, Datastore) must do beyond the run ledger suite, against
// their real store: delete old runs apart from the writes, and forget a task whose runs all
// expired. Each store's test gives its ledger and a raw view of what is stored.
import { expect, it } from 'vitest'
import type { RunLedger, RunStart } from '../../src/core/run-ledger.ts'
import type { DocumentRunLedgerOptions } from '../../src/support/document-run-ledger.ts'
import { waitFor } from './processes.ts'

/** A document ledger's store, as a test reads it beside the ledger. */
export interface DocumentLedgerStore {
  /** A ledger over the test's runs, with these options. */
  ledger(options: DocumentRunLedgerOptions): RunLedger
  /** How many run documents the task has, read with the store's own client. */
  countRuns(name: string): Promise<number>
  /** Whether the task's own document exists. */
  hasTask(name: string): Promise<boolean>
  /** Writes of one task the test may send at once: Datastore aborts concurrent writes of one entity group. */
  parallelWrites: number
}

const DAY = 86_400_000

function ended(name: string, startedAt: Date): RunStart & { finishedAt: Date; outcome: 'ok'; durationMs: number } {
  return { name, slot: undefined, node: 'n', startedAt, finishedAt: startedAt, outcome: 'ok', durationMs: 1 }
}

/** Registers the retention cases of a document ledger; `unique()` gives a task name no other test uses. */
export function documentLedgerCases(store: DocumentLedgerStore, unique: () => string): void {
  it('deletes a task’s runs beyond keep a pruneDelay after every keep/10-th write, not on the write', async () => {
    const name = unique()
    // Writes older runs than the pruning ledger will, and deletes nothing within the test.
    const bulk = store.ledger({ keep: 100, pruneDelay: '1h' })
    const base = Date.now() - 60_000
    for (let i = 0; i < 14; i++) await bulk.record(ended(name, new Date(base + i)))
    // A second's delay, so that the count right after the write comes before the prune on a
    // loaded machine too.
    const ledger = store.ledger({ keep: 10, pruneDelay: 1_000 })
    await ledger.record(ended(name, new Date()))
    // The write alone: 15 runs right after it.
    expect(await store.countRuns(name)).toBe(15)
    expect(await waitFor(async () => (await store.countRuns(name)) === 10, 5_000)).toBe(true)
    const kept = await ledger.history(name, { limit: 20 })
    expect(kept).toHaveLength(10)
    expect(kept[0]!.startedAt.getTime()).toBeGreaterThan(Date.now() - 10_000)
    // The newest 9 of the 14 older runs, and the new one.
    expect(kept.at(-1)!.startedAt.getTime()).toBe(base + 5)
  })

  it('deletes more old runs than one commit holds (500) in several', async () => {
    const name = unique()
    const yearLong = store.ledger({ maxAge: '365d', pruneDelay: '1h' })
    const old = Date.now() - 40 * DAY
    const step = store.parallelWrites
    for (let i = 0; i < 590; i += step)
      await Promise.all(
        Array.from({ length: Math.min(step, 590 - i) }, (_, k) => yearLong.record(ended(name, new Date(old + i + k)))),
      )
    // Ten writes make the task's prune due: it reads 600 keys (keep + 500), 590 of them expired.
    const ledger = store.ledger({ keep: 100, maxAge: '30d', pruneDelay: 200 })
    for (let i = 0; i < 10; i++) await ledger.record(ended(name, new Date(Date.now() - 1_000 + i)))
    expect(await waitFor(async () => (await store.countRuns(name)) === 10, 10_000)).toBe(true)
  }, 60_000)

  it('sweeps the runs older than maxAge of a task that no longer runs, and forgets the task', async () => {
    const [gone, active] = [unique(), unique()]
    const yearLong = store.ledger({ maxAge: '365d', pruneDelay: '1h' })
    await yearLong.record(ended(gone, new Date(Date.now() - 40 * DAY)))
    await yearLong.record(ended(gone, new Date(Date.now() - 41 * DAY)))
    expect(await store.countRuns(gone)).toBe(2)
    const ledger = store.ledger({ maxAge: '30d', pruneDelay: 200 })
    await ledger.record(ended(active, new Date()))
    // Read as gone at once; deleted a pruneDelay after the ledger's first write.
    expect(await ledger.history(gone)).toEqual([])
    expect(await waitFor(async () => !(await store.hasTask(gone)), 5_000)).toBe(true)
    expect(await store.countRuns(gone)).toBe(0)
    expect(await store.hasTask(active)).toBe(true)
    expect((await ledger.tasks()).map((task) => task.name)).toContain(active)
  })

  it('a sweep keeps a task that still runs', async () => {
    const name = unique()
    const yearLong = store.ledger({ maxAge: '365d', pruneDelay: '1h' })
    await yearLong.record(ended(name, new Date(Date.now() - 40 * DAY)))
    // An old run, then a new one: the task's latest run is recent, so the sweep passes it by.
    await yearLong.record(ended(name, new Date()))
    const ledger = store.ledger({ maxAge: '30d', pruneDelay: 200 })
    await ledger.record(ended(unique(), new Date()))
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(await store.hasTask(name)).toBe(true)
    expect((await ledger.history(name)).map((run) => run.outcome)).toEqual(['ok'])
  })
}
