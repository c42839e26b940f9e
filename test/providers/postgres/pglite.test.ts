import assert from 'node:assert/strict'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, lockConfiguration } from '../../../src/index.ts'
import {
  postgresLockInspector,
  postgresLockProvider,
  postgresRunLedger,
  postgresRunsSchema,
  postgresSchema,
} from '../../../src/providers/postgres/index.ts'
import { lockInspectorSuite, lockProviderSuite, runLedgerSuite } from '../../../src/testing/index.ts'
import { registerInspectorSuite, registerRunLedgerSuite, registerSuite } from '../../helpers/register-suite.ts'

// PGlite: PostgreSQL compiled to WebAssembly, in this process, with nothing to install or start.
// pglite-socket serves it over the wire protocol on a loopback port, so the provider talks to it
// through `pg` exactly as to a server. PGlite is one backend: the socket server queues the
// connections' queries and runs a transaction's statements together, so every pool connection
// sees the others' commits at once, as on a real server. It needs no service, so it never skips.

/** The pool's size: the socket server accepts at most `maxConnections` (1 by default); more get "Too many connections". */
const CONNECTIONS = 8
const NOW = `timezone('utc', statement_timestamp())`

// Started at import, not in a hook: the suites below take the pool when they are registered.
const db = await PGlite.create()
const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: CONNECTIONS })
await server.start()
// getServerConn() is host:port, with the port the system chose for port 0.
const [host, port] = server.getServerConn().split(':')
const pool = new pg.Pool({ host, port: Number(port), user: 'postgres', database: 'postgres', max: CONNECTIONS })

beforeAll(async () => {
  await pool.query(postgresSchema())
  await pool.query(postgresSchema({ tableName: 'shedlock_inspect' }))
  await pool.query(postgresSchema({ tableName: 'shedlock_ledger' }))
  await pool.query(postgresSchema({ tableName: 'shedlock_fenced', fencingTokens: true }))
  await pool.query(postgresRunsSchema())
})

afterAll(async () => {
  await pool.end()
  await server.stop()
  await db.close()
})

describe('postgres on PGlite (in-process, through pglite-socket and pg)', () => {
  it('is a real PostgreSQL (18), reached over TCP', async () => {
    const { rows } = await pool.query('SHOW server_version')
    expect(Number.parseInt(String(rows[0].server_version), 10)).toBeGreaterThanOrEqual(17)
  })

  for (const useDbTime of [true, false]) {
    describe(useDbTime ? 'database time' : 'app time', () => {
      registerSuite(
        lockProviderSuite({
          provider: () => postgresLockProvider({ client: pool, useDbTime }),
          isLocked: async (name) =>
            (await pool.query(`SELECT 1 FROM shedlock WHERE name = $1 AND lock_until > ${NOW}`, [name])).rowCount === 1,
          deleteRecord: async (name) => {
            await pool.query('DELETE FROM shedlock WHERE name = $1', [name])
          },
          unreachableProvider: () =>
            postgresLockProvider({
              client: new pg.Pool({
                connectionString: 'postgres://postgres@127.0.0.1:1/test',
                connectionTimeoutMillis: 2000,
              }),
            }),
          extensible: true,
          slots: { inspector: true, paired: true },
          maxNameLength: 64,
        }),
      )
    })
  }

  describe('fencing tokens', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => postgresLockProvider({ client: pool, tableName: 'shedlock_fenced', fencingTokens: true }),
        isLocked: async (name) =>
          (await pool.query(`SELECT 1 FROM shedlock_fenced WHERE name = $1 AND lock_until > ${NOW}`, [name]))
            .rowCount === 1,
        extensible: true,
        fencing: true,
      }).filter((c) => c.group === 'fencing'),
    )
  })

  describe('inspector', () => {
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => postgresLockProvider({ client: pool, tableName: 'shedlock_inspect' }),
        inspector: postgresLockInspector({ client: pool, tableName: 'shedlock_inspect' }),
      }),
    )
  })

  describe('run ledger', () => {
    registerRunLedgerSuite(
      runLedgerSuite({
        ledger: postgresRunLedger({ client: pool, keep: 5 }),
        keep: 5,
        provider: () => postgresLockProvider({ client: pool, tableName: 'shedlock_ledger' }),
      }),
    )
  })

  it(`${CONNECTIONS} contenders on ${CONNECTIONS} connections, 20 rounds: exactly one wins each round`, async () => {
    const provider = postgresLockProvider({ client: pool })
    for (let round = 0; round < 20; round++) {
      const name = `pglite-race-${round}`
      const results = await Promise.all(
        Array.from({ length: CONNECTIONS }, () => provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
      )
      const winners = results.filter((lock) => lock !== undefined)
      expect(winners.length, `round ${round}`).toBe(1)
      await winners[0]!.unlock()
    }
  })

  it("a lock taken inside another connection's open transaction is still decided on committed rows", async () => {
    // One client holds a transaction open; the socket server keeps its statements together, and the
    // provider's statements on the other connections wait for it instead of joining it.
    const provider = postgresLockProvider({ client: pool })
    const held = await provider.lock(lockConfiguration({ name: 'pglite-tx', lockAtMostFor: '1m' }))
    assert.ok(held)
    const client = await pool.connect()
    try {
      await client.query('BEGIN')
      await client.query(`UPDATE shedlock SET lock_until = ${NOW} WHERE name = 'pglite-tx'`)
      const contender = provider.lock(lockConfiguration({ name: 'pglite-tx', lockAtMostFor: '1m' }))
      await client.query('ROLLBACK')
      // The rolled-back release never happened: the lock is still held.
      expect(await contender).toBeUndefined()
    } finally {
      client.release()
    }
    await held.unlock()
  })

  it('an executor over the pool runs a task once among concurrent executors and releases the lock', async () => {
    const executors = Array.from({ length: 4 }, () => createLockingTaskExecutor(postgresLockProvider({ client: pool })))
    let runs = 0
    const outcomes = await Promise.all(
      executors.map((executor) =>
        executor.executeWithLock(
          async () => {
            runs++
            await new Promise((resolve) => setTimeout(resolve, 50))
          },
          { name: 'pglite-executor', lockAtMostFor: '1m' },
        ),
      ),
    )
    expect(runs).toBe(1)
    expect(outcomes.filter((o) => o.executed)).toHaveLength(1)
    const { rows } = await pool.query(
      `SELECT lock_until <= ${NOW} AS free FROM shedlock WHERE name = 'pglite-executor'`,
    )
    expect(rows).toEqual([{ free: true }])
  })
})
