// docs/fencing.md's resource-side checks, run as the page shows them: the SQL on PostgreSQL, the
// Lua script on Redis, the HTTP server in this process. The TypeScript blocks are type-checked
// with every other block of the docs (test/package/consumer.test.ts).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import ts from 'typescript'
import { afterAll, describe, expect, it } from 'vitest'
import { REDIS_URL, redisOrSkip } from '../helpers/kv-clients.ts'
import { postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { STORES } from '../../src/providers/registry.ts'

const page = readFileSync(fileURLToPath(new URL('../../docs/fencing.md', import.meta.url)), 'utf8')

/** The code blocks of the page in `language`, in order. */
function blocks(language: string): string[] {
  return [...page.matchAll(/^```(\w+)[^\n]*\n([\s\S]*?)^```$/gm)].filter((m) => m[1] === language).map((m) => m[2]!)
}

/** The statements of a SQL block. */
const statements = (sql: string): string[] =>
  sql
    .split(/;\s*$/m)
    .map((s) => s.trim())
    .filter(Boolean)

describe('docs/fencing.md', () => {
  it('has the blocks this test runs: three SQL, one Lua, one HTTP server', () => {
    expect(blocks('sql')).toHaveLength(3)
    expect(blocks('lua')).toHaveLength(1)
    expect(blocks('ts').filter((code) => code.includes('createServer('))).toHaveLength(1)
  })

  it('has a row for every store in its per-store table', () => {
    const table = page.slice(page.indexOf('## Per store'))
    const rows = table.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| store'))
    for (const store of STORES) {
      const names = [store.title, ...store.title.split(/[ /,]+/)]
      expect(
        rows.some((row) => names.some((name) => name.length >= 2 && row.split('|')[1]!.includes(name))),
        `no row for ${store.title}`,
      ).toBe(true)
    }
  })
})

const pool = await postgresPoolOrSkip(3)
const schema = `fencing_doc_${process.pid}_${Date.now()}`
afterAll(async () => {
  await pool?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  await pool?.end()
})

describe.skipIf(!pool)('the SQL checks, on PostgreSQL', () => {
  const [table, upsert, fences] = blocks('sql') as [string, string, string]

  /** A client of the pool in the test's schema. */
  async function client() {
    const connection = await pool!.connect()
    await connection.query(`SET search_path TO ${schema}`)
    return connection
  }

  it('the table and its upsert: a greater or equal token writes, a lower one is refused, beyond 2^53 too', async () => {
    await pool!.query(`CREATE SCHEMA ${schema}`)
    const db = await client()
    try {
      await db.query(table)
      const write = async (token: string, body: string): Promise<number | null> =>
        (await db.query(upsert.replace(/;\s*$/, ''), ['daily', token, body])).rowCount
      expect(await write('5', 'first')).toBe(1)
      expect(await write('3', 'stale')).toBe(0)
      expect(await write('5', 'the same acquisition again')).toBe(1)
      expect(await write('7', 'next')).toBe(1)
      expect(await write('9007199254740993', 'big')).toBe(1)
      expect(await write('9007199254740992', 'stale big')).toBe(0)
      const { rows } = await db.query('SELECT fence::text, body FROM report')
      expect(rows).toEqual([{ fence: '9007199254740993', body: 'big' }])
    } finally {
      db.release()
    }
  })

  it('the fence row of a transaction: a greater token waits for the holder of the row, a lower one is refused', async () => {
    const [create, guard] = statements(fences) as [string, string]
    const [a, b] = [await client(), await client()]
    try {
      await a.query(create)
      await a.query('BEGIN')
      expect((await a.query(guard, ['report', '2'])).rowCount).toBe(1)
      await b.query('BEGIN')
      let bDone = false
      const bGuard = b.query(guard, ['report', '3']).then((result) => {
        bDone = true
        return result
      })
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(bDone).toBe(false)
      await a.query('COMMIT')
      expect((await bGuard).rowCount).toBe(1)
      await b.query('COMMIT')
      await a.query('BEGIN')
      expect((await a.query(guard, ['report', '2'])).rowCount).toBe(0)
      await a.query('ROLLBACK')
      const { rows } = await a.query('SELECT resource, token::text FROM fences')
      expect(rows).toEqual([{ resource: 'report', token: '3' }])
    } finally {
      a.release()
      b.release()
    }
  })
})

const redis = await redisOrSkip()
const key = `fencing-doc:${process.pid}:${Date.now()}`
afterAll(async () => {
  await redis?.del(key)
  redis?.disconnect()
})

describe.skipIf(!redis)(`the Redis script (${REDIS_URL})`, () => {
  it('writes with a greater or equal token, refuses a lower one, compares 20-digit tokens exactly', async () => {
    const [script] = blocks('lua') as [string]
    const write = async (token: string, value: string) => redis!.eval(script, 1, key, token, value)
    expect(await write('5', 'first')).toBe(1)
    expect(await write('3', 'stale')).toBe(0)
    expect(await write('5', 'again')).toBe(1)
    expect(await write('10', 'ten')).toBe(1)
    expect(await write('9', 'stale')).toBe(0)
    expect(await write('18446744073709551615', 'max')).toBe(1)
    expect(await write('18446744073709551614', 'stale')).toBe(0)
    expect(await redis!.hgetall(key)).toEqual({ fence: '18446744073709551615', value: 'max' })
  })
})

describe('the HTTP server', () => {
  const folder = mkdtempSync(join(tmpdir(), 'shedlock-fencing-doc-'))
  afterAll(() => rmSync(folder, { recursive: true, force: true }))

  it('answers 204 to a greater or equal token, 409 to a lower one, 400 without one; per resource', async () => {
    const [code] = blocks('ts').filter((block) => block.includes('createServer('))
    const js = ts.transpileModule(`${code}\nexport { server }\n`, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText
    const file = join(folder, 'server.mjs')
    writeFileSync(file, js)
    const before = process.env.PORT
    process.env.PORT = '0'
    let server: Server
    try {
      ;({ server } = (await import(pathToFileURL(file).href)) as { server: Server })
    } finally {
      if (before === undefined) delete process.env.PORT
      else process.env.PORT = before
    }
    try {
      if (!server.listening) await new Promise((resolve) => server.once('listening', resolve))
      const { port } = server.address() as AddressInfo
      const put = async (path: string, token?: string): Promise<number> =>
        (
          await fetch(`http://127.0.0.1:${port}${path}`, {
            method: 'PUT',
            headers: token === undefined ? {} : { 'fencing-token': token },
            body: 'the report',
          })
        ).status
      expect(await put('/reports/daily', '5')).toBe(204)
      expect(await put('/reports/daily', '3')).toBe(409)
      expect(await put('/reports/daily', '5')).toBe(204)
      expect(await put('/reports/daily', '12345678901234567890')).toBe(204)
      expect(await put('/reports/daily', '12345678901234567889')).toBe(409)
      expect(await put('/reports/daily')).toBe(400)
      expect(await put('/reports/daily', '-1')).toBe(400)
      expect(await put('/reports/other', '1')).toBe(204)
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
