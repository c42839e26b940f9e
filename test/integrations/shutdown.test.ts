// The shutdown proof (docs/usage.md, graceful shutdown): a node running a long task gets SIGTERM,
// as every pod of a rolling deploy does, and another node takes the lock within a second of the
// first one's exit, not after lockAtMostFor (60 s here). Two processes over the real PostgreSQL:
// the library (executor.close() on SIGTERM, test/fixtures/apps/shutdown-worker.mjs) and the CLI
// (`shedlock run`, which passes SIGTERM on to its command and releases the lock when it ends).
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { lockConfiguration, type SimpleLock } from '../../src/index.ts'
import { postgresLockProvider, postgresSchema } from '../../src/providers/postgres/index.ts'
import { type NodeProcess, startNode, waitFor } from '../helpers/processes.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const table = `shedlock_shutdown_${process.pid}`
const pool = await postgresPoolOrSkip(4)

interface Node extends NodeProcess {
  /** When (performance.now()) the process exited. */
  exitedAt: Promise<number>
}

function start(args: string[], env: Record<string, string>): Node {
  const node = startNode(args, { cwd: root, env })
  return { ...node, exitedAt: node.exited.then(() => performance.now()) }
}

/**
 * Sends SIGTERM to `node`, which holds `name`, and races for the lock from this process every
 * 10 ms. Resolves to when (performance.now()) the signal went, the node exited and this process
 * got the lock.
 */
async function terminateAndTakeOver(node: Node, provider: ReturnType<typeof postgresLockProvider>, name: string) {
  const config = lockConfiguration({ name, lockAtMostFor: '10s' })
  expect(await provider.lock(config), 'the node holds the lock before SIGTERM').toBeUndefined()
  const signalledAt = performance.now()
  node.child.kill('SIGTERM')
  let taken: SimpleLock | undefined
  let takenAt = 0
  for (const deadline = signalledAt + 30_000; !taken && performance.now() < deadline; ) {
    taken = await provider.lock(config)
    if (taken) takenAt = performance.now()
    else await sleep(10)
  }
  const exitedAt = await node.exitedAt
  await taken?.unlock()
  return { signalledAt, exitedAt, takenAt, taken: taken !== undefined }
}

describe.skipIf(!pool)('graceful shutdown across processes, on PostgreSQL', () => {
  const client = pool as pg.Pool
  const provider = postgresLockProvider({ client, tableName: table })

  beforeAll(async () => {
    await client.query(postgresSchema({ tableName: table }))
  })
  afterAll(async () => {
    await client.query(`DROP TABLE IF EXISTS ${table}`)
    await client.end()
  })

  it('executor.close() on SIGTERM: the task stops, the lock is released, and another process takes it within a second of the exit', async () => {
    const name = `shutdown-${randomUUID()}`
    const node = start([join(root, 'test/fixtures/apps/shutdown-worker.mjs')], {
      SHUTDOWN_URL: POSTGRES_URL,
      SHUTDOWN_TABLE: table,
      SHUTDOWN_LOCK: name,
    })
    expect(await waitFor(() => node.stdout().includes('running'), 20_000), node.stderr()).toBe(true)
    const t = await terminateAndTakeOver(node, provider, name)
    expect(node.stderr()).toBe('')
    expect(node.stdout().trim().split('\n')).toEqual([
      'running',
      'outcome {"executed":true,"result":"stopped"}',
      'closed',
      'exit',
    ])
    expect(t.taken, 'another process took the lock').toBe(true)
    // Taken once released, which is before the process exits: well within a second of the exit,
    // where without the shutdown it would have waited for lockAtMostFor (60 s).
    expect(t.takenAt - t.exitedAt).toBeLessThan(1_000)
    console.log(
      `[shutdown] library: SIGTERM to lock taken by another process ${Math.round(t.takenAt - t.signalledAt)} ms (exit at ${Math.round(t.exitedAt - t.signalledAt)} ms); lockAtMostFor 60 s`,
    )
  }, 60_000)

  it('shedlock run: SIGTERM goes to the command, shedlock exits 143 and releases the lock, and another process takes it within a second of the exit', async () => {
    const name = `shutdown-run-${randomUUID()}`
    const node = start(
      [
        join(root, 'dist/cli/main.js'),
        'run',
        '--url',
        POSTGRES_URL,
        '--table',
        table,
        '--name',
        name,
        '--lock-at-most-for',
        '60s',
        '--',
        'sh',
        '-c',
        'echo running; exec sleep 60',
      ],
      {},
    )
    expect(await waitFor(() => node.stdout().includes('running'), 20_000), node.stderr()).toBe(true)
    const t = await terminateAndTakeOver(node, provider, name)
    expect(node.child.exitCode).toBe(143)
    expect(t.taken, 'another process took the lock').toBe(true)
    expect(t.takenAt - t.exitedAt).toBeLessThan(1_000)
    console.log(
      `[shutdown] shedlock run: SIGTERM to lock taken by another process ${Math.round(t.takenAt - t.signalledAt)} ms (exit at ${Math.round(t.exitedAt - t.signalledAt)} ms); lockAtMostFor 60 s`,
    )
  }, 60_000)
})
