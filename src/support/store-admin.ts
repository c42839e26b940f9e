import type { LockInspector } from '../core/lock-inspector.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import { CliError } from './admin-errors.ts'
import type { StoreUrl } from './store-url.ts'

/** A clock reading taken between `before` and `after` (this host's epoch ms). */
export interface ClockReading {
  /** The store's time, epoch milliseconds (the start of its tick when `resolutionMs` > 1). */
  readonly storeMs: number
  readonly before: number
  readonly after: number
  /** The store clock's tick: 1 for milliseconds, 1000 for whole seconds. */
  readonly resolutionMs: number
  /** Where the reading comes from, e.g. "SELECT clock_timestamp()". */
  readonly source: string
}

/** One line of `shedlock doctor`. */
export interface Check {
  readonly status: 'ok' | 'warn' | 'fail' | 'skip'
  readonly label: string
  readonly detail: string
}

/**
 * A store opened from a URL, for the command line: the provider and the inspector over one
 * connection, and what `init` and `doctor` need beyond them. Each store's `admin.ts` builds one;
 * every method reads or writes the provider's own format, through the store's own modules.
 */
export interface StoreAdmin {
  /** The store's name for people, e.g. "PostgreSQL". */
  readonly kind: string
  /** The redacted URL and, where relevant, the table: what output names the store by. */
  readonly where: string
  /** True when the provider's locks can be extended, which `run --keep-alive` needs. */
  readonly extensible: boolean
  /**
   * A provider over this connection, with the URL's options (table, environment...) and
   * `options.lockedBy` (what `shedlock pause` takes a lock as).
   * @throws CliError for a `lockedBy` on a store that cannot keep it with the lock (see {@link cannotHoldPause}).
   */
  provider(options?: AdminProviderOptions): LockProvider
  /** The store's public inspector over this connection: list, get and force-release. */
  readonly inspector: LockInspector
  /** The store's run history over this connection, where the store has one (`shedlock history`, `status`). */
  readonly runLedger?: RunLedger
  /**
   * Whether `runLedger` is set up, so that `shedlock run` records its runs in it: SQL, when the
   * runs table exists (`shedlock init` creates it); Redis, always (it needs no setup). One round
   * trip at most. Present with `runLedger`.
   */
  runLedgerReady?(): Promise<boolean>
  /** The run history's table, where the store keeps it in one (SQL). */
  readonly runsTable?: RunsTable
  /** Creates what the provider needs (table, bucket, root node) if missing; resolves to what was done, one line each. */
  init(): Promise<string[]>
  /** A round trip; resolves to a description of the server (its version, when it says). */
  ping(): Promise<string>
  /** Checks of the table, bucket or collection layout. Empty where the store has none. */
  structure(): Promise<Check[]>
  /** Deletes the record of `name` outright (doctor's own test lock). */
  remove(name: string): Promise<void>
  /** A reading of the store's clock, or why there is none. */
  readClock(): Promise<ClockReading | string>
  /** How this store's locks depend on the clocks of the hosts, for doctor's clock line. */
  readonly clockDependence: string
  close(): Promise<void>
}

/** Options of {@link StoreAdmin.provider}. */
export interface AdminProviderOptions {
  /** The `lockedBy` prefix of the provider's locks. @default the host name */
  readonly lockedBy?: string | undefined
}

/**
 * The refusal of `provider({ lockedBy })` by a store that cannot keep a holder's name with a lock
 * (`why`): a pause (a lock held by "paused by …") or a trigger ("triggered by …") would read
 * there as any held lock. Its message is the pause's; `shedlock trigger` words its own from
 * `kind` and `why`.
 */
export class HolderRefused extends CliError {
  override name = 'HolderRefused'
  readonly kind: string
  readonly why: string

  constructor(kind: string, why: string) {
    super(`${kind} cannot hold a pause: ${why}; pause the task where it is scheduled instead`)
    this.kind = kind
    this.why = why
  }
}

/** See {@link HolderRefused}. */
export function cannotHoldPause(kind: string, why: string): HolderRefused {
  return new HolderRefused(kind, why)
}

/** The run history's table of a SQL store, for `history`, `status` and `doctor`. */
export interface RunsTable {
  readonly name: string
  exists(): Promise<boolean>
  /** The `shedlock init` line that creates it, with `--runs-table`. */
  readonly initCommand: string
  /** The columns of the table as this version makes it that the existing table lacks (`shedlock init` adds them). */
  missingColumns(): Promise<string[]>
}

/** Options of a command that pick where in the store locks live. */
export interface StoreOptions {
  /** `--table`: SQL table, MongoDB collection or DynamoDB table. */
  readonly table?: string | undefined
  /** `init` only: create what connecting needs (a SQLite file). Other commands refuse a missing one. */
  readonly create?: boolean
  /** `--runs-table`: the run history's table (SQL). @default "shedlock_runs" */
  readonly runsTable?: string | undefined
  /**
   * `--fencing-tokens` (SQL only): the lock table has the fencing token column, which `init`
   * adds, `doctor` requires, and the store's provider counts tokens in. @default false
   */
  readonly fencingTokens?: boolean | undefined
}

/** What each store's `admin.ts` exports, loaded by the registry only when its URL is used. */
export interface StoreAdminModule {
  /**
   * Connects to the store named by `url`, importing its driver.
   * @throws UsageError for URL parameters or options the store does not take; CliError when it cannot connect.
   */
  open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin>
  /** What `shedlock schema` prints: the DDL, or a command that creates what the store needs. SQL stores: `fencingTokens` adds the token column. */
  schema(table: string | undefined, options?: { fencingTokens?: boolean }): string
}

/** Reads `fn`'s clock between two readings of this host's clock. */
export async function timed(source: string, resolutionMs: number, fn: () => Promise<number>): Promise<ClockReading> {
  const before = Date.now()
  const storeMs = await fn()
  const after = Date.now()
  return { storeMs, before, after, resolutionMs, source }
}

/**
 * `inspector`, with a missing table, collection or bucket reported as the CLI reports it: a
 * `CliError` with `advice` (naming the `shedlock init` command that creates it) when `isMissing`
 * recognises the store error's cause, or finds out by asking the store (SQL: its catalog). The
 * inspector's own advice is for programs.
 */
export function withInitAdvice(
  inspector: LockInspector,
  isMissing: (error: unknown) => boolean | Promise<boolean>,
  advice: string,
): LockInspector {
  const translated = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      if (await isMissing((error as { cause?: unknown } | null)?.cause)) throw new CliError(advice, { cause: error })
      throw error
    }
  }
  return {
    name: inspector.name,
    clock: inspector.clock,
    list: (selection) => translated(() => inspector.list(selection)),
    get: (name) => translated(() => inspector.get(name)),
    release: (lock) => translated(() => inspector.release(lock)),
    removeExpired: (selection) => translated(() => inspector.removeExpired(selection)),
  }
}
