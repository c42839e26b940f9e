// The SQL providers' `timeout` (src/support/sql/sql-lock-provider.ts), on the real servers: a
// statement to a server that stopped answering rejects in time and the task does not run; an
// acquire that commits after its timeout is given back at once.
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLockingTaskExecutor,
  type Duration,
  type LockProvider,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import { lockPairOf } from '../../../src/core/lock-provider.ts'
import { mysqlLockProvider, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { postgresLockProvider, postgresSchema } from '../../../src/providers/postgres/index.ts'
import { acquireOneAfterOther, type SqlAccessor, sqlLockProvider } from '../../../src/support/sql/sql-lock-provider.ts'
import { storeError } from '../../../src/support/store-errors.ts'
import { TcpProxy } from '../../faults/support/tcp-proxy.ts'
import { MYSQL_URL, mysqlPoolOrSkip, POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

interface Store {
  readonly title: string
  readonly port: number
  readonly table: string
  schema(): string
  /** A pool of one connection through `port` (a proxy's). */
  pool(port: number): { query(sql: string, values?: unknown[]): Promise<unknown>; end(): Promise<void> }
  provider(client: unknown, timeout: Duration): LockProvider
  /** Holds the row of `name` in an open transaction, so that an acquire of it waits; resolves to the commit. */
  holdRow(name: string): Promise<() => Promise<void>>
}

const pgTable = 'shedlock_timeout_test'
const mysqlTable = 'shedlock_timeout_test'

const stores: Store[] = [
  {
    title: 'PostgreSQL',
    port: 5432,
    table: pgTable,
    schema: () => postgresSchema({ tableName: pgTable }),
    pool: (port) => new pg.Pool({ connectionString: POSTGRES_URL.replace(':5432/', `:${port}/`), max: 1 }),
    provider: (client, timeout) => postgresLockProvider({ client: client as pg.Pool, tableName: pgTable, timeout }),
    async holdRow(name) {
      const client = new pg.Client({ connectionString: POSTGRES_URL })
      await client.connect()
      await client.query('BEGIN')
      await client.query(`SELECT * FROM ${pgTable} WHERE name = $1 FOR UPDATE`, [name])
      return async () => {
        await client.query('COMMIT')
        await client.end()
      }
    },
  },
  {
    title: 'MariaDB',
    port: 3306,
    table: mysqlTable,
    schema: () => mysqlSchema({ tableName: mysqlTable }),
    pool: (port) => mysql.createPool({ uri: MYSQL_URL.replace(':3306/', `:${port}/`), connectionLimit: 1 }),
    provider: (client, timeout) => mysqlLockProvider({ client: client as mysql.Pool, tableName: mysqlTable, timeout }),
    async holdRow(name) {
      const connection = await mysql.createConnection({ uri: MYSQL_URL })
      await connection.query('BEGIN')
      await connection.query(`SELECT * FROM ${mysqlTable} WHERE name = ? FOR UPDATE`, [name])
      return async () => {
        await connection.query('COMMIT')
        await connection.end()
      }
    },
  },
]

for (const store of stores) {
  describe(`SQL provider timeout on ${store.title}`, () => {
    let admin: Awaited<ReturnType<typeof postgresPoolOrSkip | typeof mysqlPoolOrSkip>>
    beforeAll(async () => {
      admin = store.port === 5432 ? await postgresPoolOrSkip(2) : await mysqlPoolOrSkip(2)
      if (!admin) return
      await (admin as pg.Pool).query(`DROP TABLE IF EXISTS ${store.table}`)
      await (admin as pg.Pool).query(store.schema())
    })
    afterAll(async () => {
      await admin?.end()
    })
    const sql = (text: string, values: unknown[] = []) => (admin as pg.Pool).query(text, values)
    const lockedBy = async (name: string): Promise<string | undefined> => {
      const result = (await sql(`SELECT locked_by FROM ${store.table} WHERE name = '${name}'`)) as unknown
      // pg: { rows }; mysql2: [rows, fields].
      const rows = (Array.isArray(result) ? result[0] : (result as pg.QueryResult).rows) as { locked_by: string }[]
      return rows[0]?.locked_by
    }

    it('a server that stops answering: lock() rejects after the timeout naming the lock, the task does not run', async (context) => {
      if (!admin) return context.skip()
      const proxy = await TcpProxy.start(store.port)
      const pool = store.pool(proxy.port)
      try {
        const provider = store.provider(pool, '400ms')
        // The pool's connection is open (and the table's limits read) before the cut.
        const lock = await provider.lock(lockConfiguration({ name: 'timeout-warm', lockAtMostFor: '1m' }))
        await lock!.unlock()
        proxy.cut('blackhole')
        const started = Date.now()
        const error = await provider.lock(lockConfiguration({ name: 'timeout-cut', lockAtMostFor: '1m' })).then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toContain('"timeout-cut"')
        expect((error as Error).message).toContain('timeout (400ms)')
        expect((error as Error).message).toContain('the task was not run')
        expect(Date.now() - started).toBeLessThan(5_000)
        let ran = false
        await expect(
          createLockingTaskExecutor(provider).executeWithLock(
            () => {
              ran = true
            },
            { name: 'timeout-cut', lockAtMostFor: '1m' },
          ),
        ).rejects.toBeInstanceOf(LockProviderError)
        expect(ran).toBe(false)
      } finally {
        proxy.restore()
        await pool.end().catch(() => {})
        await proxy.close()
      }
    })

    it('an acquire that commits after its timeout is given back at once: another node takes the lock', async (context) => {
      if (!admin) return context.skip()
      const name = 'timeout-late'
      // An expired row, so that the acquire's takeover waits on the row lock held below.
      await sql(`DELETE FROM ${store.table} WHERE name = '${name}'`)
      const first = store.provider(admin, '10s')
      const expired = await first.lock(lockConfiguration({ name, lockAtMostFor: 50 }))
      expect(expired).toBeDefined()
      await new Promise((resolve) => setTimeout(resolve, 100))
      const pool = store.pool(store.port)
      try {
        const late = store.provider(pool, '300ms')
        const commit = await store.holdRow(name)
        const error = await late.lock(lockConfiguration({ name, lockAtMostFor: '10m' })).then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error).toBeInstanceOf(LockProviderError)
        const holderBefore = await lockedBy(name)
        // The blocked statement goes through now and takes the row for 10 minutes; the provider
        // gives it back as it lands. (Now, within the acquire's own lock wait of 1 s: a longer
        // wait makes the statement give up, not acquired, and nothing lands.)
        await commit()
        for (let i = 0; i < 50 && (await lockedBy(name)) === holderBefore; i++)
          await new Promise((resolve) => setTimeout(resolve, 100))
        expect(await lockedBy(name), 'the late acquire never landed').not.toBe(holderBefore)
        const other = store.provider(admin, '10s')
        let taken: Awaited<ReturnType<LockProvider['lock']>>
        for (let i = 0; i < 50 && !taken; i++) {
          taken = await other.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
          if (!taken) await new Promise((resolve) => setTimeout(resolve, 100))
        }
        expect(taken, 'the late acquisition kept the lock').toBeDefined()
        await taken!.unlock()
      } finally {
        await pool.end().catch(() => {})
      }
    })

    it('a timeout of 0 or a bad duration is a LockConfigurationError', (context) => {
      if (!admin) return context.skip()
      expect(() => store.provider(admin, '0ms')).toThrow(LockConfigurationError)
      expect(() => store.provider(admin, 'soon' as Duration)).toThrow(/duration|soon/)
    })
  })
}

describe('SQL paired acquire (PostgreSQL)', () => {
  const pgStore = stores[0]!
  let admin: pg.Pool | undefined
  beforeAll(async () => {
    admin = await postgresPoolOrSkip(2)
    if (!admin) return
    await admin.query(`DROP TABLE IF EXISTS ${pgTable}_pair`)
    await admin.query(postgresSchema({ tableName: `${pgTable}_pair` }))
  })
  afterAll(async () => {
    await admin?.end()
  })

  it('a paired acquire that commits after its timeout gives both locks back: another node takes them', async (context) => {
    if (!admin) return context.skip()
    const table = `${pgTable}_pair`
    const claim = 'pair-late@20260101T120000Z'
    const task = 'pair-late'
    const provider = (client: pg.Pool, timeout: Duration) => postgresLockProvider({ client, tableName: table, timeout })
    const pairOf = (p: LockProvider) => lockPairOf(p)!
    // An expired claim row, so that the pair's takeover waits on the row lock held below.
    const expired = await provider(admin, '10s').lock(lockConfiguration({ name: claim, lockAtMostFor: 50 }))
    expect(expired).toBeDefined()
    await new Promise((resolve) => setTimeout(resolve, 100))
    const pool = pgStore.pool(pgStore.port) as pg.Pool
    const commit = await holdPostgresRow(table, claim)
    try {
      const error = await pairOf(provider(pool, '300ms'))(
        lockConfiguration({ name: claim, lockAtMostFor: '10m' }),
        lockConfiguration({ name: task, lockAtMostFor: '10m' }),
      ).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain(`"${claim}"`)
      const owner = async (name: string) =>
        (
          (await admin!.query(`SELECT locked_by FROM ${table} WHERE name = $1`, [name])).rows[0] as {
            locked_by?: string
          }
        )?.locked_by
      const before = await owner(claim)
      await commit()
      // The late pair lands (both rows written, by one owner each), and is given back as it lands.
      for (let i = 0; i < 50 && (await owner(claim)) === before; i++) await new Promise((r) => setTimeout(r, 100))
      expect(await owner(claim), 'the late pair never landed').not.toBe(before)
      expect(await owner(task), 'the late pair did not take the task lock').toBeDefined()
      const other = provider(admin, '10s')
      for (const name of [claim, task]) {
        let taken: Awaited<ReturnType<LockProvider['lock']>>
        for (let i = 0; i < 50 && !taken; i++) {
          taken = await other.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
          if (!taken) await new Promise((r) => setTimeout(r, 100))
        }
        expect(taken, `the late pair kept "${name}"`).toBeDefined()
        await taken!.unlock()
      }
    } finally {
      await commit().catch(() => {})
      await pool.end().catch(() => {})
    }
  })
})

/** Holds the row of `name` in an open transaction; resolves to its commit (callable more than once). */
async function holdPostgresRow(table: string, name: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: POSTGRES_URL })
  await client.connect()
  await client.query('BEGIN')
  await client.query(`SELECT * FROM ${table} WHERE name = $1 FOR UPDATE`, [name])
  let done: Promise<void> | undefined
  return () => {
    done ??= client.query('COMMIT').then(() => client.end())
    return done
  }
}

describe('acquireOneAfterOther: a paired acquire in two statements', () => {
  const configuration = (name: string) => lockConfiguration({ name, lockAtMostFor: '1m' })
  const accessor = (second: () => Promise<boolean | bigint>, first: boolean | bigint = true) => {
    const calls: string[] = []
    const fake: SqlAccessor = {
      acquire: async (c) => {
        calls.push(`acquire ${c.name}`)
        return c.name === 'claim' ? first : second()
      },
      extend: async () => false,
      unlock: async (c, owner) => {
        calls.push(`unlock ${c.name} ${owner} ${c.lockAtLeastFor}`)
      },
    }
    return { fake, calls }
  }

  it('asks for the second only once the first is taken', async () => {
    const { fake, calls } = accessor(async () => true, false)
    expect(await acquireOneAfterOther(fake, configuration('claim'), 'a', configuration('task'), 'b')).toEqual([
      false,
      false,
    ])
    expect(calls).toEqual(['acquire claim'])
  })

  it("answers each one's result: the second held, or taken with its token", async () => {
    expect(
      await acquireOneAfterOther(
        accessor(async () => false).fake,
        configuration('claim'),
        'a',
        configuration('task'),
        'b',
      ),
    ).toEqual([true, false])
    expect(
      await acquireOneAfterOther(
        accessor(async () => 7n).fake,
        configuration('claim'),
        'a',
        configuration('task'),
        'b',
      ),
    ).toEqual([true, 7n])
  })

  it('a failure of the second gives the first back at once (its owner, no lockAtLeastFor) and rejects with it', async () => {
    const failure = new Error('connection lost')
    const { fake, calls } = accessor(() => Promise.reject(failure))
    await expect(acquireOneAfterOther(fake, configuration('claim'), 'a', configuration('task'), 'b')).rejects.toBe(
      failure,
    )
    expect(calls).toEqual(['acquire claim', 'acquire task', 'unlock claim a 0'])
  })
})

// Which failed acquires are given back, and when: the decision is the accessor's replyLost(), the
// schedule GIVE_BACK_DELAYS_MS (0, 0.5 s, 1 s, ...). On the real servers: the lost-reply tests of
// test/providers/postgres and test/providers/mysql.
describe('an acquire whose reply was lost', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const failing = (error: unknown, released: string[]): SqlAccessor => ({
    acquire: async () => {
      throw error
    },
    extend: async () => false,
    unlock: async (current, owner) => {
      released.push(`${current.name} ${owner}`)
    },
    replyLost: (e) => (e as { lost?: boolean }).lost === true,
  })
  const provider = (accessor: SqlAccessor) =>
    sqlLockProvider('fake', accessor, { lockedBy: 'node' }, (error, action, name) =>
      storeError('fake', action, name, String(error), error),
    )

  it('is given back, owner-checked, at once and again 0.5 s later; one the server refused is not', async () => {
    const released: string[] = []
    const lost = provider(failing({ lost: true }, released))
    const error = await lost.lock(lockConfiguration({ name: 'lost', lockAtMostFor: '1m' })).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    await sleep(750)
    expect(released).toHaveLength(2)
    expect(released[0]).toMatch(/^lost node:/)
    expect(released[1]).toBe(released[0])
    const refused: string[] = []
    await provider(failing({ lost: false }, refused))
      .lock(lockConfiguration({ name: 'refused', lockAtMostFor: '1m' }))
      .catch(() => {})
    await sleep(750)
    expect(refused).toEqual([])
  })

  it('is not given back past its lockAtMostUntil, when the lock is free anyway', async () => {
    const released: string[] = []
    await provider(failing({ lost: true }, released))
      .lock(lockConfiguration({ name: 'short', lockAtMostFor: 300 }))
      .catch(() => {})
    await sleep(750)
    expect(released).toHaveLength(1)
  })
})
