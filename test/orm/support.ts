import { setTimeout as sleep } from 'node:timers/promises'
import type mysql from 'mysql2/promise'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ExtensibleLockProvider,
  LockConfigurationError,
  LockProviderError,
  type LockProvider,
  lockConfiguration,
  type SimpleLock,
} from '../../src/index.ts'
import { mysqlSchema } from '../../src/providers/mysql/index.ts'
import { postgresSchema } from '../../src/providers/postgres/index.ts'
import { lockProviderSuite } from '../../src/testing/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { registerSuite } from '../helpers/register-suite.ts'
import { mysqlPoolOrSkip, postgresPoolOrSkip } from '../helpers/sql-pools.ts'

// The tests every ORM adapter passes, on PostgreSQL and on MySQL/MariaDB: the provider
// conformance suite, the transaction tests (a lock taken inside the caller's ORM transaction is
// visible at once from another connection and survives its rollback; a transaction handle is
// refused or escaped), and a fuzz where every worker runs inside its own ORM transaction.

export type Dialect = 'postgres' | 'mysql'

/** What one adapter's test file gives, for one dialect. */
export interface OrmHarness {
  /** The provider over the root instance, on `table`; `fencingTokens` passed through as the option. */
  provider(table: string, fencingTokens?: boolean): ExtensibleLockProvider
  /**
   * Runs `body` inside a transaction of the ORM's, begun on the root instance, and commits it
   * (or rolls it back when `body` throws). `read`/`write` run in that transaction; `handle` is
   * the library's transaction handle.
   */
  transaction<T>(
    body: (tx: {
      handle: unknown
      read(sql: string): Promise<number>
      write(sql: string): Promise<void>
    }) => Promise<T>,
  ): Promise<T>
  /**
   * The provider over the transaction handle: rejects with LockConfigurationError, or (`escapes`)
   * works outside the transaction.
   */
  fromHandle: { escapes: boolean; provider(handle: unknown, table: string): LockProvider }
  /** A provider over an instance of the same library whose database is unreachable (port 1): enables the suite's dead-store case. */
  unreachable?(table: string): LockProvider
  close(): Promise<void>
}

/** A handle of the library's that binds statements to one connection or to a transaction. */
export interface BoundHandle {
  /** What it is, for the test's name: `the db of db.connection().execute()`. */
  what: string
  /** `true`: the adapter runs the lock on a pooled connection of its own; `false`: it refuses the handle (at once or on `lock()`). */
  escapes: boolean
  /** Opens a transaction on the handle (of the instance `setup` made), runs `body` with the handle while it is open, then rolls it back. */
  inTransaction(body: (handle: unknown) => Promise<void>): Promise<void>
  /** The adapter over the handle. */
  provider(handle: unknown, table: string): LockProvider
}

/** Registers the adapter's tests for `dialect`, `setup` making the ORM instance once the database answers. */
export async function ormTests(
  library: string,
  dialect: Dialect,
  setup: () => Promise<OrmHarness>,
  {
    deadStore = false,
    boundHandles = [],
    paired = dialect === 'postgres',
  }: { deadStore?: boolean; boundHandles?: BoundHandle[]; paired?: boolean } = {},
): Promise<void> {
  const pool = dialect === 'postgres' ? await postgresPoolOrSkip(4) : await mysqlPoolOrSkip(4)
  // Concurrent: the cases mostly sleep (expiry, lockAtLeastFor), and use names of their own.
  describe.skipIf(!pool).concurrent(`${library} on ${dialect}`, () => {
    const q =
      dialect === 'postgres'
        ? (sql: string, values: unknown[] = []) =>
            (pool as pg.Pool).query(numbered(sql), values).then((r) => r.rows as Record<string, unknown>[])
        : (sql: string, values: unknown[] = []) =>
            (pool as mysql.Pool).query(sql, values).then(([r]) => r as Record<string, unknown>[])
    const now = dialect === 'postgres' ? `timezone('utc', statement_timestamp())` : 'UTC_TIMESTAMP(3)'
    const table = uniqueTable(`shedlock_orm_${library}`)
    const fenced = `${table}_f`
    const counters = `${table}_n`
    let orm: OrmHarness
    beforeAll(async () => {
      await q(dialect === 'postgres' ? postgresSchema({ tableName: table }) : mysqlSchema({ tableName: table }))
      await q(`CREATE TABLE ${counters} (id INT PRIMARY KEY, n INT NOT NULL)`)
      const schema = dialect === 'postgres' ? postgresSchema : mysqlSchema
      await q(schema({ tableName: fenced, fencingTokens: true }))
      orm = await setup()
    })
    afterAll(async () => {
      await orm?.close()
      await q(`DROP TABLE IF EXISTS ${table}`)
      await q(`DROP TABLE IF EXISTS ${counters}`)
      await q(`DROP TABLE IF EXISTS ${fenced}`)
      await pool!.end()
    })
    const isLocked = async (name: string): Promise<boolean> =>
      (await q(`SELECT 1 AS x FROM ${table} WHERE name = ? AND lock_until > ${now}`, [name])).length === 1

    registerSuite(
      lockProviderSuite({
        provider: () => orm.provider(table),
        isLocked,
        deleteRecord: async (name) => {
          await q(`DELETE FROM ${table} WHERE name = ?`, [name])
        },
        ...(deadStore ? { unreachableProvider: () => orm.unreachable!(table) } : {}),
        extensible: true,
        // The PostgreSQL provider takes a slot's record and its task's lock in one statement, as
        // the MySQL one does on MariaDB over a mysql2 pool (not over the ORMs' own queries).
        slots: { inspector: true, paired },
        maxNameLength: 64,
        fuzzIterations: 10,
      }),
    )

    // fencingTokens passes through to the provider, whose token comes back through the ORM's raw
    // query: PostgreSQL's RETURNING row, MySQL's insertId (Prisma, without it: a SELECT).
    describe('fencing tokens', () => {
      registerSuite(
        lockProviderSuite({
          provider: () => orm.provider(fenced, true),
          isLocked: async (name) =>
            (await q(`SELECT 1 AS x FROM ${fenced} WHERE name = ? AND lock_until > ${now}`, [name])).length === 1,
          extensible: true,
          fencing: true,
        }).filter((c) => c.group === 'fencing'),
      )
    })

    it('a missing table rejects with LockProviderError that gives its DDL, as the plain provider does', async () => {
      const missing = `${table}_missing`
      const error = await orm
        .provider(missing)
        .lock(lockConfiguration({ name: 'no-table', lockAtMostFor: '1m' }))
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(LockProviderError)
      expect(String((error as Error).message)).toContain(`CREATE TABLE IF NOT EXISTS ${missing}`)
    })

    describe('never inside the caller transaction', () => {
      it('a lock taken inside an ORM transaction is visible at once from another connection and still held after the transaction rolls back', async () => {
        const provider = orm.provider(table)
        const name = `tx-rollback-${Math.random()}`
        const seen: boolean[] = []
        await expect(
          orm.transaction(async (tx) => {
            await tx.read(`SELECT COUNT(*) AS n FROM ${counters}`)
            const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
            seen.push(lock !== undefined, await isLocked(name))
            throw new Error('roll back')
          }),
        ).rejects.toThrow('roll back')
        expect(seen).toEqual([true, true])
        expect(await isLocked(name)).toBe(true)
        expect(await orm.provider(table).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
      })

      it('a release inside an ORM transaction is visible at once and survives its rollback', async () => {
        const provider = orm.provider(table)
        const name = `tx-release-${Math.random()}`
        const lock = (await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })))!
        await expect(
          orm.transaction(async () => {
            await lock.unlock()
            expect(await isLocked(name)).toBe(false)
            throw new Error('roll back')
          }),
        ).rejects.toThrow('roll back')
        expect(await isLocked(name)).toBe(false)
      })

      it('the transaction handle is refused with an error naming the fix, or escaped', async () => {
        const name = `tx-handle-${Math.random()}`
        await expect(
          orm.transaction(async (tx) => {
            const from = orm.fromHandle
            if (!from.escapes) {
              expect(() => from.provider(tx.handle, table)).toThrow(LockConfigurationError)
              expect(() => from.provider(tx.handle, table)).toThrow(/transaction.*Pass /s)
              throw new Error('roll back')
            }
            const lock = await from.provider(tx.handle, table).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
            expect(lock).toBeDefined()
            expect(await isLocked(name)).toBe(true)
            throw new Error('roll back')
          }),
        ).rejects.toThrow('roll back')
        if (orm.fromHandle.escapes) expect(await isLocked(name)).toBe(true)
      })

      for (const [index, h] of boundHandles.entries()) {
        const test = h.escapes
          ? `${h.what}: a lock taken through it while its transaction is open is seen by another node at once, which skips, and survives the rollback`
          : `${h.what} is refused with an error naming the fix, before anything is sent`
        it(test, async () => {
          const name = `bound-${index}-${Math.random()}`
          const configuration = () => lockConfiguration({ name, lockAtMostFor: '1m' })
          if (!h.escapes) {
            let error: unknown
            await h.inTransaction(async (bound) => {
              error = await Promise.resolve()
                .then(() => h.provider(bound, table).lock(configuration()))
                .then(
                  () => undefined,
                  (e: unknown) => e,
                )
            })
            expect(error, h.what).toBeInstanceOf(LockConfigurationError)
            expect((error as Error).message, h.what).toMatch(/transaction.*Pass /s)
            expect(await isLocked(name), h.what).toBe(false)
            return
          }
          await h.inTransaction(async (bound) => {
            expect(await h.provider(bound, table).lock(configuration()), h.what).toBeDefined()
            expect(await isLocked(name), `${h.what}: seen from another connection`).toBe(true)
            // Another node skips at once; were the lock inside the open transaction, its acquire
            // would wait on the row until that transaction ends.
            const other = orm.provider(table).lock(configuration())
            const waited = await Promise.race([other.then(() => false), sleep(5_000).then(() => true)])
            expect(waited, `${h.what}: another node waited for the caller's transaction`).toBe(false)
            expect(await other).toBeUndefined()
          })
          expect(await isLocked(name), `${h.what}: held after the rollback`).toBe(true)
        })
      }

      it('fuzz: 4 workers, each inside its own ORM transaction, read, sleep and write a counter under the lock: no lost update', {
        timeout: 30_000,
      }, async () => {
        const id = Math.floor(Math.random() * 1e9)
        await q(`INSERT INTO ${counters} (id, n) VALUES (${id}, 0)`)
        const workers = 4
        const rounds = 5
        const name = `tx-fuzz-${id}`
        await Promise.all(
          Array.from({ length: workers }, async () => {
            const provider = orm.provider(table)
            for (let round = 0; round < rounds; round++) {
              // The lock is taken inside the open transaction and released after its commit, as a
              // transactional task does; were it part of that transaction, other workers would not
              // see it until the commit, and their reads would race.
              const lock = await orm.transaction(async (tx) => {
                let held: SimpleLock | undefined
                for (;;) {
                  held = await provider.lock(lockConfiguration({ name, lockAtMostFor: '30s' }))
                  if (held) break
                  await sleep(2)
                }
                const n = await tx.read(`SELECT n FROM ${counters} WHERE id = ${id}`)
                await sleep(3)
                await tx.write(`UPDATE ${counters} SET n = ${n + 1} WHERE id = ${id}`)
                return held
              })
              await lock.unlock()
            }
          }),
        )
        expect(Number((await q(`SELECT n FROM ${counters} WHERE id = ?`, [id]))[0]!.n)).toBe(workers * rounds)
      })
    })
  })
}

const numbered = (sql: string): string => {
  let n = 0
  return sql.replace(/\?/g, () => `$${++n}`)
}

/** The first column of the first row, as a number (counts come back as strings or bigints on some drivers). */
export function firstValue(rows: Record<string, unknown>[]): number {
  return Number(Object.values(rows[0]!)[0])
}

/** Databases nobody listens on, for the suite's dead-store case. */
export const DEAD_POSTGRES = 'postgres://postgres@127.0.0.1:1/test'
export const DEAD_MYSQL = 'mysql://root@127.0.0.1:1/test'

/**
 * Registers a race on sessions at `serializable` (PostgreSQL): contenders meet serialization
 * failures, which the adapter must pass on with the driver's code (the provider then answers "not
 * acquired"), not reject. `provider` is over an instance whose sessions are serializable.
 */
export function serializableRace(
  library: string,
  setup: () => Promise<{ provider(table: string): LockProvider; close(): Promise<void> }>,
): void {
  it(`${library}, serializable sessions: of 12 contenders racing on one name exactly one wins, 10 rounds, and none rejects`, {
    timeout: 30_000,
  }, async () => {
    const pool = (await postgresPoolOrSkip(2)) as pg.Pool | undefined
    if (!pool) return
    const table = uniqueTable(`shedlock_orm_${library}_race`)
    await pool.query(postgresSchema({ tableName: table }))
    const orm = await setup()
    try {
      const provider = orm.provider(table)
      for (let round = 0; round < 10; round++) {
        const name = round % 2 === 0 ? 'contended' : `fresh-${round}`
        const results = await Promise.allSettled(
          Array.from({ length: 12 }, () => provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
        )
        expect(
          results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)),
          `round ${round}`,
        ).toEqual([])
        const winners = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []))
        expect(winners.length, `round ${round}`).toBe(1)
        await winners[0]!.unlock()
      }
    } finally {
      await orm.close()
      await pool.query(`DROP TABLE IF EXISTS ${table}`)
      await pool.end()
    }
  })
}

/** libpq options that put every session of a pool at `serializable`. */
export const SERIALIZABLE = '-c default_transaction_isolation=serializable'
