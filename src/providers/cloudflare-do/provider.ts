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
 * Locks in a Durable Object: export {@link ShedLockDurableObject} from your Worker, bind it
 * (`env.LOCKS`), and every Worker that uses the binding shares its locks. Extensible.
 *
 * The object (one instance per `objectName`, wherever it runs) serves one request at a time, and
 * each request reads and writes the lock in its storage with only storage calls in between, so
 * exactly one of several racing Workers takes a free lock. One request per acquire, release and
 * extend; release and extend only touch the lock this acquisition holds. Expiry is decided on the
 * object's clock, one for every Worker; `lockAtLeastFor` counts from the object's `lockedAt`.
 *
 * Fencing tokens, always on: the object keeps one counter in its storage for all its locks and
 * counts every acquisition in the same atomic write that takes the lock; the reply carries it, so
 * each handle's `fencingToken` costs no request. It survives `removeExpired()`, restarts and
 * moves of the object. (An object still running a shedlock without tokens answers none: the
 * handle's `fencingToken` is then `undefined` until the new class is deployed.)
 *
 * ```ts
 * import { durableObjectLockProvider, type DurableObjectLockNamespace } from 'shedlock/cloudflare-do'
 * export { ShedLockDurableObject } from 'shedlock/cloudflare-do' // bound as LOCKS in wrangler.toml
 * declare const env: { LOCKS: DurableObjectLockNamespace }
 * const provider = durableObjectLockProvider({ namespace: env.LOCKS })
 * ```
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
