import assert from 'node:assert/strict'
import type { Database } from '@google-cloud/spanner'
import { afterAll, describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  spannerLockInspector,
  spannerLockProvider,
  spannerRunLedger,
  spannerRunsSchema,
} from '../../../src/providers/spanner/index.ts'
import { lockInspectorSuite, runLedgerSuite } from '../../../src/testing/index.ts'
import { registerInspectorSuite, registerRunLedgerSuite } from '../../helpers/register-suite.ts'
import { ddlStatements, dropWhenIdle, emulatorSpanner, newDatabase } from './emulator.ts'

// A database of this file's own, made before the suites are built from it.
const made = emulatorSpanner && (await newDatabase(emulatorSpanner, ddlStatements(spannerRunsSchema())))

describe.skipIf(!made)('spanner inspector and run ledger (emulator)', () => {
  const spanner = emulatorSpanner!
  const database = made as Database
  afterAll(() => dropWhenIdle(spanner, database))
  const provider = () => spannerLockProvider({ database })
  const row = async (name: string) => {
    const [rows] = await database.run({
      sql: `SELECT name, locked_by, FORMAT_TIMESTAMP('%FT%H:%M:%E*SZ', lock_until, 'UTC') AS lock_until, lock_until <= CURRENT_TIMESTAMP() AS free FROM shedlock WHERE name = @name`,
      params: { name },
      json: true,
    })
    return rows[0] as { name: string; locked_by: string; lock_until: string; free: boolean } | undefined
  }

  describe('inspector contract', () => {
    registerInspectorSuite(lockInspectorSuite({ provider, inspector: spannerLockInspector({ database }) }))
  })

  it("a force-release keeps the row with lock_until now and locked_by 'released'; the holder's release changes nothing", async () => {
    const name = `force-${Date.now()}`
    const holder = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))
    assert.ok(holder)
    const inspector = spannerLockInspector({ database })
    const record = await inspector.get(name)
    expect(record?.held).toBe(true)
    expect(await inspector.release(record!)).toBe(true)
    const after = await row(name)
    expect(after).toMatchObject({ name, locked_by: 'released', free: true })
    await holder.unlock()
    expect(await row(name)).toEqual(after)
    // A record read before the release is stale now: releasing it again changes nothing.
    expect(await inspector.release(record!)).toBe(false)
  })

  it('reads the times on Spanner’s clock and names it', async () => {
    const inspector = spannerLockInspector({ database })
    expect(inspector.clock).toContain('Spanner')
    const { now } = await inspector.list()
    expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(5_000)
  })

  describe('run ledger contract', () => {
    registerRunLedgerSuite(
      runLedgerSuite({
        ledger: spannerRunLedger({ database, keep: 5 }),
        keep: 5,
        provider,
        withMaxAge: (maxAge) => spannerRunLedger({ database, keep: 5, maxAge }),
      }),
    )
  })

  it('records an executor run with its fencing-free row, and a missing runs table names the DDL', async () => {
    const ledger = spannerRunLedger({ database })
    const executor = createLockingTaskExecutor(provider(), { runLedger: ledger })
    const name = `ledger-${Date.now()}`
    await executor.executeWithLock(async () => {}, { name, lockAtMostFor: '1m' })
    const [latest] = await ledger.history(name)
    expect(latest).toMatchObject({ name, outcome: 'ok' })
    const error = await spannerRunLedger({ database, tableName: 'no_runs' })
      .history(name)
      .catch((e: unknown) => e)
    assert.ok(error instanceof LockProviderError)
    expect(error.message).toContain('CREATE TABLE IF NOT EXISTS no_runs (')
  })
})
