// The Spanner emulator for the spanner tests: a database of its own per test file, with the lock
// tables the tests use, in Java ShedLock's DDL. Import before any Google client is made.
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Database, Spanner } from '@google-cloud/spanner'
import { SPANNER_TEST_INSTANCE, spannerOrSkip } from '../../helpers/google-emulators.ts'
import { spannerSchema } from '../../../src/providers/spanner/index.ts'

export const emulatorSpanner: Spanner | undefined = await spannerOrSkip()

/** Statements of a DDL text, without their `;`, as `updateSchema` and `createDatabase` take them. */
export function ddlStatements(ddl: string): string[] {
  return ddl
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s !== '')
}

/** Java ShedLock's DDL for the lock table, as its integration test creates it. */
export const JAVA_DDL = `CREATE TABLE shedlock (
    name STRING(64) NOT NULL,
    lock_until TIMESTAMP NOT NULL,
    locked_at TIMESTAMP NOT NULL,
    locked_by STRING(255) NOT NULL
    ) PRIMARY KEY (name)`

/**
 * A new database on the emulator with `shedlock` (Java's DDL) and `shedlock_fenced` (with the
 * fencing column), plus `extra` DDL statements. Database ids: 2 to 30 characters.
 */
export async function newDatabase(spanner: Spanner, extra: string[] = []): Promise<Database> {
  const id = `t${randomBytes(6).toString('hex')}`
  const instance = spanner.instance(SPANNER_TEST_INSTANCE)
  const [database, operation] = await instance.createDatabase(id, {
    schema: [
      JAVA_DDL,
      ...ddlStatements(spannerSchema({ tableName: 'shedlock_fenced', fencingTokens: true })),
      ...extra,
    ],
  })
  await operation.promise()
  return database
}

/**
 * Drops `database` once no transaction of this process holds one of its sessions, for at most
 * 15 s, then closes `spanner`. A transaction still retrying (the emulator aborts all but one
 * read-write transaction at a time, and the client retries past a provider's timeout) or a late
 * acquisition's give-back would otherwise end after the pool was torn down, and the client then
 * throws "Unable to release unknown resource" from an event handler, failing the run.
 */
export async function dropWhenIdle(spanner: Spanner, database: Database | undefined): Promise<void> {
  // `pool_.borrowed`: the sessions lent to transactions under way (not a typed API).
  const pool = (database as unknown as { pool_?: { borrowed?: number } } | undefined)?.pool_
  const until = Date.now() + 15_000
  while ((pool?.borrowed ?? 0) > 0 && Date.now() < until) await sleep(100)
  await database?.delete().catch(() => undefined)
  spanner.close()
}
