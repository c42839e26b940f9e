import { dynamoDBLockProvider } from 'shedlock/dynamodb'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { storeFaults } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD } from '../support/servers.ts'
import { startOrSkip } from '../support/start.ts'
import { dynamodbUnderTest } from '../support/stores.ts'

// DynamoDB is dynalite in a process of ours, tables on disk: a restart of it stands for an
// outage of the endpoint (DynamoDB itself keeps its items).
const dynamodb = await startOrSkip('dynamodb', () => dynamodbUnderTest())

describe.skipIf(!dynamodb)('dynamodb (dynalite)', () => {
  const sut = () => dynamodb!
  storeFaults(sut)
  // The secret access key is the password here.
  secrets('dynamodb', SECRET_PASSWORD, async () => ({
    cases: [
      {
        what: 'secret key, missing table',
        spec: dynamodb!.spec({ password: SECRET_PASSWORD, table: 'faults_missing' }),
      },
      { what: 'secret key, closed port', spec: dynamodb!.spec({ password: SECRET_PASSWORD, port: await freePort() }) },
    ],
  }))
})

const TABLE = /^[A-Za-z0-9_.-]{3,255}$|^arn:[a-z-]+:dynamodb:[a-z0-9-]*:\d*:table\/[A-Za-z0-9_.-]{3,255}$/

describe('dynamodb options', () => {
  hostileOptions('dynamodb', [
    {
      option: 'tableName',
      build: (tableName, client) => dynamoDBLockProvider({ client, tableName }),
      safe: (v) => TABLE.test(v),
    },
    // Used only as a key of the Key map, never inside an expression: any 1-255 byte name is safe.
    {
      option: 'partitionKey',
      build: (partitionKey, client) => dynamoDBLockProvider({ client, tableName: 'Shedlock', partitionKey }),
      safe: (v) => v !== '' && Buffer.byteLength(v) <= 255,
    },
  ])
})
