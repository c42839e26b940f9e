import { sqliteLockProvider } from 'shedlock/sqlite'
import { afterAll, beforeAll, describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { clockSkew, storeFaults } from '../support/fault-groups.ts'
import { sqlHostileOptions } from '../support/sql-options.ts'
import { startOrSkip } from '../support/start.ts'
import { openSqlite, type SqliteConnection } from '../support/store-clients.mjs'
import { type StoreUnderTest, sqliteUnderTest } from '../support/stores.ts'

// SQLite is a file: no server to kill or cut off, no password. Its outage is another process
// holding the write lock longer than the busy timeout.
const sqlite = await startOrSkip('sqlite', () => sqliteUnderTest())

describe.skipIf(!sqlite)(`sqlite (database time, the default; ${sqlite?.driver})`, () => {
  const sut = () => sqlite!
  storeFaults(sut, {
    network: false,
    outage: () => {
      let blocker: SqliteConnection | undefined
      return {
        what: 'another connection holding the write lock past the busy timeout (300 ms), then letting go',
        spec: { busyTimeoutMs: 300 },
        down: async () => {
          blocker = (await openSqlite(sqlite!.file, 0)).database
          blocker.exec('BEGIN EXCLUSIVE')
        },
        up: async () => {
          blocker?.exec('ROLLBACK')
          blocker?.close()
        },
      }
    },
  })
})

describe.skipIf(!sqlite)('sqlite (app time)', () => {
  let appTime: StoreUnderTest
  beforeAll(async () => {
    appTime = await sqliteUnderTest({ useDbTime: false })
  })
  afterAll(() => appTime?.close())
  clockSkew(() => appTime)
})

describe('sqlite options', () => {
  hostileOptions(
    'sqlite',
    sqlHostileOptions((options, database) => sqliteLockProvider({ database, ...options })),
  )
})
