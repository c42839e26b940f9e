import { mkdtempSync, rmSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  d1FencingColumnDdl,
  d1LockInspector,
  d1LockProvider,
  d1Schema,
} from '../../../src/providers/cloudflare-d1/index.ts'
import { lockInspectorSuite, lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { loadMiniflare, type MiniflareInstance } from '../../helpers/miniflare.ts'
import { registerInspectorSuite, registerSuite } from '../../helpers/register-suite.ts'

// D1 as Miniflare runs it: a workerd process holding the database, and a D1 binding in Node
// that proxies each call to it (one round trip per statement, as from a Worker to D1).

const NOW = `strftime('%Y-%m-%d %H:%M:%f', 'now')`
const TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$/
// The tests reach D1 through this Worker's fetch handler (one JSON statement a request), not
// Miniflare's proxy of the binding: that proxy frees workerd-side objects as Node collects
// garbage, and in CI lost the binding mid-file, after which every call failed its heap assertion
// ("false == true", 30 tests).
const SCRIPT = `export default {
  async fetch(request, env) {
    const { sql, params, method } = await request.json()
    try {
      const result = method === 'exec' ? await env.DB.exec(sql) : await env.DB.prepare(sql).bind(...params)[method]()
      return Response.json({ result })
    } catch (error) {
      return Response.json({ error: String(error && error.message || error) }, { status: 500 })
    }
  },
}`

const workDir = mkdtempSync(join(tmpdir(), 'shedlock-d1-'))
const instances: MiniflareInstance[] = []
afterAll(async () => {
  await Promise.all(instances.map((mf) => mf.dispose()))
  rmSync(workDir, { recursive: true, force: true })
})

const started = await connectOrSkip('miniflare', 'the miniflare package', async () => {
  const { Miniflare } = await loadMiniflare()
  /** A workerd process; `persist`: on the database file the others share, else in memory. */
  const start = async (persist = true): Promise<MiniflareInstance> => {
    const mf = new Miniflare({
      modules: true,
      script: SCRIPT,
      compatibilityDate: '2026-04-01',
      d1Databases: ['DB'],
      d1Persist: persist ? join(workDir, 'd1') : false,
    })
    instances.push(mf)
    await mf.ready
    return mf
  }
  const mf = await start()
  return { Miniflare, start, db: d1Of(mf) }
})

type Db = Awaited<ReturnType<MiniflareInstance['getD1Database']>>
const db = started?.db as Db

/** The DB binding of `mf` as the provider calls it, over `mf.dispatchFetch()`. */
function d1Of(mf: MiniflareInstance): Db {
  const call = async (body: { sql: string; params?: string[]; method: string }): Promise<never> => {
    const response = await mf.dispatchFetch('http://d1.invalid/', { method: 'POST', body: JSON.stringify(body) })
    const reply = (await response.json()) as { result?: unknown; error?: string }
    if (response.status !== 200) throw new Error(reply.error)
    return reply.result as never
  }
  const statement = (sql: string, params: string[] = []) => ({
    bind: (...values: string[]) => statement(sql, values),
    run: () => call({ sql, params, method: 'run' }),
    all: () => call({ sql, params, method: 'all' }),
  })
  return { prepare: (sql: string) => statement(sql), exec: (sql: string) => call({ sql, method: 'exec' }) }
}

const row = async (name: string, table = 'shedlock'): Promise<Record<string, unknown> | undefined> =>
  (
    await db
      .prepare(`SELECT lock_until, locked_at, locked_by, lock_until > ${NOW} AS held FROM ${table} WHERE name = ?`)
      .bind(name)
      .all()
  ).results[0] as Record<string, unknown> | undefined

describe.skipIf(!started)('d1LockProvider (Miniflare D1)', () => {
  beforeAll(async () => {
    await db.exec(d1Schema().replace(/\n/g, ' '))
  })

  for (const useDbTime of [true, false]) {
    describe(useDbTime ? 'with database time' : 'with app time', () => {
      const cases = lockProviderSuite({
        provider: () => d1LockProvider({ database: db, useDbTime }),
        isLocked: async (name) => (await row(name))?.held === 1,
        deleteRecord: async (name) => {
          await db.prepare('DELETE FROM shedlock WHERE name = ?').bind(name).run()
        },
        // A binding of an instance disposed after the provider was made: every call rejects.
        unreachableProvider: async () => {
          const gone = await started!.start(false)
          const provider = d1LockProvider({ database: d1Of(gone), useDbTime })
          await gone.dispose()
          instances.splice(instances.indexOf(gone), 1)
          return provider
        },
        extensible: true,
        slots: { inspector: true },
        fuzzIterations: 5,
      })
      // The statements differ between the two only in where their times come from: app time runs
      // the groups that check times, to keep this file well under a minute.
      registerSuite(
        useDbTime ? cases : cases.filter((c) => ['basic', 'extension', 'ownership', 'record'].includes(c.group)),
      )
    })
  }

  describe('with fencing tokens', () => {
    const table = 'shedlock_fenced'
    beforeAll(async () => {
      await db.exec(d1Schema({ tableName: table, fencingTokens: true }).replace(/\n/g, ' '))
    })
    // The token is the acquire statement's RETURNING row: the groups that acquire, expire and race.
    registerSuite(
      lockProviderSuite({
        provider: () => d1LockProvider({ database: db, tableName: table, fencingTokens: true }),
        isLocked: async (name) => (await row(name, table))?.held === 1,
        deleteRecord: async (name) => {
          await db.prepare(`DELETE FROM ${table} WHERE name = ?`).bind(name).run()
        },
        extensible: true,
        fencing: true,
        fuzzIterations: 5,
      }).filter((c) => ['basic', 'record', 'fencing'].includes(c.group)),
    )

    it('a table without the fencing_token column: every acquire rejects with LockProviderError giving the ALTER TABLE', async () => {
      const error = await d1LockProvider({ database: db, fencingTokens: true })
        .lock(lockConfiguration({ name: 'no-fencing-column', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('could not acquire lock "no-fencing-column"')
      expect((error as Error).message).toContain('ALTER TABLE shedlock ADD COLUMN fencing_token INTEGER NULL;')
      // What the error says to run makes the same provider work.
      const scratch = 'shedlock_fenced_later'
      await db.exec(d1Schema({ tableName: scratch }).replace(/\n/g, ' '))
      await db.exec(d1FencingColumnDdl({ tableName: scratch }))
      const lock = await d1LockProvider({ database: db, tableName: scratch, fencingTokens: true }).lock(
        lockConfiguration({ name: 'no-fencing-column', lockAtMostFor: '1m' }),
      )
      // A new row's token starts above the floor: the clock in milliseconds times 1000.
      expect(lock!.fencingToken! > BigInt(Date.now() - 60_000) * 1000n).toBe(true)
    })
  })

  describe('inspector', () => {
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => d1LockProvider({ database: db }),
        inspector: d1LockInspector({ database: db }),
      }),
    )
  })

  it("writes Java ShedLock's row: UTC text times and a locked_by that starts with the host name", async () => {
    const name = `d1-format-${Date.now()}`
    const lock = await d1LockProvider({ database: db }).lock(lockConfiguration({ name, lockAtMostFor: '1h' }))
    expect(lock).toBeDefined()
    const found = await row(name)
    expect(found?.lock_until).toMatch(TIMESTAMP)
    expect(found?.locked_at).toMatch(TIMESTAMP)
    expect(String(found?.locked_by).startsWith(`${hostname()}:${process.pid}:`)).toBe(true)
    const ms = (text: unknown): number => Date.parse(`${String(text).replace(' ', 'T')}Z`)
    expect(Math.abs(ms(found?.lock_until) - ms(found?.locked_at) - 3_600_000)).toBeLessThan(1_000)
    await lock!.unlock()
  })

  it('honours a row written by hand in the layout Java ShedLock writes (a held one is not taken, an expired one is)', async () => {
    const name = `d1-java-${Date.now()}`
    await db
      .prepare(
        `INSERT INTO shedlock (name, lock_until, locked_at, locked_by) VALUES (?, strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour'), ${NOW}, 'java-host')`,
      )
      .bind(name)
      .run()
    expect(
      await d1LockProvider({ database: db }).lock(lockConfiguration({ name, lockAtMostFor: '1m' })),
    ).toBeUndefined()
    await db
      .prepare(`UPDATE shedlock SET lock_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 second') WHERE name = ?`)
      .bind(name)
      .run()
    const lock = await d1LockProvider({ database: db }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(lock).toBeDefined()
    await lock!.unlock()
  })

  it('a lock held when workerd stops is still held after a restart on the persisted database, and its holder cannot touch the new one', async () => {
    const name = `d1-restart-${Date.now()}`
    const first = await started!.start()
    const lock = await d1LockProvider({ database: d1Of(first) }).lock(lockConfiguration({ name, lockAtMostFor: 1_500 }))
    expect(lock).toBeDefined()
    await first.dispose()
    instances.splice(instances.indexOf(first), 1)
    const second = await started!.start()
    const again = d1Of(second)
    expect(
      await d1LockProvider({ database: again }).lock(lockConfiguration({ name, lockAtMostFor: '1m' })),
    ).toBeUndefined()
    // The dead instance's handle fails, and changes nothing.
    await expect(lock!.unlock()).rejects.toThrow(LockProviderError)
    await new Promise((resolve) => setTimeout(resolve, 1_600))
    const next = await d1LockProvider({ database: again }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(next).toBeDefined()
    await next!.unlock()
  })

  it('a missing table rejects with LockProviderError naming the lock and giving the DDL', async () => {
    const provider = d1LockProvider({ database: db, tableName: 'no_such_locks' })
    const error = await provider
      .lock(lockConfiguration({ name: 'd1-missing-table', lockAtMostFor: '1m' }))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toContain(
      'cloudflare-d1: could not acquire lock "d1-missing-table": table no_such_locks does not exist',
    )
    expect((error as Error).message).toContain('CREATE TABLE IF NOT EXISTS no_such_locks')
  })

  it('rejects what is not a D1 binding, and bad table names, with LockConfigurationError', () => {
    expect(() => d1LockProvider({ database: {} as never })).toThrow(LockConfigurationError)
    expect(() => d1LockProvider({ database: undefined as never })).toThrow(/pass your D1 binding as \{ database \}/)
    expect(() => d1LockInspector({ database: null as never })).toThrow(LockConfigurationError)
    expect(() => d1LockProvider({ database: db, tableName: 'locks; DROP TABLE x' })).toThrow(
      /not a plain SQL identifier/,
    )
  })
})
