import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { parseFencingToken } from '../../support/fencing.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { lockAtLeastAnchor } from '../../support/sql/sql-lock-provider.ts'
import { storeGuard } from '../../support/store-errors.ts'
import { describeObjectError, type DurableObjectLockOptions, lockObject, PROVIDER } from './client.ts'
import { durableObjectLockInspector } from './inspector.ts'

/** Options of {@link durableObjectLockProvider}. */
export interface DurableObjectLockProviderOptions extends DurableObjectLockOptions {
  /** Prefix of the `lockedBy` value (`<lockedBy>:<pid>:<random>`, unique per acquisition). @default the host name (`localhost` in workerd) */
  lockedBy?: string
  /** The clock of this isolate: only differences of it are used (what is left of an extended lock's `lockAtLeastFor`). @default systemClock */
  clock?: Clock
}

/**
 * Locks held by a Durable Object: export {@link ShedLockDurableObject} from your Worker, bind it
 * (`env.LOCKS`), and every Worker that uses the binding shares its locks. One request per
 * acquire, release and extend. Extensible; expiry is decided on the object's clock, one for every
 * Worker; every lock carries a `fencingToken` at no extra request.
 *
 * ```ts
 * import { durableObjectLockProvider, type DurableObjectLockNamespace } from 'shedlock/cloudflare-do'
 * export { ShedLockDurableObject } from 'shedlock/cloudflare-do' // bound as LOCKS in wrangler.toml
 * declare const env: { LOCKS: DurableObjectLockNamespace }
 * const provider = durableObjectLockProvider({ namespace: env.LOCKS })
 * ```
 *
 * See docs/providers/cloudflare-do.md.
 *
 * @throws LockConfigurationError when `namespace` is not a Durable Object namespace, or for an empty `objectName` or `lockedBy`.
 */
export function durableObjectLockProvider(
  options: DurableObjectLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const send = lockObject(options)
  const { lockedBy } = options
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `cloudflare-do: lockedBy must be a non-empty string (it prefixes the lockedBy field), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const clock = options.clock ?? systemClock
  const guard = storeGuard(describeObjectError)
  return {
    name: PROVIDER,
    inspector: () => durableObjectLockInspector(options),
    async lock(configuration) {
      checkLockRequest(PROVIDER, configuration, clock)
      const owner = lockOwner(lockedBy)
      const { name } = configuration
      const reply = await guard('acquire', name, () =>
        send({ op: 'acquire', name, lockAtMostFor: configuration.lockAtMostFor, owner }),
      )
      if (reply.ok !== true) return undefined
      // Absent only from an object deployed from a shedlock without fencing tokens.
      const fencingToken = parseFencingToken(reply.fencingToken)
      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        ...(fencingToken === undefined ? {} : { fencingToken }),
        unlock: (current) =>
          guard('release', name, async () => {
            const anchor = lockAtLeastAnchor(current, configuration, clock)
            await send({ op: 'unlock', name, owner, from: anchor.from, ms: Math.round(anchor.seconds * 1000) })
          }),
        extend: (next) =>
          guard(
            'extend',
            name,
            async () => (await send({ op: 'extend', name, owner, lockAtMostFor: next.lockAtMostFor })).ok === true,
          ),
      })
    },
  }
}
