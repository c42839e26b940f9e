import { afterAll, describe } from 'vitest'
import { spannerLockProvider } from 'shedlock/spanner'
import { GOOGLE_TEST_PROJECT, SPANNER_TEST_INSTANCE } from '../../helpers/google-emulators.ts'
import { emulatorSpanner, newDatabase } from '../../providers/spanner/emulator.ts'
import { badLockNames } from '../support/bad-input.ts'
import { clockSkew, taskOutlivesLock } from '../support/fault-groups.ts'
import type { StoreUnderTest } from '../support/stores.ts'

// Spanner is Google's emulator, shared with the provider tests (scripts/services.sh starts it): it
// runs in memory and cannot be restarted or cut off without losing every test's state, so only
// the groups that run inside one process apply (clock skew, a task outliving its lock, bad input).
// Kills, restarts and network cuts would test the emulator, not Spanner. A database of its own.
const database = emulatorSpanner && (await newDatabase(emulatorSpanner))

describe.skipIf(!database)('spanner (emulator)', () => {
  const db = database!
  afterAll(async () => {
    await db.delete().catch(() => undefined)
    emulatorSpanner!.close()
  })
  const row = async (lock: string): Promise<Record<string, unknown> | undefined> => {
    const [rows] = await db.run({
      sql: 'SELECT name, UNIX_MILLIS(lock_until) AS until, UNIX_MILLIS(CURRENT_TIMESTAMP()) AS now, locked_by FROM shedlock WHERE name = @name',
      params: { name: lock },
      json: true,
    })
    return rows[0] as Record<string, unknown> | undefined
  }
  const sut: StoreUnderTest = {
    label: 'spanner (emulator)',
    // The fault groups used here read only the store's facts, not its name.
    store: 'mongodb',
    // Expiry on Spanner's CURRENT_TIMESTAMP() (useDbTime, the default).
    facts: {
      extensible: true,
      expiry: 'database',
      earlyMs: 0,
      lateMs: 0,
      minLockMs: 0,
      keepsLocksAcrossRestart: undefined,
    },
    server: undefined,
    spec: () => {
      throw new Error('spanner has no worker spec')
    },
    node: async (options = {}) =>
      spannerLockProvider(
        options.clock ? { database: db, clock: options.clock, timeout: '30s' } : { database: db, timeout: '30s' },
      ),
    isHeld: async (lock) => {
      const found = await row(lock)
      return found !== undefined && Number(found.until) > Number(found.now)
    },
    record: async (lock) => {
      const found = await row(lock)
      return found ? JSON.stringify({ ...found, now: undefined }) : undefined
    },
    remainingMs: async (lock) => {
      const found = await row(lock)
      return found ? Math.max(0, Number(found.until) - Number(found.now)) : undefined
    },
    keys: async () => {
      const [rows] = await db.run({ sql: 'SELECT name FROM shedlock', json: true })
      return rows.map((r) => String((r as { name: string }).name))
    },
    keyOf: (name) => name,
    cliArgs: () => [
      '--url',
      `spanner://${GOOGLE_TEST_PROJECT}/${SPANNER_TEST_INSTANCE}/${db.formattedName_.split('/').at(-1)}`,
    ],
    close: async () => {},
  }
  clockSkew(() => sut)
  taskOutlivesLock(() => sut)
  badLockNames(() => sut)
})
