import type { LockProviderError } from '../../core/errors.ts'
import type { ExtensibleLock, PairedLocks } from '../../core/lock-provider.ts'
import { storeError } from '../../support/store-errors.ts'
import type { TickBatch } from '../../support/tick-batch.ts'
import type { StartingSteps } from '../../support/with-timeout.ts'
import type { RedisCommands, ReplicatedEval, ReplicatedSet, SetReply } from './commands.ts'
import {
  ACQUIRE_PAIRS,
  DELETE_IF_OWNED,
  isNoScript,
  PROVIDER,
  runScript,
  runScriptOnKeys,
  type Script,
} from './format.ts'

// The provider's calls beside its Acquisition: the script call of a release or an extension, and
// what an acquisition's reply says (SET … NX, ACQUIRE_FENCED, either followed by WAIT).

/**
 * A script call: EVALSHA, then EVAL of the script when Redis answered NOSCRIPT (its script cache
 * was flushed, or this is another Cluster node), within the same timeout. Its own steps, so that
 * a release or an extension builds no closures.
 */
export class ScriptCall<R> implements StartingSteps<unknown, R> {
  readonly commands: RedisCommands
  readonly script: Script
  readonly key: string
  readonly args: readonly string[]
  readonly map: ((reply: unknown) => R) | undefined

  constructor(
    commands: RedisCommands,
    script: Script,
    key: string,
    args: readonly string[],
    map?: (reply: unknown) => R,
  ) {
    this.commands = commands
    this.script = script
    this.key = key
    this.args = args
    this.map = map
  }

  start(): Promise<unknown> {
    return this.commands.evalSha(this.script.sha1, this.key, this.args)
  }

  recover(error: unknown): Promise<unknown> | undefined {
    return isNoScript(error) ? this.commands.eval(this.script.source, this.key, this.args) : undefined
  }
}

/** Whether an `EXPIRE_IF_OWNED` reply says the key was this acquisition's (and now expires anew). */
export function isOne(reply: unknown): boolean {
  return Number(reply) === 1
}

/**
 * ACQUIRE_FENCED's count in an acquisition's reply (behind WAIT's when `replicas` > 0): the
 * counter's new value, at least 1, or 0 when the key was held.
 */
function fenceCount(reply: unknown, replicas: number): unknown {
  return replicas > 0 ? (reply as ReplicatedEval).reply : reply
}

/**
 * Whether an acquisition's reply says it set the key: with fencing tokens, a count above 0; with
 * `replicas`, WAIT's `set`; else the raw SET's reply as `setReply` reads it, or a port's
 * setIfAbsent() result, where truthy counts, as it always did.
 */
export function acquiredBy(reply: unknown, fenced: boolean, replicas: number, setReply: SetReply | undefined): boolean {
  if (fenced) {
    const count = fenceCount(reply, replicas)
    return (typeof count === 'number' || typeof count === 'string') && Number(count) > 0
  }
  if (replicas > 0) return (reply as ReplicatedSet).set
  return setReply !== undefined ? setReply.acquired(reply) : Boolean(reply)
}

/** The fencing token of a fenced acquisition that set the key ({@link acquiredBy}). */
export function fencingTokenOf(reply: unknown, replicas: number): bigint {
  // INCR's integer reply (int64): clients return it as a number, exact up to 2^53.
  return BigInt(fenceCount(reply, replicas) as number | string)
}

/** Deletes the key if it still holds `value`, unawaited: an acquisition nobody will use, freed early. */
export function giveBack(commands: RedisCommands, key: string, value: string): void {
  runScript(commands, DELETE_IF_OWNED, key, [value]).catch(() => {})
}

/**
 * The error of an acquisition that fewer than `replicas` replicas confirmed within `waitMs`:
 * only the primary had it, so a failover would grant it again.
 */
export function notConfirmed(name: string, confirmed: number, replicas: number, waitMs: number): LockProviderError {
  return storeError(
    PROVIDER,
    'acquire',
    name,
    `the lock was set on the primary but ${confirmed} of the ${replicas} replicas of waitForReplicas confirmed it within ${waitMs}ms (WAIT); it was given back and the task was not run. Check the replicas' link to the primary, or lower waitForReplicas`,
    undefined,
  )
}

/** One of the two acquisitions of a {@link PairCall}: what its SET needs, and its handle once set. */
export interface PairPart {
  readonly key: string
  readonly value: string
  readonly ttl: number
  /** The lock's counter key, with fencing tokens. */
  readonly fenceKeys: readonly string[] | undefined
  fencingToken: bigint | undefined
  handle(): ExtensibleLock
}

/**
 * A paired acquisition (`LockPair`): a slot's record and its task's lock, sent with the other
 * pairs of this turn in one ACQUIRE_PAIRS call ({@link sendPairs}). A pair that lands after the
 * timeout is given back, each key owner-checked.
 */
export class PairCall {
  readonly batch: TickBatch<PairCall, PairReply>
  readonly commands: RedisCommands
  readonly claim: PairPart
  readonly task: PairPart

  constructor(batch: TickBatch<PairCall, PairReply>, commands: RedisCommands, claim: PairPart, task: PairPart) {
    this.batch = batch
    this.commands = commands
    this.claim = claim
    this.task = task
  }

  start(): Promise<PairReply> {
    return this.batch.add(this)
  }

  map([claimed, locked]: PairReply): PairedLocks {
    if (!claimed) return [undefined, undefined]
    if (locked === 0) return [this.claim.handle(), undefined]
    if (this.task.fenceKeys !== undefined) this.task.fencingToken = BigInt(locked)
    return [this.claim.handle(), this.task.handle()]
  }

  late([claimed, locked]: PairReply): void {
    if (claimed) giveBack(this.commands, this.claim.key, this.claim.value)
    if (locked !== 0) giveBack(this.commands, this.task.key, this.task.value)
  }
}

/** One pair's answer in ACQUIRE_PAIRS's reply: the record set, and the lock's count (1 without a counter) or 0. */
export type PairReply = readonly [claimed: boolean, locked: number]

/**
 * Sends `pairs` (all with a counter key or none: one provider's) as one ACQUIRE_PAIRS call, EVAL
 * after a NOSCRIPT reply; one answer per pair, an `Error` for a pair whose counter was refused.
 */
export async function sendPairs(commands: RedisCommands, pairs: readonly PairCall[]): Promise<(PairReply | Error)[]> {
  const per = pairs[0]!.task.fenceKeys === undefined ? 2 : 3
  const keys: string[] = []
  const args: string[] = [String(per)]
  for (const { claim, task } of pairs) {
    keys.push(claim.key, task.key, ...(task.fenceKeys ?? []))
    args.push(claim.value, String(claim.ttl), task.value, String(task.ttl))
  }
  const reply = await runScriptOnKeys(commands, ACQUIRE_PAIRS, keys as [string, ...string[]], args)
  const flat = Array.isArray(reply) ? reply : []
  return pairs.map((_, i): PairReply | Error => {
    const claimed = Number(flat[2 * i])
    const locked = flat[2 * i + 1]
    // Clients return integers as numbers; a refused counter's error as a string.
    if (claimed === -1) return new Error(String(locked))
    return [claimed === 1, Number(locked) || 0]
  })
}
