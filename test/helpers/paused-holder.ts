// The paused-holder scenario of docs/fencing.md, for any store: a holder process takes the lock
// and reads its fencing token, is paused (SIGSTOP) past lockAtMostFor, another node takes the
// lock and writes to a fenced resource with its greater token, then the holder resumes and
// writes with its stale token: the resource must refuse that write. The resource is a
// PostgreSQL table checked as docs/fencing.md shows (`UPDATE ... WHERE fence <= $token`).
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { POSTGRES_URL as postgresUrl } from './sql-pools.ts'
import { startNode } from './processes.ts'

/** Options of {@link pausedHolder}. */
export interface PausedHolderOptions {
  /**
   * ES module source, run in the holder process from the repository's root (so `shedlock/<store>`
   * resolves to dist/), that exports `provider`: a LockProvider, or a promise of one, for the
   * holder. Build dist/ first (`npm run build`; `npm test` does).
   */
  holderProvider: string
  /** The other node's provider, in this process. */
  taker: LockProvider
  /** The lock's lockAtMostFor in ms: the holder stays paused 1.5 times as long. @default 2000 */
  lockAtMostForMs?: number
  /** Lock name. @default a fresh one */
  name?: string
}

/** What {@link pausedHolder} saw. */
export interface PausedHolderOutcome {
  readonly holderToken: bigint
  readonly takerToken: bigint
  /** The taker's write with its token: must be accepted. */
  readonly takerWriteAccepted: boolean
  /** The resumed holder's write with its stale token: must be refused. */
  readonly staleWriteAccepted: boolean
  /** Whether the holder's task signal had aborted (LockLostError) by the time it wrote. */
  readonly holderSignalAborted: boolean
  /** The resource's value at the end: the taker's. */
  readonly finalValue: string
}

const root = fileURLToPath(new URL('../../', import.meta.url))

// The holder's task: print the token, wait for a line on stdin (sent after SIGCONT), write with
// the token as a naive task would, print whether the resource took it.
const holderBody = (resourceUrl: string, name: string, lockAtMostFor: number, id: string): string => `
import holderPg from 'pg'
import { createInterface as holderLines } from 'node:readline'
import { createLockingTaskExecutor as holderExecutor } from 'shedlock'
const resource = new holderPg.Client({ connectionString: ${JSON.stringify(resourceUrl)} })
await resource.connect()
const lines = holderLines({ input: process.stdin })[Symbol.asyncIterator]()
const executor = holderExecutor(await provider)
const result = await executor.executeWithLock(async ({ fencingToken, signal }) => {
  console.log('token ' + String(fencingToken))
  await lines.next()
  const written = await resource.query(
    'UPDATE shedlock_fenced_resource SET fence = $2, value = $3 WHERE id = $1 AND fence <= $2',
    [${JSON.stringify(id)}, String(fencingToken), 'holder'],
  )
  console.log('written ' + written.rowCount + ' aborted ' + signal.aborted)
}, { name: ${JSON.stringify(name)}, lockAtMostFor: ${lockAtMostFor} })
console.log('executed ' + result.executed)
await resource.end()
process.exit(0)
`

/**
 * Runs the paused-holder scenario once against a real store and reports what happened; the
 * caller asserts (`staleWriteAccepted` false, `takerToken > holderToken`).
 */
export async function pausedHolder(options: PausedHolderOptions): Promise<PausedHolderOutcome> {
  const lockAtMostFor = options.lockAtMostForMs ?? 2_000
  const name = options.name ?? `paused-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`
  const id = name
  const resource = new pg.Client({ connectionString: postgresUrl })
  await resource.connect()
  try {
    await resource.query(
      'CREATE TABLE IF NOT EXISTS shedlock_fenced_resource (id text PRIMARY KEY, fence bigint NOT NULL, value text)',
    )
    await resource.query('INSERT INTO shedlock_fenced_resource (id, fence, value) VALUES ($1, 0, NULL)', [id])
    const write = async (token: bigint, value: string): Promise<boolean> =>
      (
        await resource.query(
          'UPDATE shedlock_fenced_resource SET fence = $2, value = $3 WHERE id = $1 AND fence <= $2',
          [id, String(token), value],
        )
      ).rowCount === 1

    const holder = startNode(
      ['--input-type=module', '-e', `${options.holderProvider}\n${holderBody(postgresUrl, name, lockAtMostFor, id)}`],
      { cwd: root, killAfterMs: 60_000, stdin: true },
    )
    const holderToken = await waitForLine(holder, /^token (\d+)$/m, 20_000)
    holder.child.kill('SIGSTOP')
    try {
      await sleep(Math.ceil(lockAtMostFor * 1.5))
      const executor = createLockingTaskExecutor(options.taker)
      const taken = await executor.executeWithLock(
        async ({ fencingToken }) => {
          if (fencingToken === undefined) throw new Error('the taker got no fencing token')
          return { token: fencingToken, accepted: await write(fencingToken, 'taker') }
        },
        { name, lockAtMostFor: 60_000 },
      )
      if (!taken.executed) throw new Error(`the taker did not get lock "${name}" after the holder's lockAtMostFor`)
      holder.child.kill('SIGCONT')
      holder.child.stdin!.write('go\n')
      const report = await waitForLine(holder, /^written (\d+) aborted (true|false)$/m, 20_000)
      await holder.exited
      const final = await resource.query('SELECT value FROM shedlock_fenced_resource WHERE id = $1', [id])
      return {
        holderToken: BigInt(holderToken[1]!),
        takerToken: taken.result.token,
        takerWriteAccepted: taken.result.accepted,
        staleWriteAccepted: report[1] === '1',
        holderSignalAborted: report[2] === 'true',
        finalValue: String(final.rows[0]?.value),
      }
    } finally {
      if (holder.child.exitCode === null) {
        holder.child.kill('SIGCONT')
        holder.child.kill('SIGKILL')
      }
    }
  } finally {
    await resource.end()
  }
}

async function waitForLine(
  holder: ReturnType<typeof startNode>,
  pattern: RegExp,
  ms: number,
): Promise<RegExpMatchArray> {
  const deadline = Date.now() + ms
  for (;;) {
    const match = holder.stdout().match(pattern)
    if (match) return match
    if (holder.child.exitCode !== null || Date.now() > deadline) {
      throw new Error(
        `the holder process did not print ${pattern} (exit ${holder.child.exitCode}); stdout: ${holder.stdout()}; stderr: ${holder.stderr()}`,
      )
    }
    // A plain poll: racing once(stdout, 'data') against a timer left a listener behind each turn.
    await sleep(50)
  }
}
