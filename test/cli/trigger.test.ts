import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openStore } from '../../src/cli/open-store.ts'
import { parseStoreUrl } from '../../src/cli/store-url.ts'
import { triggerRecordName } from '../../src/core/trigger.ts'
import type { StoreAdmin } from '../../src/support/store-admin.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { dropRedisEnvironment, redisOrSkip, redisUrlIn } from '../helpers/kv-clients.ts'
import { type NodeProcess, portOpen, startNode, stopProcess } from '../helpers/processes.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli, waitFor } from './support/cli.ts'

// shedlock trigger (issue 46, run now), the built bin against real stores: a replica in a child
// process, an executor that polls for triggers, runs the task once through its lock, recorded in
// history as triggered; with no replica polling, the command says so and withdraws its trigger.

const root = fileURLToPath(new URL('../../', import.meta.url))

/** One store: the CLI's options for it, and the worker's (`url`, `table`, `runsTable`). */
interface Store {
  readonly url: string
  readonly table?: string
  readonly runsTable?: string
}

let counter = 0
const fresh = (): string => `trigger-${process.pid}-${++counter}`

/**
 * A replica in a child process over `store`'s dist build: an executor polling for triggers every
 * 200 ms that has run task `name` once; it prints `ran N` for each run of the task.
 */
function replica(store: Store, name: string, hang?: { run: number; lease: number }): NodeProcess {
  const source = `
import { openStore } from './dist/cli/open-store.js'
import { parseStoreUrl } from './dist/cli/store-url.js'
import { createLockingTaskExecutor } from './dist/index.js'
const admin = await openStore(parseStoreUrl(${JSON.stringify(store.url)}), ${JSON.stringify({ table: store.table, runsTable: store.runsTable })})
const executor = createLockingTaskExecutor(admin.provider({ lockedBy: 'replica-a' }), {
  runLedger: admin.runLedger,
  triggers: { poll: 200 },
  ${hang ? `lease: ${hang.lease},` : ''}
})
let runs = 0
const task = () => {
  console.log('ran ' + ++runs)
  // A run that never ends: the process is killed inside it.
  if (runs === ${hang?.run ?? -1}) return new Promise(() => {})
}
await executor.executeWithLock(task, { name: ${JSON.stringify(name)}, lockAtMostFor: '10s' })
// The poll's timer keeps no process alive.
setInterval(() => {}, 1_000)
`
  return startNode(['--input-type=module', '-e', source], { cwd: root, killAfterMs: 60_000 })
}

function triggerCases(store: () => Store, admin: () => StoreAdmin): void {
  const storeArgs = () => [
    '--url',
    store().url,
    ...(store().table ? ['--table', store().table!] : []),
    ...(store().runsTable ? ['--runs-table', store().runsTable!] : []),
  ]
  // list, pause and resume take no --runs-table.
  const lockArgs = () => ['--url', store().url, ...(store().table ? ['--table', store().table!] : [])]
  const trigger = (name: string, ...extra: string[]) => cli(['trigger', name, ...storeArgs(), ...extra])

  it('a polling replica picks the trigger up and runs the task once; history says who triggered it', async () => {
    const name = fresh()
    const worker = replica(store(), name)
    try {
      expect(await waitFor(() => worker.stdout().includes('ran 1'), 20_000), worker.stderr()).toBe(true)
      const run = await trigger(name, '--by', 'alice')
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toMatch(
        new RegExp(`^triggered ${name}; picked up by replica-a:\\d+:[0-9a-f]{12} after \\d+\\.\\d s\\n$`),
      )
      expect(await waitFor(() => worker.stdout().includes('ran 2'), 5_000)).toBe(true)
      expect((await admin().inspector.get(triggerRecordName(name)))?.held ?? false).toBe(false)
      const history = await cli(['history', name, ...storeArgs()])
      expect(history.stdout).toMatch(/ ok \(triggered by alice\) /)
      const json = JSON.parse((await cli(['history', name, ...storeArgs(), '--json'])).stdout)
      expect(json.runs.map((r: { triggeredBy: string | null }) => r.triggeredBy)).toEqual(['alice', null])
      expect(worker.stdout()).not.toContain('ran 3')
    } finally {
      await stopProcess(worker.child)
    }
  })

  it('a replica killed inside a triggered run: the run reads abandoned once its lease lapsed, and is not run again', async () => {
    const name = fresh()
    const worker = replica(store(), name, { run: 2, lease: 2_000 })
    try {
      expect(await waitFor(() => worker.stdout().includes('ran 1'), 20_000), worker.stderr()).toBe(true)
      expect((await trigger(name, '--by', 'erin')).code).toBe(0)
      expect(await waitFor(() => worker.stdout().includes('ran 2'), 5_000)).toBe(true)
      // Past recordRunningAfter (1 s): the run is on record as running.
      await sleep(1_500)
    } finally {
      worker.child.kill('SIGKILL')
      await stopProcess(worker.child)
    }
    // The trigger was consumed when the run started: at most once, as a scheduled run.
    expect((await admin().inspector.get(triggerRecordName(name)))?.held ?? false).toBe(false)
    await sleep(2_500)
    const json = JSON.parse((await cli(['history', name, ...storeArgs(), '--json'])).stdout)
    expect(json.runs.map((r: { outcome: string; triggeredBy: string | null }) => [r.outcome, r.triggeredBy])).toEqual([
      ['abandoned', 'erin'],
      ['ok', null],
    ])
    const next = replica(store(), name)
    try {
      expect(await waitFor(() => next.stdout().includes('ran 1'), 20_000), next.stderr()).toBe(true)
      await sleep(1_000)
      expect(next.stdout()).not.toContain('ran 2')
    } finally {
      await stopProcess(next.child)
    }
  })

  it('no replica polls: exit 1 after --wait, saying so, and the trigger is withdrawn', async () => {
    const name = fresh()
    const run = await trigger(name, '--wait', '1s')
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(run.stderr).toBe(
      `shedlock trigger: no replica picked up the trigger of ${name} within 1s: no executor polls for triggers (createLockingTaskExecutor(provider, { triggers: { poll: '10s' } })) or every replica is down; the trigger was withdrawn\n`,
    )
    expect((await admin().inspector.get(triggerRecordName(name)))?.held ?? false).toBe(false)
  })

  it('a paused task is refused (exit 1), and no trigger is left', async () => {
    const name = fresh()
    expect((await cli(['pause', name, ...lockArgs(), '--by', 'dora'])).code).toBe(0)
    const run = await trigger(name)
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(run.stderr).toMatch(
      new RegExp(
        `^shedlock trigger: task "${name}" is paused by dora until \\S+: no replica runs it, .*shedlock resume ${name} first\\n$`,
      ),
    )
    expect(await admin().inspector.get(triggerRecordName(name))).toBeUndefined()
    expect((await cli(['resume', name, ...lockArgs()])).code).toBe(0)
  })

  it('--wait 0 leaves the trigger pending; a second trigger finds it and adds none (--json)', async () => {
    const name = fresh()
    const first = await trigger(name, '--wait', '0', '--by', 'bob')
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toMatch(new RegExp(`^triggered ${name}; not waiting: `))
    const second = await trigger(name, '--by', 'carol', '--json')
    expect(second.code, second.stderr).toBe(0)
    expect(JSON.parse(second.stdout)).toEqual({
      name,
      result: 'already-triggered',
      by: 'bob',
      node: null,
      afterMs: null,
    })
    const list = await cli(['list', ...lockArgs(), '--prefix', name, '--json'])
    expect(JSON.parse(list.stdout).locks).toMatchObject([{ name: triggerRecordName(name), state: 'triggered' }])
    const record = await admin().inspector.get(triggerRecordName(name))
    expect(record?.lockedBy).toMatch(/^triggered by bob:/)
    expect(await admin().inspector.release(record!)).toBe(true)
  })
}

const pool = await postgresPoolOrSkip(1)

describe.skipIf(!pool)('shedlock trigger on PostgreSQL', () => {
  const table = uniqueTable('cli_trigger')
  const store: Store = { url: POSTGRES_URL, table, runsTable: `${table}_runs` }
  let admin: StoreAdmin
  beforeAll(async () => {
    const init = await cli(['init', '--url', POSTGRES_URL, '--table', table, '--runs-table', store.runsTable!])
    expect(init.code, init.stderr).toBe(0)
    admin = await openStore(parseStoreUrl(POSTGRES_URL), { table, runsTable: store.runsTable })
  })
  afterAll(async () => {
    await admin?.close()
    await pool!.query(`DROP TABLE IF EXISTS ${table}`)
    await pool!.query(`DROP TABLE IF EXISTS ${store.runsTable}`)
    await pool!.end()
  })
  triggerCases(
    () => store,
    () => admin,
  )
})

const redis = await redisOrSkip()

describe.skipIf(!redis)('shedlock trigger on Redis', () => {
  const environment = `cli-trigger-${process.pid}-${randomBytes(3).toString('hex')}`
  const store: Store = { url: redisUrlIn(environment) }
  let admin: StoreAdmin
  beforeAll(async () => {
    admin = await openStore(parseStoreUrl(store.url))
  })
  afterAll(async () => {
    await admin?.close()
    await dropRedisEnvironment(redis!, environment)
    redis!.disconnect()
  })
  triggerCases(
    () => store,
    () => admin,
  )
})

describe('shedlock trigger on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-trigger-'))
  const store: Store = { url: `sqlite:${join(dir, 'locks.db')}` }
  let admin: StoreAdmin
  beforeAll(async () => {
    const init = await cli(['init', '--url', store.url])
    expect(init.code, init.stderr).toBe(0)
    admin = await openStore(parseStoreUrl(store.url))
  })
  afterAll(async () => {
    await admin?.close()
    rmSync(dir, { recursive: true, force: true })
  })
  triggerCases(
    () => store,
    () => admin,
  )
})

const memcachedUp = await portOpen(11211)

describe.skipIf(!memcachedUp)('a store that cannot hold a trigger', () => {
  it('memcached: trigger fails with the reason (exit 1), before writing anything', async () => {
    const run = await cli(['trigger', 'report', '--url', 'memcached://127.0.0.1:11211'])
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(run.stderr).toMatch(/^shedlock trigger: memcached cannot hold a trigger: its provider takes no holder name/)
  })
})
