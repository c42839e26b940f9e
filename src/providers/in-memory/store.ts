import type { Clock } from '../../core/clock.ts'
import type { LockInspector } from '../../core/lock-inspector.ts'
import type { ExtensibleLockProvider } from '../../core/lock-provider.ts'

/** What {@link InMemoryLockProvider.inspect} reports about one lock. */
export interface InMemoryLockRecord {
  readonly lockUntil: Date
  readonly lockedAt: Date
}

/** An extensible provider that keeps locks in this process's memory. */
export interface InMemoryLockProvider extends ExtensibleLockProvider {
  /** Lists and cleans this provider's locks (see `inMemoryLockInspector`). */
  inspector(): LockInspector
  /** The stored record of `name` (held or not), or `undefined` if it was never locked. */
  inspect(name: string): InMemoryLockRecord | undefined
}

/** One lock's state. Internal: shared with the inspector, which force-releases by changing `owner`. */
export interface InMemoryEntry {
  lockUntil: number
  lockedAt: number
  /** The acquisition that holds or last held the lock; unlock and extend touch the entry only while it is theirs. */
  owner: symbol
}

/** What {@link inMemoryLockInspector} reads of a provider. Internal. */
export interface InMemoryStore {
  readonly entries: Map<string, InMemoryEntry>
  readonly clock: Clock
}

// Providers' state, for their inspectors: kept off the provider object, so that it stays
// invisible to users (and to JSON.stringify, console.log...).
const stores = new WeakMap<InMemoryLockProvider, InMemoryStore>()

/** Keeps `store` as the state of `provider`, for its inspector. Internal. */
export function registerStore(provider: InMemoryLockProvider, store: InMemoryStore): void {
  stores.set(provider, store)
}

/** The entries and clock of a provider made by `inMemoryLockProvider()`, or `undefined` for any other object. Internal. */
export function inMemoryStoreOf(provider: InMemoryLockProvider): InMemoryStore | undefined {
  return stores.get(provider)
}
