// Fencing tokens under load, for any store: several processes (each with several providers) take
// one lock over and over, release it, or let it expire ("die" holding it) so that another takes
// it over, until `acquisitions` holders have held it. Each holder, while it holds the lock, adds
// a row to a PostgreSQL journal (a serial id), so the journal's order is the holding order;
// tokens must strictly increase along it. A "dying" holder whose row was written after its lock
// could have expired (a slow machine) is marked late and left out of the order, as it may have
// come after its successor's.
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { POSTGRES_URL } from './sql-pools.ts'
import { startNode } from './processes.ts'

/** Options of {@link fencingRuns}. */
export interface FencingRunsOptions {
  /**
   * ES module source, run in each process from the repository's root (so `shedlock/<store>`
   * resolves to dist/: `npm run build` first), that exports `makeProvider()`: a new LockProvider,
   * or a promise of one, per call.
   */
  providerModule: string
  /** How many holders in all. @default 1000 */
  acquisitions?: number
  /** Processes. @default 3 */
  processes?: number
  /** Providers racing in each process. @default 2 */
  providersPerProcess?: number
  /** The share of holders that never release, so that the lock expires and is taken over. @default 0.03 */
  dieShare?: number
  /** lockAtMostFor of a dying holder, in ms. @default 400 */
  dyingLockAtMostForMs?: number
  /** Kill the processes after this many ms. @default 240000 */
  timeoutMs?: number
}

/** What {@link fencingRuns} saw. */
export interface FencingRunsOutcome {
  /** The tokens in holding order (late rows left out). */
  readonly tokens: readonly bigint[]
  /** Holders in all, late ones included. */
  readonly holders: number
  /** Holders that died holding the lock (it expired and was taken over). */
  readonly died: number
  /** Dying holders whose journal row was too late to tell their place. */
  readonly late: number
  /** Distinct processes among the holders. */
  readonly processes: number
  /** Where the order breaks: `[index, previous, next]`, or undefined when strictly increasing. */
  readonly firstDecrease: readonly [number, bigint, bigint] | undefined
}

const root = fileURLToPath(new URL('../../', import.meta.url))

const workerBody = (
  options: Required<Omit<FencingRunsOptions, 'providerModule' | 'timeoutMs'>>,
  run: string,
  name: string,
) => `
import pg from 'pg'
import { setTimeout as sleep } from 'node:timers/promises'
import { lockConfiguration } from 'shedlock'
const journal = new pg.Pool({ connectionString: ${JSON.stringify(POSTGRES_URL)}, max: ${options.providersPerProcess} })
let done = false
const racer = async (provider) => {
  let misses = 0
  while (!done) {
    const dying = Math.random() < ${options.dieShare}
    const lockAtMostFor = dying ? ${options.dyingLockAtMostForMs} : 60000
    const started = Date.now()
    let lock
    try {
      lock = await provider.lock(lockConfiguration({ name: ${JSON.stringify(name)}, lockAtMostFor }))
    } catch (error) {
      // A store failure is no acquisition: say so, and try again.
      console.error('lock failed: ' + error.message)
      await sleep(10)
      continue
    }
    if (!lock) {
      if (++misses % 20 === 0) {
        const { rows } = await journal.query('SELECT count(*)::int AS n FROM shedlock_fencing_journal WHERE run = $1', [${JSON.stringify(run)}])
        if (rows[0].n >= ${options.acquisitions}) done = true
      }
      await sleep(Math.random() * 10)
      continue
    }
    if (typeof lock.fencingToken !== 'bigint') throw new Error('a lock without a bigint fencingToken: ' + String(lock.fencingToken))
    // The count is of the rows before this one (the statement's snapshot).
    const { rows } = await journal.query(
      'INSERT INTO shedlock_fencing_journal (run, token, pid, died) VALUES ($1, $2, $3, $4) RETURNING id, (SELECT count(*)::int FROM shedlock_fencing_journal WHERE run = $1) AS n',
      [${JSON.stringify(run)}, String(lock.fencingToken), process.pid, dying],
    )
    // Marked late when the row may have come after the lock's expiry, hence after a successor's.
    if (dying && Date.now() - started > ${options.dyingLockAtMostForMs} * 0.8) {
      await journal.query('UPDATE shedlock_fencing_journal SET late = true WHERE id = $1', [rows[0].id])
    }
    if (rows[0].n + 1 >= ${options.acquisitions}) done = true
    if (!dying) await lock.unlock()
    // Longer than a loser's pause after a miss (up to 10 ms): a holder that tried again as soon
    // as a loser won its own released lock most times; on Ceph RGW a process then went a whole
    // run without holding it (1000 / 0 / 0 held per process, 2026-12-07).
    await sleep(10 + Math.random() * 10)
  }
}
const providers = await Promise.all(Array.from({ length: ${options.providersPerProcess} }, () => makeProvider()))
// A start barrier: a process slow to load its client (the oldest drivers, a loaded machine) would
// otherwise join a race the others had nearly finished, and might never hold the lock.
await journal.query('INSERT INTO shedlock_fencing_ready (run, pid) VALUES ($1, $2)', [${JSON.stringify(run)}, process.pid])
for (;;) {
  const { rows } = await journal.query('SELECT count(*)::int AS n FROM shedlock_fencing_ready WHERE run = $1', [${JSON.stringify(run)}])
  if (rows[0].n >= ${options.processes}) break
  await sleep(20)
}
await Promise.all(providers.map(racer))
await journal.end()
console.log('done')
process.exit(0)
`

/** Runs the scenario once and reports the tokens in holding order; the caller asserts. */
export async function fencingRuns(options: FencingRunsOptions): Promise<FencingRunsOutcome> {
  const settings = {
    acquisitions: options.acquisitions ?? 1000,
    processes: options.processes ?? 3,
    providersPerProcess: options.providersPerProcess ?? 2,
    dieShare: options.dieShare ?? 0.03,
    dyingLockAtMostForMs: options.dyingLockAtMostForMs ?? 400,
  }
  const run = `${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`
  const name = `fencing-runs-${run}`
  const db = new pg.Client({ connectionString: POSTGRES_URL })
  await db.connect()
  try {
    await db.query(
      `CREATE TABLE IF NOT EXISTS shedlock_fencing_journal (
        id bigserial PRIMARY KEY, run text NOT NULL, token numeric NOT NULL, pid int NOT NULL,
        died boolean NOT NULL, late boolean NOT NULL DEFAULT false)`,
    )
    await db.query('CREATE TABLE IF NOT EXISTS shedlock_fencing_ready (run text NOT NULL, pid int NOT NULL)')
    const source = `${options.providerModule}\n${workerBody(settings, run, name)}`
    const workers = Array.from({ length: settings.processes }, () =>
      startNode(['--input-type=module', '-e', source], { cwd: root, killAfterMs: options.timeoutMs ?? 240_000 }),
    )
    const runs = await Promise.all(workers.map((w) => w.done))
    for (const [i, r] of runs.entries()) {
      if (r.code !== 0) throw new Error(`worker ${i} exited ${r.code ?? r.signal}: ${r.stderr.slice(-2000)}`)
    }
    const { rows } = await db.query<{ token: string; pid: number; died: boolean; late: boolean }>(
      'SELECT token::text AS token, pid, died, late FROM shedlock_fencing_journal WHERE run = $1 ORDER BY id',
      [run],
    )
    await db.query('DELETE FROM shedlock_fencing_journal WHERE run = $1', [run])
    await db.query('DELETE FROM shedlock_fencing_ready WHERE run = $1', [run])
    const tokens = rows.filter((r) => !r.late).map((r) => BigInt(r.token))
    let firstDecrease: [number, bigint, bigint] | undefined
    for (let i = 1; i < tokens.length && !firstDecrease; i++) {
      if (!(tokens[i]! > tokens[i - 1]!)) firstDecrease = [i, tokens[i - 1]!, tokens[i]!]
    }
    const perProcess = new Map<number, number>()
    for (const r of rows) perProcess.set(r.pid, (perProcess.get(r.pid) ?? 0) + 1)
    const outcome = {
      tokens,
      holders: rows.length,
      died: rows.filter((r) => r.died).length,
      late: rows.filter((r) => r.late).length,
      processes: perProcess.size,
      firstDecrease,
    }
    // Printed, so that a CI log shows which figure a failed attempt had even when a retry passed.
    console.log(
      `fencingRuns: holders ${outcome.holders}, per process ${[...perProcess.values()].join(' / ')}, died ${outcome.died}, late ${outcome.late}, first decrease ${firstDecrease ? firstDecrease.map(String).join(' ') : 'none'}`,
    )
    return outcome
  } finally {
    await db.end()
  }
}
