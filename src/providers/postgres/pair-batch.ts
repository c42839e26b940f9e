import type { LockConfiguration } from '../../core/lock-configuration.ts'
import {
  acquireOneAfterOther,
  fencingTokenOf,
  type SqlAccessor,
  unlockNow,
} from '../../support/sql/sql-lock-provider.ts'
import { TickBatch } from '../../support/tick-batch.ts'
import { pairedResult } from './statements.ts'

/** One paired acquire (see `LockPair`): a slot's record, its task's lock, and their owners. */
export interface PairRequest {
  readonly first: LockConfiguration
  readonly firstOwner: string
  readonly second: LockConfiguration
  readonly secondOwner: string
}

/** What a paired acquire took of each: `false`, or `true` / the fencing token. */
export type PairTaken = readonly [boolean | bigint, boolean | bigint]

/** What the paired acquire needs of the provider (see postgresLockProvider). */
export interface PostgresPairParts {
  readonly query: (text: string, values: unknown[]) => Promise<{ rowCount: number | null; rows?: unknown[] }>
  readonly fencing: boolean
  readonly isConcurrencyFailure: (error: unknown) => boolean
  /** Whether the client returns rows: without, a batch's answer cannot be told apart by pair. */
  readonly returnsRows: () => boolean
}

/** The accessor's single-lock calls, for the two-statement fallback and the give-back. */
export type SingleLocks = Pick<SqlAccessor, 'acquire' | 'unlock'>

/** One pair's statement (`pairOf`), and its values. */
export interface SinglePairStatement {
  readonly text: string
  readonly values: (request: PairRequest) => unknown[]
}

/** The statement of many pairs (`pairsOf`): its JSON input is `$1`, one `row` per pair, then `extra()`. */
export interface PairsStatement {
  readonly text: string
  readonly row: (request: PairRequest, k: number) => Record<string, unknown>
  readonly extra: () => unknown[]
}

/**
 * The accessor's paired acquire, with the pairs of one turn of the event loop sent as one
 * statement: a fleet's tick of 200 jobs costs each replica one statement instead of 200. A pair
 * whose names another pair of the batch has (one upsert may not touch a row twice) goes on its own.
 */
export function postgresPairs(
  parts: PostgresPairParts,
  one: SingleLocks,
  single: SinglePairStatement,
  many: PairsStatement,
): NonNullable<SqlAccessor['acquirePair']> {
  // What a lone pair took. A concurrency failure rolled both back: the two are then asked for one
  // after the other, so that a conflict on the task's row alone cannot cost the slot.
  const alone = async (request: PairRequest): Promise<PairTaken> => {
    let result: Awaited<ReturnType<PostgresPairParts['query']>>
    try {
      result = await parts.query(single.text, single.values(request))
    } catch (error) {
      if (!parts.isConcurrencyFailure(error)) throw error
      const { first, firstOwner, second, secondOwner } = request
      return acquireOneAfterOther(one, first, firstOwner, second, secondOwner)
    }
    return pairedResult(result, parts.fencing)
  }
  const batch = new TickBatch<PairRequest, PairTaken>((requests) => send({ parts, one, many, alone }, requests))
  return (first, firstOwner, second, secondOwner) => batch.add({ first, firstOwner, second, secondOwner })
}

/** The statement of many releases (`releaseMany`): its JSON input is `$1`, one `row` per lock. */
export interface ReleasesStatement {
  readonly text: string
  readonly row: (current: LockConfiguration, owner: string, acquired: LockConfiguration) => Record<string, unknown>
}

/**
 * The accessor's batched release (`unlockInBatch`): the releases of one turn of the event loop
 * in one statement, retried as a whole on a concurrency failure (`retrying`: a release is
 * idempotent). A batch of one is the accessor's own `unlock`.
 */
export function postgresReleases(
  retrying: (text: string, values: unknown[]) => Promise<number>,
  unlock: SqlAccessor['unlock'],
  many: ReleasesStatement,
): NonNullable<SqlAccessor['unlockInBatch']> {
  type Release = readonly [current: LockConfiguration, owner: string, acquired: LockConfiguration]
  const batch = new TickBatch<Release, void>(async (releases) => {
    if (releases.length === 1) await unlock(...releases[0]!)
    else await retrying(many.text, [JSON.stringify(releases.map((r) => many.row(...r)))])
    return releases.map(() => undefined)
  })
  return (current, owner, acquired) => batch.add([current, owner, acquired])
}

interface Sending {
  readonly parts: PostgresPairParts
  readonly one: SingleLocks
  readonly many: PairsStatement
  readonly alone: (request: PairRequest) => Promise<PairTaken>
}

// One batch: the pairs that can share a statement in one, the others each in its own.
async function send(sending: Sending, requests: readonly PairRequest[]): Promise<(PairTaken | Error)[]> {
  const answers: (PairTaken | Error)[] = new Array(requests.length)
  const alone = (i: number): Promise<void> =>
    sending.alone(requests[i]!).then(
      (taken) => {
        answers[i] = taken
      },
      (error: unknown) => {
        answers[i] = asError(error)
      },
    )
  if (requests.length === 1 || !sending.parts.returnsRows()) {
    await Promise.all(requests.map((_, i) => alone(i)))
    return answers
  }
  const together: number[] = []
  const apart: Promise<void>[] = []
  const names = new Set<string>()
  requests.forEach(({ first, second }, i) => {
    if (names.has(first.name) || names.has(second.name) || first.name === second.name) apart.push(alone(i))
    else {
      names.add(first.name).add(second.name)
      together.push(i)
    }
  })
  await Promise.all([...apart, sendTogether(sending, requests, together, answers, alone)])
  return answers
}

// The pairs at `together` in one statement; their answers into `answers`.
async function sendTogether(
  { parts, one, many }: Sending,
  requests: readonly PairRequest[],
  together: readonly number[],
  answers: (PairTaken | Error)[],
  alone: (i: number) => Promise<void>,
): Promise<void> {
  if (together.length === 0) return
  let rows: unknown[] | undefined
  try {
    const input = JSON.stringify(together.map((i, k) => many.row(requests[i]!, k)))
    rows = (await parts.query(many.text, [input, ...many.extra()])).rows
  } catch (error) {
    // Rolled back, nothing taken: each pair on its own, as a lone pair's failure is met.
    if (parts.isConcurrencyFailure(error)) await Promise.all(together.map(alone))
    else for (const i of together) answers[i] = asError(error)
    return
  }
  if (!Array.isArray(rows)) {
    // Taken, but by which pair cannot be told: all given back (owner-checked), and the pairs fail.
    const error = new TypeError('the client returned no rows for a statement with RETURNING')
    for (const i of together) {
      const { first, firstOwner, second, secondOwner } = requests[i]!
      unlockNow(one, first, firstOwner).catch(() => {})
      unlockNow(one, second, secondOwner).catch(() => {})
      answers[i] = error
    }
    return
  }
  for (const i of together) answers[i] = [false, false]
  const taken = (value: unknown): boolean | bigint =>
    value === null || value === undefined ? false : parts.fencing ? fencingTokenOf(value) : true
  for (const row of rows as { k?: unknown; claim?: unknown; task?: unknown }[]) {
    const i = together[Number(row.k)]
    if (i !== undefined) answers[i] = [taken(row.claim), taken(row.task)]
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
