import mysql from 'mysql2/promise'
import { afterAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, lockConfiguration } from '../../../src/index.ts'
import { lockPairOf } from '../../../src/core/lock-provider.ts'
import { slotRecordName } from '../../../src/core/slots.ts'
import { mysqlLockProvider, mysqlSchema } from '../../../src/providers/mysql/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'

// Issue 41, scenario 6, on MariaDB: a slot's claim and its task's lock in one compound statement
// and one transaction, so that no node can leave a slot claimed and its task never asked for.

const db = await mysqlPoolOrSkip(4)
const table = uniqueTable('shedlock_my_pair')
if (db) await db.query(mysqlSchema({ tableName: table, fencingTokens: true }))
afterAll(async () => {
  await db?.query(`DROP TABLE IF EXISTS ${table}`)
  await db?.end()
})

const holderOf = async (name: string): Promise<string | undefined> => {
  const [rows] = await db!.query(`SELECT locked_by FROM ${table} WHERE name = ? AND lock_until > UTC_TIMESTAMP(3)`, [
    name,
  ])
  return (rows as { locked_by: string }[])[0]?.locked_by
}

/** A pool whose queries are counted, by their first word. */
function counted(pool: mysql.Pool): { client: mysql.Pool; sent: string[] } {
  const sent: string[] = []
  const client = new Proxy(pool, {
    get(target, key, receiver) {
      if (key !== 'query') return Reflect.get(target, key, receiver)
      return (sql: string, values?: unknown) => {
        sent.push(sql.trimStart().split(/\s+/, 2).join(' '))
        return target.query(sql, values as never)
      }
    },
  })
  return { client, sent }
}

const names = () => {
  const task = `pair-${Math.random().toString(36).slice(2, 10)}`
  return { task, claim: slotRecordName(task, new Date(Date.UTC(2026, 11, 7, 23))) }
}

describe.skipIf(!db)('mysql on MariaDB: the paired claim', () => {
  it('a slot run takes its claim and its task lock in one statement; the node that finds it done sends one', async () => {
    const { client, sent } = counted(db!)
    const provider = mysqlLockProvider({ client, tableName: table, fencingTokens: true })
    const executor = createLockingTaskExecutor(provider)
    const slot = new Date(Date.UTC(2026, 11, 7, 23))
    // The first call reads the table's columns (and learns it is MariaDB).
    await executor.executeWithLock(async () => {}, { name: 'pair-warm', lockAtMostFor: '1m', slot })
    sent.length = 0
    let ran = 0
    const { task } = names()
    const run = () => executor.executeWithLock(async () => void ran++, { name: task, lockAtMostFor: '1m', slot })
    // Acquires only: a release is an UPDATE, the background sweep of old slot rows a DELETE.
    const acquires = () => sent.filter((s) => s.startsWith('BEGIN NOT') || s.startsWith('SET STATEMENT'))
    expect((await run()).executed).toBe(true)
    expect(acquires()).toEqual(['BEGIN NOT'])
    sent.length = 0
    expect((await run()).executed).toBe(false)
    expect(ran).toBe(1)
    expect(acquires()).toEqual(['BEGIN NOT'])
    await executor.close()
  })

  it('with the task lock held elsewhere, the claim is taken and the task lock left as it is', async () => {
    const provider = mysqlLockProvider({ client: db!, tableName: table, fencingTokens: true })
    const { task, claim } = names()
    const other = await provider.lock(lockConfiguration({ name: task, lockAtMostFor: '1m' }))
    const pair = lockPairOf(provider)!
    const [claimed, locked] = await pair(
      lockConfiguration({ name: claim, lockAtMostFor: '1h' }),
      lockConfiguration({ name: task, lockAtMostFor: '1m' }),
    )
    expect(claimed?.fencingToken).toBeTypeOf('bigint')
    expect(locked).toBeUndefined()
    expect(await holderOf(task)).toBe(other!.lockedBy)
    await claimed!.unlock()
    await other!.unlock()
  })

  it('a lock wait on the task row rolls the claim back with it; the two are then taken one after the other', async () => {
    const provider = mysqlLockProvider({ client: db!, tableName: table, fencingTokens: true })
    const { task, claim } = names()
    await (await provider.lock(lockConfiguration({ name: task, lockAtMostFor: '1m' })))!.unlock()
    // Another transaction holds the task's row: the compound statement waits 1 s for it, fails
    // (1205), rolls back, and the claim is free again for the one-after-the-other attempt, whose
    // task upsert waits and fails too ("not acquired").
    const blocker = await db!.getConnection()
    try {
      await blocker.query('START TRANSACTION')
      await blocker.query(`SELECT * FROM ${table} WHERE name = ? FOR UPDATE`, [task])
      const [claimed, locked] = await lockPairOf(provider)!(
        lockConfiguration({ name: claim, lockAtMostFor: '1h' }),
        lockConfiguration({ name: task, lockAtMostFor: '1m' }),
      )
      expect(claimed).toBeDefined()
      expect(locked).toBeUndefined()
      await claimed!.unlock()
    } finally {
      await blocker.query('ROLLBACK')
      blocker.release()
    }
  }, 15_000)

  it('a node whose connection dies while the statement runs leaves both taken, never the claim alone', async () => {
    const provider = mysqlLockProvider({ client: db!, tableName: table, fencingTokens: true })
    const { task, claim } = names()
    await (await provider.lock(lockConfiguration({ name: task, lockAtMostFor: '1m' })))!.unlock()
    const dying = await mysql.createConnection(MYSQL_URL)
    const node = mysqlLockProvider({ client: dying as unknown as mysql.Pool, tableName: table, fencingTokens: true })
    const blocker = await db!.getConnection()
    try {
      // Hold the task's row, so the statement is still running on the server when its client dies.
      await blocker.query('START TRANSACTION')
      await blocker.query(`SELECT * FROM ${table} WHERE name = ? FOR UPDATE`, [task])
      const sending = lockPairOf(node)!(
        lockConfiguration({ name: claim, lockAtMostFor: '1h' }),
        lockConfiguration({ name: task, lockAtMostFor: '1m' }),
      ).catch((error: unknown) => error)
      await new Promise((resolve) => setTimeout(resolve, 300))
      dying.destroy()
      await blocker.query('COMMIT')
      await sending
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      const [claimHolder, taskHolder] = [await holderOf(claim), await holderOf(task)]
      // Both or neither: the server ran the statement to its end, in one transaction.
      expect(claimHolder === undefined).toBe(taskHolder === undefined)
      expect(claimHolder).toBeDefined()
    } finally {
      blocker.release()
    }
  }, 15_000)
})
