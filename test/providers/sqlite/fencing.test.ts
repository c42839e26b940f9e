import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Libsql from 'libsql'
import { afterAll, describe, expect, it } from 'vitest'
import { LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { sqliteFencingColumnDdl, sqliteLockProvider, sqliteSchema } from '../../../src/providers/sqlite/index.ts'
import { expectStrictlyIncreasing, fencingWorkers } from '../../helpers/fencing-workers.ts'
import { postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

// fencingTokens on SQLite (libsql, better-sqlite3's API; provider.test.ts runs the conformance
// suite with tokens on every driver present): the error for a table without the column, Java
// ShedLock's statements on the same table, and several processes sharing one file. The
// multi-process test writes to its fenced resource in PostgreSQL.

const workDir = mkdtempSync(join(tmpdir(), 'shedlock-sqlite-fence-'))
const opened: InstanceType<typeof Libsql>[] = []
afterAll(() => {
  for (const db of opened) db.close()
  rmSync(workDir, { recursive: true, force: true })
})
let files = 0
const open = (fencingTokens = true): { db: InstanceType<typeof Libsql>; file: string } => {
  const file = join(workDir, `db-${++files}.sqlite`)
  const db = new Libsql(file, { timeout: 5000 })
  db.exec('PRAGMA journal_mode = WAL')
  db.exec(sqliteSchema({ fencingTokens }))
  opened.push(db)
  return { db, file }
}
const NOW = `strftime('%Y-%m-%d %H:%M:%f', 'now')`
// Where the multi-process test's fenced resource lives.
const resource = await postgresPoolOrSkip(1)
afterAll(() => resource?.end())

/** A token that started afresh: above the floor, the clock in milliseconds times 1000, as it was a minute ago. */
const expectAboveFloor = (token: bigint | undefined): void => {
  expect(token).toBeTypeOf('bigint')
  expect(token! > BigInt(Date.now() - 60_000) * 1000n).toBe(true)
  expect(token! <= BigInt(Date.now() + 60_000) * 1000n).toBe(true)
}

describe('sqlite fencing tokens (libsql)', () => {
  it('a table without the column: the acquire rejects with LockProviderError naming the table and the lock and giving the ALTER TABLE, which fixes it', async () => {
    const { db } = open(false)
    const provider = sqliteLockProvider({ database: db, fencingTokens: true })
    const error = await provider.lock(lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' })).catch((e) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as Error).message).toBe(
      `sqlite: could not acquire lock "no-column": table shedlock has no fencing_token column, which fencingTokens: true needs (Java ShedLock's table lacks it). Add it (Java ShedLock keeps working: the column is nullable and its statements leave it alone) with:\n` +
        'ALTER TABLE shedlock ADD COLUMN fencing_token INTEGER NULL;\nor create the provider without fencingTokens',
    )
    db.exec(sqliteFencingColumnDdl())
    // The same provider: a statement that failed to prepare is not kept.
    const lock = await provider.lock(lockConfiguration({ name: 'no-column', lockAtMostFor: '1m' }))
    expectAboveFloor(lock?.fencingToken)
  })

  it("Java ShedLock's statements on a table with the column: they leave it alone, and Node's next token is one more than Node's last", async () => {
    const { db } = open()
    const provider = sqliteLockProvider({ database: db, fencingTokens: true })
    // Java ShedLock's generic statements (SqlStatementsSource), with its times as this table holds them.
    const until = `strftime('%Y-%m-%d %H:%M:%f', 'now', '+60 seconds')`
    const javaLock = (name: string): boolean => {
      try {
        db.prepare(
          `INSERT INTO shedlock(name, lock_until, locked_at, locked_by) VALUES(?, ${until}, ${NOW}, 'java-host')`,
        ).run(name)
        return true
      } catch {
        return (
          db
            .prepare(
              `UPDATE shedlock SET lock_until = ${until}, locked_at = ${NOW}, locked_by = 'java-host' WHERE name = ? AND lock_until <= ${NOW}`,
            )
            .run(name).changes > 0
        )
      }
    }
    const javaUnlock = (name: string): void => {
      db.prepare(`UPDATE shedlock SET lock_until = ${NOW} WHERE name = ? AND locked_by = 'java-host'`).run(name)
    }
    const tokenInTable = (name: string): unknown =>
      (db.prepare('SELECT fencing_token FROM shedlock WHERE name = ?').get(name) as { fencing_token: unknown })
        .fencing_token
    expect(javaLock('mixed')).toBe(true)
    expect(tokenInTable('mixed')).toBeNull()
    expect(await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))).toBeUndefined()
    javaUnlock('mixed')
    const first = await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))
    expectAboveFloor(first?.fencingToken)
    expect(javaLock('mixed')).toBe(false)
    await first!.unlock()
    expect(javaLock('mixed')).toBe(true)
    expect(BigInt(tokenInTable('mixed') as number)).toBe(first!.fencingToken)
    javaUnlock('mixed')
    const second = await provider.lock(lockConfiguration({ name: 'mixed', lockAtMostFor: '1m' }))
    expect(second?.fencingToken).toBe(first!.fencingToken! + 1n)
  })

  it("a row deleted (removeExpired(), by hand, or by hand and then Java's INSERT): the next token is still greater than every earlier one", async () => {
    const { db } = open()
    const provider = sqliteLockProvider({ database: db, fencingTokens: true })
    const tokens: bigint[] = []
    const takeAndRelease = async (): Promise<void> => {
      const lock = await provider.lock(lockConfiguration({ name: 'deleted', lockAtMostFor: '1m' }))
      tokens.push(lock!.fencingToken!)
      await lock!.unlock()
    }
    for (let i = 0; i < 3; i++) await takeAndRelease()
    expect(await provider.inspector().removeExpired()).toBe(1)
    await takeAndRelease()
    db.exec(`DELETE FROM shedlock WHERE name = 'deleted'`)
    await takeAndRelease()
    db.exec(`DELETE FROM shedlock WHERE name = 'deleted'`)
    db.prepare(
      `INSERT INTO shedlock(name, lock_until, locked_at, locked_by) VALUES('deleted', ${NOW}, ${NOW}, 'java-host')`,
    ).run()
    await takeAndRelease()
    // Deleted and taken again within one millisecond of its last token: SQLite's clock has no
    // finer grain, so the floor alone would repeat it.
    for (let i = 0; i < 200; i++) {
      db.exec(`DELETE FROM shedlock WHERE name = 'deleted'`)
      await takeAndRelease()
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!, `token ${i}: ${tokens}`).toBe(true)
  })

  it.skipIf(!resource)(
    '1,000 acquisitions from 4 processes sharing the file (releases, extensions, expiries and takeovers): every token is new, each greater than all before it in holding order',
    async () => {
      const { file } = open()
      const outcome = await fencingWorkers({
        workerProvider: `
import Libsql from 'libsql'
import { sqliteLockProvider } from 'shedlock/sqlite'
const database = new Libsql(${JSON.stringify(file)}, { timeout: 5000 })
database.exec('PRAGMA synchronous = NORMAL')
export const provider = sqliteLockProvider({ database, fencingTokens: true })
export const close = () => database.close()
`,
      })
      expectStrictlyIncreasing(outcome)
    },
    240_000,
  )
})
