import type mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  type MysqlClient,
  mysqlFencingColumnDdl,
  mysqlLockProvider,
  mysqlSchema,
} from '../../../src/providers/mysql/index.ts'
import { createMysqlLockProvider } from '../../../src/providers/mysql/provider.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { expectStrictlyIncreasing, fencingWorkers } from '../../helpers/fencing-workers.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { registerSuite } from '../../helpers/register-suite.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'

// fencingTokens on MySQL/MariaDB: the token travels back as the OK packet's insertId, set with
// LAST_INSERT_ID(expr) in the upsert itself. The statements, the error for a table without the
// column, the count-only mode of clients without insertId, Java ShedLock's statements on the
// same table, several processes, and the paused holder.

const pool = await mysqlPoolOrSkip(8)
const NOW = 'UTC_TIMESTAMP(3)'

/** A token that started afresh: above the floor, the clock in milliseconds times 1000, as it was a minute ago. */
const expectAboveFloor = (token: bigint | undefined): void => {
  expect(token).toBeTypeOf('bigint')
  expect(token! > BigInt(Date.now() - 60_000) * 1000n).toBe(true)
  expect(token! <= BigInt(Date.now() + 60_000) * 1000n).toBe(true)
}

describe.skipIf(!pool)('mysql fencing tokens', () => {
  const db = pool!
  const tables: string[] = []
  const newTable = async (fencingTokens = true): Promise<string> => {
    const table = uniqueTable('shedlock_my_fence')
    tables.push(table)
    await db.query(mysqlSchema({ tableName: table, fencingTokens }))
    return table
  }
  afterAll(async () => {
    for (const table of tables) await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.end()
  })
  const isLocked = async (table: string, name: string): Promise<boolean> =>
    (await db.query<mysql.RowDataPacket[]>(`SELECT 1 FROM ${table} WHERE name = ? AND lock_until > ${NOW}`, [name]))[0]
      .length === 1

  /** A client that records what it sends and what the server answers. */
  const recording = (): MysqlClient & { sent: { sql: string; insertId?: unknown }[] } => {
    const sent: { sql: string; insertId?: unknown }[] = []
    return {
      sent,
      async query(sql, values) {
        const reply = await db.query(sql, values)
        const header = reply[0] as { insertId?: unknown }
        sent.push({ sql, ...(Array.isArray(reply[0]) ? {} : { insertId: header.insertId }) })
        return reply
      },
    }
  }

  // Prisma's mode: a client that reports a row count and no insertId.
  describe('count-only acquire (a client without insertId)', () => {
    let table = ''
    beforeAll(async () => {
      table = await newTable()
    })
    const countOnly: MysqlClient = {
      async query(sql, values) {
        const [result, fields] = await db.query(sql, values)
        return [
          Array.isArray(result) ? result : { affectedRows: (result as mysql.ResultSetHeader).affectedRows },
          fields,
        ]
      },
    }
    registerSuite(
      lockProviderSuite({
        provider: () =>
          createMysqlLockProvider({ client: countOnly, tableName: table, fencingTokens: true }, 'countOnly'),
        isLocked: (name) => isLocked(table, name),
        extensible: true,
        fencing: true,
      }).filter((c) => c.group === 'fencing'),
    )
  })

  it('without fencingTokens the acquire statement is the one before tokens, byte for byte', async () => {
    const table = await newTable(false)
    const client = recording()
    const lock = await mysqlLockProvider({ client, tableName: table, columnType: 'datetime' }).lock(
      lockConfiguration({ name: 'plain', lockAtMostFor: '1m' }),
    )
    expect(lock?.fencingToken).toBeUndefined()
    const until = `TIMESTAMPADD(MICROSECOND, ?, ${NOW})`
    const expired = `lock_until <= ${NOW}`
    expect(client.sent.map((s) => s.sql)).toEqual([
      `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES (?, ${until}, ${NOW}, ?) ` +
        `ON DUPLICATE KEY UPDATE locked_by = IF(${expired}, ?, IF(LAST_INSERT_ID(1518500249) = 1518500249, locked_by, locked_by)), ` +
        `locked_at = IF(${expired}, ${NOW}, locked_at), lock_until = IF(${expired}, ${until}, lock_until)`,
    ])
  })

  it('with fencingTokens: one statement per acquire, whose insertId is the token (the floor for a new row, one more for a takeover, 0 for a held row)', async () => {
    const table = await newTable()
    const client = recording()
    const provider = mysqlLockProvider({ client, tableName: table, fencingTokens: true, columnType: 'datetime' })
    const first = await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))
    expect(await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))).toBeUndefined()
    await first!.unlock()
    const second = await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: '1m' }))
    expectAboveFloor(first?.fencingToken)
    expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
    expect(client.sent.map((s) => [s.sql.split(' ')[0], Number(s.insertId)])).toEqual([
      ['INSERT', Number(first!.fencingToken)],
      ['INSERT', 0],
      ['UPDATE', 0],
      ['INSERT', Number(second!.fencingToken)],
    ])
    const [rows] = await db.query<mysql.RowDataPacket[]>(`SELECT fencing_token FROM ${table} WHERE name = 'counted'`)
    expect(BigInt(rows[0]!.fencing_token)).toBe(second!.fencingToken)
  })

  it('a table without the column: the acquire rejects with LockProviderError naming the table and the lock and giving the ALTER TABLE, which fixes it', async () => {
    const table = await newTable(false)
    for (const mode of ['upsert', 'countOnly'] as const) {
      const provider = createMysqlLockProvider({ client: db, tableName: table, fencingTokens: true }, mode)
      const error = await provider.lock(lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' })).catch((e) => e)
      expect(error, mode).toBeInstanceOf(LockProviderError)
      expect((error as Error).message, mode).toBe(
        `mysql: could not acquire lock "no-column": table ${table} has no fencing_token column, which fencingTokens: true needs (Java ShedLock's table lacks it). Add it (Java ShedLock keeps working: the column is nullable and its statements leave it alone) with:\n` +
          `ALTER TABLE ${table} ADD COLUMN fencing_token BIGINT NULL;\nor create the provider without fencingTokens`,
      )
    }
    await db.query(mysqlFencingColumnDdl({ tableName: table }))
    const lock = await mysqlLockProvider({ client: db, tableName: table, fencingTokens: true }).lock(
      lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' }),
    )
    expectAboveFloor(lock?.fencingToken)
  })

  it("Java ShedLock's statements on a table with the column: they leave it alone, and Node's next token is one more than Node's last", async () => {
    const table = await newTable()
    const provider = mysqlLockProvider({ client: db, tableName: table, fencingTokens: true })
    // Java ShedLock's MySQL statements with usingDbTime() (MySqlServerTimeStatementsSource), its
    // parameters inlined: INSERT IGNORE, then the takeover of an expired row, and the unlock.
    const javaLock = async (name: string): Promise<boolean> => {
      const until = `TIMESTAMPADD(MICROSECOND, 60000000, ${NOW})`
      const [inserted] = await db.query<mysql.ResultSetHeader>(
        `INSERT IGNORE INTO ${table}(name, lock_until, locked_at, locked_by) VALUES(?, ${until}, ${NOW}, 'java-host')`,
        [name],
      )
      if (inserted.affectedRows > 0) return true
      const [updated] = await db.query<mysql.ResultSetHeader>(
        `UPDATE ${table} SET lock_until = ${until}, locked_at = ${NOW}, locked_by = 'java-host' WHERE name = ? AND lock_until <= ${NOW}`,
        [name],
      )
      return updated.affectedRows > 0
    }
    const javaUnlock = async (name: string): Promise<void> => {
      const atLeast = 'TIMESTAMPADD(MICROSECOND, 0, locked_at)'
      await db.query(
        `UPDATE ${table} SET lock_until = IF (${atLeast} > ${NOW} , ${atLeast}, ${NOW}) WHERE name = ? AND locked_by = 'java-host'`,
        [name],
      )
    }
    const tokenInTable = async (name: string): Promise<unknown> =>
      (await db.query<mysql.RowDataPacket[]>(`SELECT fencing_token FROM ${table} WHERE name = ?`, [name]))[0][0]
        ?.fencing_token
    expect(await javaLock('mixed')).toBe(true)
    expect(await tokenInTable('mixed')).toBeNull()
    expect(await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))).toBeUndefined()
    await javaUnlock('mixed')
    const first = await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))
    expectAboveFloor(first?.fencingToken)
    expect(await javaLock('mixed')).toBe(false)
    await first!.unlock()
    expect(await javaLock('mixed')).toBe(true)
    expect(BigInt(String(await tokenInTable('mixed')))).toBe(first!.fencingToken)
    await javaUnlock('mixed')
    const second = await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))
    expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
  })

  it("a row deleted (removeExpired(), by hand, or by hand and then Java's INSERT): the next token is still greater than every earlier one, in both acquire modes", async () => {
    for (const mode of ['upsert', 'countOnly'] as const) {
      const table = await newTable()
      const provider = createMysqlLockProvider({ client: db, tableName: table, fencingTokens: true }, mode)
      const tokens: bigint[] = []
      const takeAndRelease = async (): Promise<void> => {
        const lock = await provider.lock(lockConfiguration({ name: 'deleted', lockAtMostFor: '1m' }))
        tokens.push(lock!.fencingToken!)
        await lock!.unlock()
      }
      for (let i = 0; i < 3; i++) await takeAndRelease()
      expect(await provider.inspector().removeExpired(), mode).toBe(1)
      await takeAndRelease()
      await db.query(`DELETE FROM ${table} WHERE name = 'deleted'`)
      await takeAndRelease()
      await db.query(`DELETE FROM ${table} WHERE name = 'deleted'`)
      await db.query(
        `INSERT IGNORE INTO ${table}(name, lock_until, locked_at, locked_by) VALUES('deleted', ${NOW}, ${NOW}, 'java-host')`,
      )
      await takeAndRelease()
      // Deleted and taken again within one millisecond of its last token: a floor in whole
      // milliseconds would repeat it.
      for (let i = 0; i < 200; i++) {
        await db.query(`DELETE FROM ${table} WHERE name = 'deleted'`)
        await takeAndRelease()
      }
      for (let i = 1; i < tokens.length; i++)
        expect(tokens[i]! > tokens[i - 1]!, `${mode}, token ${i}: ${tokens}`).toBe(true)
    }
  })

  it('1,000 acquisitions from 4 processes (releases, extensions, expiries and takeovers): every token is new, each greater than all before it in holding order', async () => {
    const table = await newTable()
    const outcome = await fencingWorkers({
      workerProvider: `
import mysql from 'mysql2/promise'
import { mysqlLockProvider } from 'shedlock/mysql'
const client = mysql.createPool({ uri: ${JSON.stringify(MYSQL_URL)}, connectionLimit: 2 })
export const provider = mysqlLockProvider({ client, tableName: ${JSON.stringify(table)}, fencingTokens: true })
export const close = () => client.end()
`,
    })
    expectStrictlyIncreasing(outcome)
  }, 240_000)

  it('a holder paused (SIGSTOP) past lockAtMostFor: the node that took over writes with a greater token, and the resumed holder is refused', async () => {
    const table = await newTable()
    const outcome = await pausedHolder({
      holderProvider: `
import mysql from 'mysql2/promise'
import { mysqlLockProvider } from 'shedlock/mysql'
export const provider = mysqlLockProvider({ client: mysql.createPool({ uri: ${JSON.stringify(MYSQL_URL)}, connectionLimit: 1 }), tableName: ${JSON.stringify(table)}, fencingTokens: true })
`,
      taker: mysqlLockProvider({ client: db, tableName: table, fencingTokens: true }),
    })
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.takerToken > outcome.holderToken).toBe(true)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
