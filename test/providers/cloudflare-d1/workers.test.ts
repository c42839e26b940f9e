import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { d1Schema } from '../../../src/providers/cloudflare-d1/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { loadMiniflare, type MiniflareInstance, type MiniflareWorkerOptions } from '../../helpers/miniflare.ts'

// The core and shedlock/cloudflare-d1 inside workerd: worker/worker.mjs, a Worker with a
// scheduled() handler that runs a task under the D1 provider, deployed as 8 Workers (8 isolates)
// in one Miniflare on one D1 database persisted to a temp dir. Cron Triggers are fired by hand.
//
// The Worker imports the built package (npm run build first), listed module by module: workerd
// loads ES modules as they are, and nodejs_compat gives the core its node: modules.

const root = fileURLToPath(new URL('../../../', import.meta.url))
const entry = fileURLToPath(new URL('./worker/worker.mjs', import.meta.url))
const PLAIN = ['p1', 'p2', 'p3', 'p4']
const SLOTTED = ['s1', 's2', 's3', 's4']

/** The Worker and every module of dist/ but the CLI's, as Miniflare takes them. */
function workerModules(): { type: 'ESModule'; path: string; contents: string }[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? e.name === 'cli'
          ? []
          : walk(join(dir, e.name))
        : e.name.endsWith('.js')
          ? [join(dir, e.name)]
          : [],
    )
  return [entry, ...walk(join(root, 'dist'))].map((path) => ({
    type: 'ESModule',
    path,
    contents: readFileSync(path, 'utf8'),
  }))
}

const workDir = mkdtempSync(join(tmpdir(), 'shedlock-d1-workers-'))
let mf: MiniflareInstance | undefined
afterAll(async () => {
  await mf?.dispose()
  rmSync(workDir, { recursive: true, force: true })
})

const ready = await connectOrSkip('miniflare', 'the miniflare package', async () => {
  const { Miniflare } = await loadMiniflare()
  const modules = workerModules()
  const worker = (name: string, slots: boolean): MiniflareWorkerOptions & { name: string } => ({
    name,
    modules,
    modulesRoot: root,
    // What the core needs of workerd: nodejs_compat, with a date from which node:os and
    // node:perf_hooks are on by default (2026-04-01 is the first tested).
    compatibilityDate: '2026-04-01',
    compatibilityFlags: ['nodejs_compat'],
    d1Databases: { DB: 'locks' },
    bindings: { NODE: name, HOLD_MS: '300', SLOTS: slots ? 'yes' : 'no', LOCK: slots ? 'slotted-cron' : 'plain-cron' },
  })
  mf = new Miniflare({
    workers: [...PLAIN.map((n) => worker(n, false)), ...SLOTTED.map((n) => worker(n, true))],
    d1Persist: join(workDir, 'd1'),
  })
  await mf.ready
  const db = await mf.getD1Database('DB', 'p1')
  await db.exec(d1Schema().replace(/\n/g, ' '))
  await db.exec('CREATE TABLE runs (tick TEXT NOT NULL, node TEXT NOT NULL)')
  await db.exec(
    'CREATE TABLE outcomes (tick TEXT NOT NULL, node TEXT NOT NULL, executed INTEGER NOT NULL, reason TEXT NOT NULL)',
  )
  return { db, worker: (name: string) => mf!.getWorker(name) }
})

const rows = async (sql: string, ...params: string[]): Promise<Record<string, unknown>[]> =>
  (
    await ready!.db
      .prepare(sql)
      .bind(...params)
      .all()
  ).results as Record<string, unknown>[]

describe.skipIf(!ready)(
  'the core and the D1 provider in workerd: a scheduled() Worker on 8 isolates, one D1 database',
  () => {
    it('each tick fired on 4 isolates at once runs the task on exactly one; the others skip it as held', async () => {
      const workers = await Promise.all(PLAIN.map((name) => ready!.worker(name)))
      const start = Date.now() + 60_000
      for (let i = 0; i < 3; i++) {
        const tick = new Date(start + i * 60_000)
        const outcomes = await Promise.all(workers.map((w) => w.scheduled({ scheduledTime: tick, cron: '* * * * *' })))
        expect(outcomes.map((o) => o.outcome)).toEqual(['ok', 'ok', 'ok', 'ok'])
        expect(await rows('SELECT node FROM runs WHERE tick = ?', tick.toISOString())).toHaveLength(1)
        const done = await rows(
          'SELECT node, executed, reason FROM outcomes WHERE tick = ? ORDER BY executed DESC',
          tick.toISOString(),
        )
        expect(done.map((o) => [o.executed, o.reason])).toEqual([
          [1, ''],
          [0, 'held'],
          [0, 'held'],
          [0, 'held'],
        ])
      }
      // The holder is the isolate that ran, under its own lockedBy.
      const [lock] = await rows(`SELECT locked_by FROM shedlock WHERE name = 'plain-cron'`)
      expect(String(lock?.locked_by)).toMatch(/^p[1-4]:/)
    }, 30_000)

    it('a slot (the trigger time) runs once, though its isolates fire it one after another', async () => {
      const workers = await Promise.all(SLOTTED.map((name) => ready!.worker(name)))
      const tick = new Date(Math.floor(Date.now() / 60_000) * 60_000)
      for (const w of workers)
        expect((await w.scheduled({ scheduledTime: tick, cron: '* * * * *' })).outcome).toBe('ok')
      expect(await rows('SELECT node FROM runs WHERE tick = ?', tick.toISOString())).toEqual([{ node: 's1' }])
      const done = await rows(
        'SELECT node, executed, reason FROM outcomes WHERE tick = ? ORDER BY node',
        tick.toISOString(),
      )
      expect(done.map((o) => [o.node, o.executed, o.reason])).toEqual([
        ['s1', 1, ''],
        ['s2', 0, 'slot-done'],
        ['s3', 0, 'slot-done'],
        ['s4', 0, 'slot-done'],
      ])
    }, 30_000)
  },
)
