// Fencing tokens from several processes: worker processes (over dist/) race for one lock name
// until they have held it `acquisitions` times in all, mostly releasing it, sometimes extending
// it first, sometimes leaving it to expire so that another takes it over. Right after each
// acquisition the holder writes its token to a fenced resource (a PostgreSQL row checked with
// `fence < token`, as docs/fencing.md shows): that write is refused if an earlier holder wrote a
// token as large, so every accepted write proves the token greater than all before it in holding
// order. The caller asserts on what the workers report.
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { expect } from 'vitest'
import { startNode } from './processes.ts'
import { POSTGRES_URL } from './sql-pools.ts'

/** Options of {@link fencingWorkers}. */
export interface FencingWorkersOptions {
  /**
   * ES module source run in each worker from the repository's root (`shedlock/<store>` resolves
   * to dist/: build first), exporting `provider` (a LockProvider with fencing tokens, or a
   * promise of one) and optionally `close()`.
   */
  workerProvider: string
  /** Acquisitions in all, across the workers. @default 1000 */
  acquisitions?: number
  /** Worker processes. @default 4 */
  workers?: number
  /** One acquisition in this many is left to expire (lockAtMostFor `expireAfterMs`) instead of being released. @default 30 */
  expireEvery?: number
  /** lockAtMostFor of the acquisitions left to expire, in ms. @default 300 */
  expireAfterMs?: number
}

/** One acquisition as its worker saw it. */
export interface FencedAcquisition {
  readonly worker: number
  readonly token: bigint
  /** How the hold ended: released, extended (the extension's token) then released, or left to expire. */
  readonly end: 'unlock' | 'extend' | 'expire'
  /** Whether the fenced write right after the acquisition was accepted. */
  readonly accepted: boolean
  /** The token the extension carried (`end: 'extend'`). */
  readonly extendedToken?: bigint
}

/** What {@link fencingWorkers} saw. */
export interface FencingWorkersOutcome {
  readonly acquisitions: FencedAcquisition[]
  /** The resource's fence at the end: the greatest token accepted. */
  readonly finalFence: bigint
  /** Accepted writes, counted by the resource. */
  readonly acceptedWrites: number
}

const root = fileURLToPath(new URL('../../', import.meta.url))

// Its imports have names of their own: the provider's source may import the same modules.
const workerBody = (
  resourceUrl: string,
  id: string,
  name: string,
  worker: number,
  target: number,
  expireEvery: number,
  expireAfterMs: number,
): string => `
import workerPg from 'pg'
import { lockConfiguration as workerLockConfiguration } from 'shedlock'
const resource = new workerPg.Client({ connectionString: ${JSON.stringify(resourceUrl)} })
await resource.connect()
const lockProvider = await provider
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
let done = false
while (!done) {
  const expire = Math.random() * ${expireEvery} < 1
  const lock = await lockProvider.lock(workerLockConfiguration({ name: ${JSON.stringify(name)}, lockAtMostFor: expire ? ${expireAfterMs} : 30000 }))
  if (!lock) { await pause(Math.random() * 2); continue }
  const token = lock.fencingToken
  const written = await resource.query(
    'UPDATE shedlock_fenced_counter SET fence = $2, value = $3, writes = writes + 1 WHERE id = $1 AND fence < $2 RETURNING writes',
    [${JSON.stringify(id)}, String(token), 'worker ${worker}'],
  )
  const accepted = written.rowCount === 1
  const writes = accepted ? Number(written.rows[0].writes) : 0
  done = writes >= ${target}
  let end = 'unlock'
  let extendedToken
  if (expire) end = 'expire'
  else if (Math.random() < 0.1 && typeof lock.extend === 'function') {
    const extended = await lock.extend(30000, 0)
    end = 'extend'
    extendedToken = extended ? String(extended.fencingToken) : 'lost'
    await (extended ?? lock).unlock()
  } else await lock.unlock()
  console.log(JSON.stringify({ token: String(token), end, accepted, extendedToken }))
  // The others learn the end from the resource: a worker that finds the target met stops too.
  if (!done) done = Number((await resource.query('SELECT writes FROM shedlock_fenced_counter WHERE id = $1', [${JSON.stringify(id)}])).rows[0].writes) >= ${target}
}
await resource.end()
if (typeof close === 'function') await close()
process.exit(0)
`

/** Runs the workers to the end and collects what they report; the caller asserts. */
export async function fencingWorkers(options: FencingWorkersOptions): Promise<FencingWorkersOutcome> {
  const target = options.acquisitions ?? 1000
  const workers = options.workers ?? 4
  const name = `fenced-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`
  const resource = new pg.Client({ connectionString: POSTGRES_URL })
  await resource.connect()
  try {
    // Test files of several stores may create it at once: PostgreSQL then reports a duplicate.
    await resource
      .query(
        'CREATE TABLE IF NOT EXISTS shedlock_fenced_counter (id text PRIMARY KEY, fence bigint NOT NULL, value text, writes int NOT NULL)',
      )
      .catch((error: { code?: string }) => {
        if (error.code !== '23505' && error.code !== '42P07') throw error
      })
    await resource.query('INSERT INTO shedlock_fenced_counter (id, fence, value, writes) VALUES ($1, 0, NULL, 0)', [
      name,
    ])
    const started = Array.from({ length: workers }, (_, worker) =>
      startNode(
        [
          '--input-type=module',
          '-e',
          `${options.workerProvider}\n${workerBody(POSTGRES_URL, name, name, worker, target, options.expireEvery ?? 30, options.expireAfterMs ?? 300)}`,
        ],
        { cwd: root, killAfterMs: 240_000 },
      ),
    )
    const runs = await Promise.all(started.map((s) => s.done))
    const acquisitions: FencedAcquisition[] = []
    for (const [worker, run] of runs.entries()) {
      if (run.code !== 0) throw new Error(`worker ${worker} exited with ${run.code}: ${run.stderr}`)
      for (const line of run.stdout.split('\n').filter((l) => l.startsWith('{'))) {
        const seen = JSON.parse(line) as {
          token: string
          end: FencedAcquisition['end']
          accepted: boolean
          extendedToken?: string
        }
        acquisitions.push({
          worker,
          token: BigInt(seen.token),
          end: seen.end,
          accepted: seen.accepted,
          ...(seen.extendedToken === undefined
            ? {}
            : { extendedToken: seen.extendedToken === 'lost' ? -1n : BigInt(seen.extendedToken) }),
        })
      }
    }
    const final = await resource.query('SELECT fence, writes FROM shedlock_fenced_counter WHERE id = $1', [name])
    return {
      acquisitions,
      finalFence: BigInt(final.rows[0].fence as string),
      acceptedWrites: Number(final.rows[0].writes),
    }
  } finally {
    await resource.query('DELETE FROM shedlock_fenced_counter WHERE id = $1', [name]).catch(() => {})
    await resource.end()
  }
}

/** What {@link fencingWorkers} must show: every write accepted, tokens 1..n (each acquisition counted once), several workers, expiries, extensions that kept the token. */
export function expectStrictlyIncreasing(outcome: FencingWorkersOutcome): void {
  const { acquisitions } = outcome
  const tokens = acquisitions.map((a) => a.token).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  expect(acquisitions.length).toBeGreaterThanOrEqual(1000)
  // Every acquisition's write was accepted: its token was greater than every token written before.
  expect(acquisitions.filter((a) => !a.accepted)).toEqual([])
  expect(outcome.acceptedWrites).toBe(acquisitions.length)
  // Each acquisition counted the row up by one from the first: none twice, none skipped (the
  // first is 1, or the store's floor where a new record starts above one).
  const first = tokens[0] ?? 1n
  expect(tokens).toEqual(Array.from({ length: tokens.length }, (_, i) => first + BigInt(i)))
  expect(outcome.finalFence).toBe(first + BigInt(tokens.length - 1))
  // Several processes held it, some holds expired and were taken over, extensions kept the token.
  expect(new Set(acquisitions.map((a) => a.worker)).size).toBeGreaterThan(1)
  expect(acquisitions.some((a) => a.end === 'expire')).toBe(true)
  const extended = acquisitions.filter((a) => a.end === 'extend')
  expect(extended.length).toBeGreaterThan(0)
  expect(extended.filter((a) => a.extendedToken !== a.token)).toEqual([])
  const ends = (end: FencedAcquisition['end']): number => acquisitions.filter((a) => a.end === end).length
  console.info(
    `fencing workers: ${acquisitions.length} acquisitions, tokens ${first}..${first + BigInt(tokens.length - 1)}, ${new Set(acquisitions.map((a) => a.worker)).size} processes, ` +
      `${ends('unlock')} released, ${ends('extend')} extended then released, ${ends('expire')} left to expire and taken over`,
  )
}
