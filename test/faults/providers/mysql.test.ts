import { mysqlLockProvider } from 'shedlock/mysql'
import { afterAll, beforeAll, describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { clockSkew, storeFaults } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD, SECRET_USER } from '../support/servers.ts'
import { sqlHostileOptions } from '../support/sql-options.ts'
import { startOrSkip } from '../support/start.ts'
import { mysqlUnderTest, type StoreUnderTest } from '../support/stores.ts'

const mysql = await startOrSkip('mysql', () => mysqlUnderTest())

describe.skipIf(!mysql)('mysql/mariadb (database time, the default)', () => {
  const sut = () => mysql!
  storeFaults(sut)
  secrets('mysql', SECRET_PASSWORD, async () => ({
    cases: [
      { what: 'wrong password', spec: mysql!.spec({ user: SECRET_USER, password: `${SECRET_PASSWORD}-wrong` }) },
      {
        what: 'right password, missing table',
        spec: mysql!.spec({ user: SECRET_USER, password: SECRET_PASSWORD, table: 'faults_missing' }),
      },
      {
        what: 'closed port',
        spec: mysql!.spec({ user: SECRET_USER, password: SECRET_PASSWORD, port: await freePort() }),
      },
    ],
  }))
})

describe.skipIf(!mysql)('mysql/mariadb (app time)', () => {
  let appTime: StoreUnderTest
  beforeAll(async () => {
    appTime = await mysqlUnderTest({ useDbTime: false, server: mysql!.server })
  })
  afterAll(() => appTime?.close())
  clockSkew(() => appTime)
})

describe('mysql options', () => {
  hostileOptions(
    'mysql',
    sqlHostileOptions((options, client) => mysqlLockProvider({ client, ...options })),
  )
})
