import { type Clock, systemClock } from '../../src/core/clock.ts'
import type { LockInspector, LockRecord } from '../../src/core/lock-inspector.ts'
import type { LockProvider, SimpleLock } from '../../src/core/lock-provider.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/provider.ts'

/** A {@link listingStore}: the provider, and every lock name it was asked for. */
export interface ListingStore {
  readonly provider: LockProvider
  readonly names: Set<string>
}

/** The part of an in-memory provider that {@link listingStore} wraps. */
export interface InMemoryLike {
  lock(configuration: never): Promise<SimpleLock | undefined>
  inspect(name: string): { readonly lockUntil: Date; readonly lockedAt: Date } | undefined
  /** The provider's own inspector, where it has one: releases go through it (owed slots are taken by a checked release). */
  inspector?(): LockInspector
}

/**
 * The in-memory provider (a store shared by every "node" of a test), with an inspector that lists
 * the names it has seen: enough for the executor to find a task's slot records (catch-up).
 *
 * @param inMemory the in-memory provider's factory to wrap: the one of the sources by default;
 *   the tests of @shedlock/nestjs pass the built package's, whose executor takes its own
 *   configurations only.
 */
export function listingStore(
  clock: Clock = systemClock,
  inMemory: (options: { clock: Clock }) => InMemoryLike = inMemoryLockProvider,
): ListingStore {
  const inner = inMemory({ clock })
  const names = new Set<string>()
  const recordOf = (name: string): LockRecord | undefined => {
    const entry = inner.inspect(name)
    if (!entry) return undefined
    const remaining = entry.lockUntil.getTime() - clock.now()
    return {
      name,
      lockUntil: entry.lockUntil,
      lockedAt: entry.lockedAt,
      lockedBy: undefined,
      held: remaining > 0,
      remainingMs: Math.max(0, remaining),
    }
  }
  const real = inner.inspector?.()
  const inspector: LockInspector = real ?? {
    name: 'in-memory',
    clock: 'this host',
    list: async (selection) => ({
      now: new Date(clock.now()),
      locks: [...names]
        .filter((n) => n.startsWith(selection?.prefix ?? ''))
        .sort()
        .flatMap((n) => recordOf(n) ?? []),
    }),
    get: async (name) => recordOf(name),
    release: async () => false,
    removeExpired: async () => 0,
  }
  const provider: LockProvider = {
    name: 'in-memory',
    lock: (configuration) => {
      names.add(configuration.name)
      return inner.lock(configuration as never)
    },
    inspector: () => inspector,
  }
  return { provider, names }
}
