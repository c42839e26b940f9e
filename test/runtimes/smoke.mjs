// Smoke test of the BUILT package (dist, through the package's own exports) on Bun, Deno or Node:
// the executor with a lock on SQLite (bun:sqlite on Bun, node:sqlite on Deno and on Node >= 22.13,
// else libsql), PostgreSQL through pg, and Redis through ioredis and node-redis. Against each store it checks
// real behaviour: one winner of 8 concurrent executors, the release, lockAtLeastFor, extend, the
// inspector, and that an unreachable store rejects without running the task. Exits 1 on the first
// failure, 0 when all pass; prints one line per check.
//
//   npm run build && bun test/runtimes/smoke.mjs
//   npm run build && deno run -A test/runtimes/smoke.mjs
//   npm run build && node test/runtimes/smoke.mjs
//
// Plain JavaScript, so that every runtime runs the same file without a TypeScript step of its
// own. The stores are the CI machine's (SHEDLOCK_POSTGRES_URL, SHEDLOCK_REDIS_URL override them);
// names are unique to this run and removed at the end.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
// Self-references: the package's exports map, resolved by the runtime, onto dist/.
import { createLockingTaskExecutor, LockProviderError, lockConfiguration } from 'shedlock'
import { postgresLockProvider, postgresSchema } from 'shedlock/postgres'
import { redisLockProvider } from 'shedlock/redis'
import { sqliteLockProvider, sqliteSchema } from 'shedlock/sqlite'

const runtime = globalThis.Bun
  ? `bun ${globalThis.Bun.version}`
  : globalThis.Deno
    ? `deno ${globalThis.Deno.version.deno}`
    : `node ${process.versions.node}`
const run = `smoke_${runtime.split(' ')[0]}_${process.pid}_${Math.floor(Math.random() * 1e6).toString(36)}`
const POSTGRES_URL = process.env.SHEDLOCK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS_URL = process.env.SHEDLOCK_REDIS_URL ?? 'redis://127.0.0.1:6379'

let checks = 0
const started = Date.now()
async function check(title, body) {
  const at = Date.now()
  try {
    await body()
  } catch (error) {
    console.error(`FAIL ${runtime}: ${title}\n`, error)
    process.exit(1)
  }
  checks++
  console.log(`ok ${runtime}: ${title} (${Date.now() - at} ms)`)
}

/**
 * The same checks on every store. `providers` are two providers over the store (two "nodes":
 * two connections where the store has them); `unreachable` is a provider whose store is down.
 */
async function lockChecks(store, providers, unreachable) {
  const name = `${run}_${store}`
  await check(`${store}: one of 8 concurrent executors runs the task, the other 7 skip it (held)`, async () => {
    const executors = Array.from({ length: 8 }, (_, i) => createLockingTaskExecutor(providers[i % providers.length]))
    let running = 0
    let runs = 0
    const outcomes = await Promise.all(
      executors.map((executor) =>
        executor.executeWithLock(
          async () => {
            runs++
            assert.equal(++running, 1, 'two tasks ran at once')
            await sleep(200)
            running--
            return 'done'
          },
          { name: `${name}_race`, lockAtMostFor: '30s' },
        ),
      ),
    )
    assert.equal(runs, 1)
    assert.deepEqual(
      outcomes.filter((o) => o.executed),
      [{ executed: true, result: 'done' }],
    )
    assert.deepEqual(new Set(outcomes.filter((o) => !o.executed).map((o) => o.reason)), new Set(['held']))
  })

  await check(`${store}: the lock is released when the task ends; another node then runs it`, async () => {
    const [a, b] = [createLockingTaskExecutor(providers[0]), createLockingTaskExecutor(providers.at(-1))]
    assert.equal(
      (await a.executeWithLock(async () => 1, { name: `${name}_release`, lockAtMostFor: '30s' })).executed,
      true,
    )
    assert.equal(
      (await b.executeWithLock(async () => 2, { name: `${name}_release`, lockAtMostFor: '30s' })).executed,
      true,
    )
  })

  await check(`${store}: lockAtLeastFor keeps the lock after the task until it passes`, async () => {
    const [a, b] = [createLockingTaskExecutor(providers[0]), createLockingTaskExecutor(providers.at(-1))]
    const options = { name: `${name}_least`, lockAtMostFor: '30s', lockAtLeastFor: '700ms' }
    assert.equal((await a.executeWithLock(async () => 1, options)).executed, true)
    assert.deepEqual(await b.executeWithLock(async () => 2, options), { executed: false, reason: 'held' })
    await sleep(900)
    assert.equal((await b.executeWithLock(async () => 3, options)).executed, true)
  })

  await check(`${store}: a held lock extends, stays held against another node, and is free after unlock`, async () => {
    const config = () => lockConfiguration({ name: `${name}_extend`, lockAtMostFor: '30s' })
    const lock = await providers[0].lock(config())
    assert.ok(lock, 'not acquired')
    const extended = await lock.extend('1m', 0)
    assert.ok(extended, 'not extended')
    assert.equal(await providers.at(-1).lock(config()), undefined)
    await extended.unlock()
    const next = await providers.at(-1).lock(config())
    assert.ok(next, 'not free after unlock')
    await next.unlock()
  })

  await check(`${store}: the inspector lists the locks of this run`, async () => {
    const inspector = providers[0].inspector?.()
    assert.ok(inspector, 'no inspector')
    const held = await providers[0].lock(lockConfiguration({ name: `${name}_listed`, lockAtMostFor: '30s' }))
    assert.ok(held)
    const record = await inspector.get(`${name}_listed`)
    assert.equal(record?.held, true)
    await held.unlock()
  })

  await check(`${store}: an unreachable store rejects with LockProviderError and the task does not run`, async () => {
    let ran = false
    const error = await createLockingTaskExecutor(unreachable)
      .executeWithLock(
        async () => {
          ran = true
        },
        { name: `${name}_down`, lockAtMostFor: '30s' },
      )
      .then(
        () => undefined,
        (e) => e,
      )
    assert.ok(error instanceof LockProviderError, `expected LockProviderError, got ${error}`)
    assert.equal(ran, false)
  })
}

// ---- SQLite: the runtime's own driver ----

/** Opens a file with this runtime's SQLite: bun:sqlite, node:sqlite, or libsql on Node 20. */
async function openSqlite(file) {
  if (globalThis.Bun) {
    const { Database } = await import('bun:sqlite')
    const db = new Database(file)
    db.exec('PRAGMA busy_timeout = 5000')
    return { driver: 'bun:sqlite', db }
  }
  const builtin = await import('node:sqlite').catch(() => undefined)
  if (builtin?.DatabaseSync) {
    const db = new builtin.DatabaseSync(file)
    db.exec('PRAGMA busy_timeout = 5000')
    return { driver: 'node:sqlite', db }
  }
  const { default: Database } = await import('libsql')
  return { driver: 'libsql', db: new Database(file, { timeout: 5000 }) }
}

const dir = mkdtempSync(join(tmpdir(), 'shedlock-smoke-'))
try {
  const file = join(dir, 'locks.db')
  const first = await openSqlite(file)
  first.db.exec('PRAGMA journal_mode = WAL')
  first.db.exec(sqliteSchema())
  const second = await openSqlite(file)
  // A connection closed before use: the provider's "store down".
  const closed = await openSqlite(join(dir, 'closed.db'))
  closed.db.close()
  console.log(`${runtime}: SQLite through ${first.driver}`)
  await lockChecks(
    `sqlite (${first.driver})`,
    [sqliteLockProvider({ database: first.db }), sqliteLockProvider({ database: second.db })],
    sqliteLockProvider({ database: closed.db }),
  )
  first.db.close()
  second.db.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}

// ---- PostgreSQL through pg ----

{
  const { default: pg } = await import('pg')
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 })
  const table = `${run}_locks`
  const down = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test', connectionTimeoutMillis: 2000 })
  try {
    await pool.query(postgresSchema({ tableName: table }))
    // Both on database time: a lock released on database time (microseconds) and then tried on app
    // time (milliseconds, truncated) within the same millisecond looks held for up to 1 ms more.
    const providers = [
      postgresLockProvider({ client: pool, tableName: table }),
      postgresLockProvider({ client: pool, tableName: table }),
    ]
    await lockChecks('postgres (pg)', providers, postgresLockProvider({ client: down, tableName: table }))
  } finally {
    await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => {})
    await pool.end()
    await down.end()
  }
}

// ---- Redis through ioredis ----

{
  const { Redis } = await import('ioredis')
  const clients = [new Redis(REDIS_URL), new Redis(REDIS_URL)]
  // Fails fast instead of queueing commands while it reconnects.
  const down = new Redis({
    port: 1,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  })
  down.on('error', () => {})
  try {
    const providers = clients.map((client) => redisLockProvider({ client, environment: run }))
    await lockChecks('redis (ioredis)', providers, redisLockProvider({ client: down, environment: run, timeout: 2000 }))
  } finally {
    const keys = await clients[0].keys(`job-lock:${run}:*`)
    if (keys.length > 0) await clients[0].del(...keys)
    for (const client of clients) client.disconnect()
    down.disconnect()
  }
}

// ---- Redis through node-redis ----

{
  const { createClient } = await import('redis')
  const clients = [createClient({ url: REDIS_URL }), createClient({ url: REDIS_URL })]
  // node-redis crashes the process on a dropped connection without an 'error' listener.
  for (const client of clients) client.on('error', () => {})
  await Promise.all(clients.map((client) => client.connect()))
  const down = createClient({ socket: { port: 1, reconnectStrategy: false } })
  down.on('error', () => {})
  try {
    const environment = `${run}nr`
    const providers = clients.map((client) => redisLockProvider({ client, environment }))
    await lockChecks('redis (node-redis)', providers, redisLockProvider({ client: down, environment, timeout: 2000 }))
  } finally {
    const keys = await clients[0].keys(`job-lock:${run}nr:*`)
    if (keys.length > 0) await clients[0].del(keys)
    for (const client of clients) await client.quit()
  }
}

console.log(`${runtime}: all ${checks} checks passed in ${Date.now() - started} ms`)
// Deno keeps the process alive for sockets that a driver leaves referenced; the checks are done.
process.exit(0)
