import { postgresLockProvider } from 'shedlock/postgres'
import { afterAll, beforeAll, describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { clockSkew, storeFaults } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD, SECRET_USER } from '../support/servers.ts'
import { sqlHostileOptions } from '../support/sql-options.ts'
import { startOrSkip } from '../support/start.ts'
import { postgresUnderTest, type StoreUnderTest } from '../support/stores.ts'

const postgres = await startOrSkip('postgres', () => postgresUnderTest())

describe.skipIf(!postgres)('postgres (database time, the default)', () => {
  const sut = () => postgres!
  storeFaults(sut)
  secrets('postgres', SECRET_PASSWORD, async () => ({
    cases: [
      { what: 'wrong password', spec: postgres!.spec({ user: SECRET_USER, password: `${SECRET_PASSWORD}-wrong` }) },
      {
        what: 'right password, missing table',
        spec: postgres!.spec({ user: SECRET_USER, password: SECRET_PASSWORD, table: 'faults_missing' }),
      },
      {
        what: 'closed port',
        spec: postgres!.spec({ user: SECRET_USER, password: SECRET_PASSWORD, port: await freePort() }),
      },
    ],
  }))
})

describe.skipIf(!postgres)('postgres (app time)', () => {
  let appTime: StoreUnderTest
  beforeAll(async () => {
    appTime = await postgresUnderTest({ useDbTime: false, server: postgres!.server })
  })
  afterAll(() => appTime?.close())
  clockSkew(() => appTime)
})

describe('postgres options', () => {
  hostileOptions(
    'postgres',
    sqlHostileOptions((options, client) => postgresLockProvider({ client, ...options })),
  )
})
