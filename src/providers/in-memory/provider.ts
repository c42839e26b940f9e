import { type Clock, systemClock } from '../../core/clock.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import { defineLock } from '../../core/define-lock.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { inMemoryLockInspector } from './inspector.ts'
import { type InMemoryEntry, type InMemoryLockProvider, registerStore } from './store.ts'

export type { InMemoryLockProvider, InMemoryLockRecord } from './store.ts'

/** Options of {@link inMemoryLockProvider}. */
export interface InMemoryLockProviderOptions {
  /** @default systemClock */
  clock?: Clock
}

/**
 * Locks held in this process's memory: for tests, and for a single process that must not run a
 * task twice at once. It coordinates nothing across processes. Extensible; fencing tokens count
 * from 1 per name, per provider. `inMemoryLockInspector(provider)` lists and force-releases its
 * locks.
 *
 * ```ts
 * import { inMemoryLockProvider } from 'shedlock'
 * const provider = inMemoryLockProvider()
 * ```
 *
 * See docs/providers/in-memory.md.
 */
export function inMemoryLockProvider(options: InMemoryLockProviderOptions = {}): InMemoryLockProvider {
  const clock = options.clock ?? systemClock
  const entries = new Map<string, InMemoryEntry>()
  // Apart from the entries, which the inspector may delete: a token never repeats for a name.
  const tokens = new Map<string, bigint>()

  const ownedEntry = (name: string, owner: symbol): InMemoryEntry | undefined => {
    const entry = entries.get(name)
    return entry?.owner === owner ? entry : undefined
  }

  const provider: InMemoryLockProvider = {
    name: 'in-memory',
    async lock(configuration: LockConfiguration) {
      checkLockRequest('in-memory', configuration, clock)
      const now = clock.now()
      const existing = entries.get(configuration.name)
      if (existing && existing.lockUntil > now) return undefined
      const owner = Symbol(configuration.name)
      entries.set(configuration.name, { lockUntil: configuration.lockAtMostUntil.getTime(), lockedAt: now, owner })
      const fencingToken = (tokens.get(configuration.name) ?? 0n) + 1n
      tokens.set(configuration.name, fencingToken)
      return defineLock(configuration, {
        clock,
        fencingToken,
        async unlock(current) {
          const entry = ownedEntry(current.name, owner)
          if (entry) entry.lockUntil = Math.max(clock.now(), current.lockAtLeastUntil.getTime())
        },
        async extend(next) {
          const entry = ownedEntry(next.name, owner)
          if (!entry || entry.lockUntil <= clock.now()) return false
          entry.lockUntil = next.lockAtMostUntil.getTime()
          return true
        },
      })
    },
    inspect(name) {
      const entry = entries.get(name)
      return entry && { lockUntil: new Date(entry.lockUntil), lockedAt: new Date(entry.lockedAt) }
    },
    inspector: () => inMemoryLockInspector(provider),
  }
  registerStore(provider, { entries, clock })
  return provider
}
