// The Spanner emulator for the spanner tests: a database of its own per test file, with the lock
// tables the tests use, in Java ShedLock's DDL. Import before any Google client is made.
import { randomBytes } from 'node:crypto'
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
