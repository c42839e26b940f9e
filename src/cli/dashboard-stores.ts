import { LockConfigurationError } from '../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../core/lock-inspector.ts'
import { redact } from '../core/redact.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import type { DashboardStore } from '../dashboard/snapshot.ts'
import { storesWithRunHistory } from '../providers/registry.ts'
import { UsageError } from '../support/admin-errors.ts'
import type { StoreAdmin, StoreOptions } from '../support/store-admin.ts'
import { openStore, type ResolvedStoreUrl } from './open-store.ts'

/** How long a store that could not be opened waits before the next try, in milliseconds. */
export const REOPEN_MS = 30_000

/**
 * The stores of `shedlock dashboard`, one per `--url`. A store that cannot be opened at start (a
 * server down, a wrong password) does not stop the others: it is shown as an error on the page and
 * in `/healthz`, and opened again in the background, at most every {@link REOPEN_MS}, without a
 * page ever waiting for it. A bad option (`UsageError`, `LockConfigurationError`) still stops the
 * command, as it would stop any other.
 */
export class DashboardStores {
  readonly #stores: (OpenedStore | PendingStore)[]

  private constructor(stores: (OpenedStore | PendingStore)[]) {
    this.#stores = stores
  }

  /** Opens every store of `urls`; `warn` gets one line per store that could not be opened. */
  static async open(
    urls: readonly ResolvedStoreUrl[],
    options: StoreOptions,
    warn: (line: string) => void,
  ): Promise<DashboardStores> {
    const stores: (OpenedStore | PendingStore)[] = []
    try {
      for (const url of urls) {
        try {
          stores.push(new OpenedStore(await openStore(url, options)))
        } catch (error) {
          if (error instanceof UsageError || error instanceof LockConfigurationError) throw error
          const pending = new PendingStore(url, options, error)
          warn(
            `shedlock dashboard: ${pending.message()}; the page shows it as an error and /healthz answers 503 until it opens (tried again every ${REOPEN_MS / 1000} s)`,
          )
          stores.push(pending)
        }
      }
    } catch (error) {
      await Promise.all(stores.map((store) => store.close()))
      throw error
    }
    return new DashboardStores(stores)
  }

  /** The stores, for `startDashboard()`. */
  get stores(): DashboardStore[] {
    return this.#stores.map((store) => store.store)
  }

  /** How many could not be opened at start. */
  get unreachable(): number {
    return this.#stores.filter((store) => store instanceof PendingStore).length
  }

  /** Closes every store, and a store still being opened once it opens. Never rejects. */
  async close(): Promise<void> {
    await Promise.all(this.#stores.map((store) => store.close()))
  }
}

// The CLI opens the stores of the registry: the page names those that keep a run history.
const NO_HISTORY_NOTE = `tasks and runs are shown for the stores with a run ledger (${storesWithRunHistory()}).`

class OpenedStore {
  readonly #admin: StoreAdmin
  readonly store: DashboardStore

  constructor(admin: StoreAdmin) {
    this.#admin = admin
    this.store = {
      label: `${admin.kind} ${admin.where}`,
      inspector: admin.inspector,
      runLedger: admin.runLedger,
      noHistoryNote: NO_HISTORY_NOTE,
      provider: (lockedBy) => admin.provider({ lockedBy }),
    }
  }

  async close(): Promise<void> {
    await this.#admin.close().catch(() => {})
  }
}

/** A store that could not be opened: its reads fail with why, until a try in the background opens it. */
class PendingStore {
  readonly #url: ResolvedStoreUrl
  readonly #options: StoreOptions
  #error: unknown
  #admin: StoreAdmin | undefined
  #opening: Promise<void> | undefined
  #triedAt = Date.now()
  #closed = false
  readonly store: DashboardStore

  constructor(url: ResolvedStoreUrl, options: StoreOptions, error: unknown) {
    this.#url = url
    this.#options = options
    this.#error = error
    const table = options.table === undefined ? '' : ` (table ${options.table})`
    const self = this
    const inspector: LockInspector = {
      name: url.store.id,
      get clock() {
        return self.#admin?.inspector.clock ?? "this host's clock (the store could not be opened)"
      },
      list: async (selection?: LockSelection): Promise<LockList> => this.#opened().list(selection),
      get: async (name: string): Promise<LockRecord | undefined> => this.#opened().get(name),
      release: async (lock: string | LockRecord): Promise<boolean> => this.#opened().release(lock),
      removeExpired: async (selection?: LockSelection): Promise<number> => this.#opened().removeExpired(selection),
    }
    this.store = {
      label: `${url.store.title} ${url.redacted}${table}`,
      inspector,
      // Read at each page: the run history shows once the store opens.
      get runLedger(): RunLedger | undefined {
        return self.#admin?.runLedger
      },
      noHistoryNote: NO_HISTORY_NOTE,
      provider: (lockedBy) => {
        if (self.#admin) return self.#admin.provider({ lockedBy })
        throw new Error(self.message())
      },
    }
  }

  /** Why it could not be opened, one line, secrets masked. */
  message(): string {
    const text = this.#error instanceof Error ? this.#error.message : String(this.#error)
    return redact(text.split('\n')[0]!)
  }

  // The open store's inspector; before it opens, a rejection with why (and a new try, when due).
  #opened(): LockInspector {
    if (this.#admin) return this.#admin.inspector
    this.#retry()
    throw new Error(this.message())
  }

  #retry(): void {
    if (this.#opening || this.#closed || Date.now() - this.#triedAt < REOPEN_MS) return
    this.#triedAt = Date.now()
    this.#opening = openStore(this.#url, this.#options)
      .then(
        async (admin) => {
          if (this.#closed) await admin.close().catch(() => {})
          else this.#admin = admin
        },
        (error: unknown) => {
          this.#error = error
        },
      )
      .finally(() => {
        this.#opening = undefined
      })
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#opening
    await this.#admin?.close().catch(() => {})
  }
}
