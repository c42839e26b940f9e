// The Durable Object that holds the locks: one instance per object name, whose requests run one at
// a time. Each request reads and writes its lock in the object's storage with nothing but storage
// calls in between, and workerd's input gate delivers no other request while a storage call is
// pending: every read-then-write is atomic, without a conditional write.

/** The part of `DurableObjectStorage` (`ctx.storage`) the object calls; SQLite- and KV-backed objects both have it. */
export interface DurableObjectLockStorage {
  get(key: string): Promise<unknown>
  put(key: string, value: unknown): Promise<void>
  delete(key: string): Promise<boolean>
  list(options: { prefix: string }): Promise<Map<string, unknown>>
}

/** The part of `DurableObjectState` (`ctx`) the object keeps. */
export interface DurableObjectLockState {
  readonly storage: DurableObjectLockStorage
}

/** A lock as the object stores it: epoch milliseconds on the object's clock. */
interface Stored {
  lockUntil: number
  lockedAt: number
  lockedBy: string
}

/** What the provider and the inspector send: one operation per request, as JSON. */
export type LockRequest =
  | { op: 'acquire'; name: string; lockAtMostFor: number; owner: string }
  | { op: 'extend'; name: string; lockAtMostFor: number; owner: string }
  | { op: 'unlock'; name: string; owner: string; from: 'lockedAt' | 'now'; ms: number }
  | { op: 'list'; prefix: string }
  | { op: 'get'; name: string }
  | { op: 'release'; name: string; expect?: { lockedBy: string; lockedAt?: number; lockUntil: number } }
  | { op: 'removeExpired'; prefix: string }

/** A lock as the object answers it. */
export interface LockReply {
  name: string
  lockUntil: number
  lockedAt: number
  lockedBy: string
}

const KEY = 'lock:'
/**
 * The object's fencing counter: one for all its locks, so that it outlives any lock's entry
 * (removeExpired deletes those); a token per name only has to increase, not to be dense.
 */
const FENCE = 'fencing-token'
/** The owner a force-release writes, as the other stores' inspectors do. */
const RELEASED_BY = 'released'

/**
 * The Durable Object class of `shedlock/cloudflare-do`: export it from your Worker and bind it
 * (see {@link durableObjectLockProvider}). Locks expire on this object's clock (`Date.now()` of
 * the machine that runs it: one instance at a time, wherever it is). It answers the provider's
 * and the inspector's requests only.
 */
export class ShedLockDurableObject {
  readonly #storage: DurableObjectLockStorage

  constructor(state: DurableObjectLockState, _env?: unknown) {
    this.#storage = state.storage
  }

  /** One operation per request: `POST` with a JSON {@link LockRequest}; the answer is JSON. */
  async fetch(request: Request): Promise<Response> {
    let body: LockRequest
    try {
      body = (await request.json()) as LockRequest
    } catch {
      return new Response('shedlock: expected a JSON operation', { status: 400 })
    }
    return Response.json(await this.#run(body))
  }

  async #run(r: LockRequest): Promise<unknown> {
    const s = this.#storage
    const read = async (name: string): Promise<Stored | undefined> => (await s.get(KEY + name)) as Stored | undefined
    const now = Date.now()
    switch (r.op) {
      case 'acquire': {
        const current = await read(r.name)
        if (current && current.lockUntil > now) return { ok: false }
        const counted = await s.get(FENCE)
        const fencingToken = (typeof counted === 'number' ? counted : 0) + 1
        // Two puts with no await between them: workerd coalesces them into one atomic write.
        await Promise.all([
          s.put(KEY + r.name, { lockUntil: now + r.lockAtMostFor, lockedAt: now, lockedBy: r.owner } satisfies Stored),
          s.put(FENCE, fencingToken),
        ])
        return { ok: true, fencingToken: String(fencingToken) }
      }
      case 'extend': {
        const current = await read(r.name)
        if (!current || current.lockedBy !== r.owner || current.lockUntil <= now) return { ok: false }
        await s.put(KEY + r.name, { ...current, lockUntil: now + r.lockAtMostFor })
        return { ok: true }
      }
      case 'unlock': {
        const current = await read(r.name)
        if (!current || current.lockedBy !== r.owner) return { ok: false }
        const base = r.from === 'lockedAt' ? current.lockedAt : now
        await s.put(KEY + r.name, { ...current, lockUntil: Math.max(now, base + r.ms) })
        return { ok: true }
      }
      case 'get': {
        const current = await read(r.name)
        return { now, lock: current && { name: r.name, ...current } }
      }
      case 'list': {
        const entries = await s.list({ prefix: KEY + r.prefix })
        return {
          now,
          locks: [...entries].map(([key, value]) => ({ name: key.slice(KEY.length), ...(value as Stored) })),
        }
      }
      case 'release': {
        const current = await read(r.name)
        if (!current || current.lockUntil <= now) return { ok: false }
        // Given a record, only the acquisition read: its holder and lockedAt (extensions move only
        // lockUntil). An earlier shedlock's inspector sends no lockedAt: the expiry read, then.
        const expect = r.expect
        if (
          expect &&
          (current.lockedBy !== expect.lockedBy ||
            (expect.lockedAt === undefined
              ? current.lockUntil !== expect.lockUntil
              : current.lockedAt !== expect.lockedAt))
        )
          return { ok: false }
        await s.put(KEY + r.name, { ...current, lockUntil: now, lockedBy: RELEASED_BY })
        return { ok: true }
      }
      case 'removeExpired': {
        let removed = 0
        for (const [key, value] of await s.list({ prefix: KEY + r.prefix })) {
          if ((value as Stored).lockUntil <= now && (await s.delete(key))) removed++
        }
        return { removed }
      }
      default:
        return { error: `unknown operation ${JSON.stringify((r as { op?: unknown }).op)}` }
    }
  }
}
