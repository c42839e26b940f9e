import { debuglog } from 'node:util'
import { type Duration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { messageOf } from './store-errors.ts'

const debug = debuglog('shedlock')

/** How often one ledger deletes the expired runs of every task (not only of the task that writes), in milliseconds. */
export const SWEEP_EVERY_MS: number = 10 * 60_000
/** A task's runs beyond `keep` are deleted once per this share of `keep` writes of it (every 10th write with the default 100). */
export const PRUNE_SHARE: number = 0.1
/** The default `pruneDelay` of the ledgers that prune on a timer, in milliseconds. */
export const DEFAULT_PRUNE_DELAY_MS: number = 5_000

/** How many runs a ledger keeps, and for how long: the options every ledger that deletes its own old runs takes. */
export interface RunRetentionOptions {
  /** Runs kept per task name; older ones are deleted (`pruneDelay` after every `keep / 10`-th write of the task, so up to 10 % more runs, and the writes within `pruneDelay`, stay between two deletes; reads return at most `keep`). @default 100 */
  keep?: number
  /** Runs older than this are deleted, of every task (also of a task that no longer runs: `pruneDelay` after the ledger's first write, then at most every 10 minutes), in milliseconds or a duration string; reads never return them. @default "30d" */
  maxAge?: Duration
  /** How long after a write that makes them due the old runs are deleted, in milliseconds or a duration string: apart from the write, on a timer that does not keep the process alive, so that a run costs its one ledger write. @default "5s" */
  pruneDelay?: Duration
}

/** How many runs a ledger keeps, and for how long: its `keep` and `maxAge`, checked. */
export interface Retention {
  /** Runs kept per task. */
  readonly keep: number
  /** Milliseconds. */
  readonly maxAge: number
}

/**
 * A ledger's `keep` (default 100) and `maxAge` (default 30 days), checked.
 * @throws LockConfigurationError naming `provider` for a `keep` that is not a whole number of 1 or more, or a `maxAge` that is not a positive duration.
 */
export function retentionOf(provider: string, options: RunRetentionOptions): Retention {
  const keep = options.keep ?? 100
  if (!Number.isSafeInteger(keep) || keep < 1)
    throw new LockConfigurationError(
      `${provider}: keep must be a whole number of runs, 1 or more, got ${JSON.stringify(options.keep)}`,
    )
  const maxAge = parseDuration(options.maxAge ?? '30d')
  if (maxAge <= 0) throw new LockConfigurationError(`${provider}: maxAge must be longer than 0ms`)
  return { keep, maxAge }
}

/** What {@link runPruner} deletes: a store's two deletes, and when. */
export interface RunPrunerOptions extends Retention {
  /** What the debug log names, e.g. the runs table. */
  readonly label: string
  /** Milliseconds from the write that makes a prune due to the prune. */
  readonly delayMs: number
  /** Deletes the runs older than `cutoff` (epoch ms) of every task, a bounded number; resolves to true when more may be left. */
  sweep(cutoff: number): Promise<boolean>
  /** Deletes the task's runs older than `cutoff` (epoch ms) or beyond its `keep` newest. */
  prune(name: string, cutoff: number): Promise<void>
}

/** Told of every write of a ledger; deletes what `keep` and `maxAge` leave out, later and apart from the write. */
export interface RunPruner {
  wrote(name: string): void
}

/**
 * Keeps a ledger within `keep` runs per task and `maxAge`, off the runs' path: a write only
 * counts, and the deletes run `delayMs` later, on a timer that does not keep the process alive,
 * so that a run costs the store its one ledger write and nothing more.
 *
 * - A task's runs beyond `keep` or older than `maxAge`: `prune(name)`, due on every
 *   {@link PRUNE_SHARE} of `keep` writes of the task (so up to `keep / 10` runs more, plus the
 *   writes within `delayMs`, stay between two; reads return at most `keep`).
 * - The runs older than `maxAge` of every task, so that a renamed or removed task loses its runs
 *   too: `sweep()`, due on the first write and then at most every {@link SWEEP_EVERY_MS}; one that
 *   leaves more is followed by another a `delayMs` later.
 *
 * A failed delete is logged (`NODE_DEBUG=shedlock`) and waits for the next due prune: the client
 * may have been closed since the write.
 */
export function runPruner(options: RunPrunerOptions): RunPruner {
  const { keep, maxAge, delayMs, label } = options
  const pruneEvery = Math.max(1, Math.ceil(keep * PRUNE_SHARE))
  // Writes of each task since its last prune, and the tasks whose prune is due.
  const writes = new Map<string, number>()
  const due = new Set<string>()
  let nextSweep = 0
  let timer: ReturnType<typeof setTimeout> | undefined

  const arm = (): void => {
    if (timer) return
    timer = setTimeout(() => {
      timer = undefined
      prune().catch((error: unknown) => debug('run ledger %s: could not delete old runs: %s', label, messageOf(error)))
    }, delayMs)
    // Workers and Deno hand out numbers, without unref().
    ;(timer as { unref?: () => unknown }).unref?.()
  }

  const prune = async (): Promise<void> => {
    const now = Date.now()
    const cutoff = now - maxAge
    if (now >= nextSweep) {
      nextSweep = now + SWEEP_EVERY_MS
      if (await options.sweep(cutoff)) {
        nextSweep = now // more left
        arm()
      }
    }
    for (const name of due) {
      due.delete(name)
      await options.prune(name, cutoff)
    }
  }

  return {
    wrote(name) {
      const count = (writes.get(name) ?? 0) + 1
      if (count >= pruneEvery) {
        writes.delete(name)
        due.add(name)
      } else {
        writes.set(name, count)
      }
      if (due.size > 0 || Date.now() >= nextSweep) arm()
    },
  }
}

/** A ledger's `pruneDelay` in milliseconds (default {@link DEFAULT_PRUNE_DELAY_MS}). */
export function pruneDelayOf(pruneDelay: Duration | undefined): number {
  return parseDuration(pruneDelay ?? DEFAULT_PRUNE_DELAY_MS)
}
