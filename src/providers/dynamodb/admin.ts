import { CliError, firstLine, UsageError } from '../../support/admin-errors.ts'
import { type AwsAdminClient, adminRegion, replyDateClock } from '../../support/aws-sdk.ts'
import { importDriver } from '../../support/import-driver.ts'
import { type Check, type StoreAdmin, type StoreOptions, withInitAdvice } from '../../support/store-admin.ts'
import { ownParameters, type StoreUrl } from '../../support/store-url.ts'
import {
  DEFAULT_PARTITION_KEY,
  DEFAULT_TABLE,
  dynamoDBSchema,
  keySchemaProblem,
  type TableDescription,
} from './format.ts'
import { dynamoDBLockInspector } from './inspector.ts'
import { createDynamoDBLockTable, dynamoDBLockProvider } from './provider.ts'
import type { DynamoDBInspectorLib, DynamoDBLib } from './sdk.ts'

type CommandClass = new (input: object) => object
interface SdkModule extends DynamoDBLib, DynamoDBInspectorLib {
  DynamoDBClient: new (config: {
    region?: string
    endpoint?: string
    maxAttempts: number
    requestHandler: { connectionTimeout: number; requestTimeout: number }
  }) => AwsAdminClient
  DeleteItemCommand: CommandClass
}

const SDK = '@aws-sdk/client-dynamodb'
const KEY = DEFAULT_PARTITION_KEY
const TIMEOUT_MS = 10_000

/** `shedlock schema dynamodb`: the AWS CLI command that creates the table. */
export function schema(table: string | undefined): string {
  return dynamoDBSchema(table ?? DEFAULT_TABLE)
}

/**
 * Opens a `dynamodb://[HOST:PORT][?region=R&table=T]` URL with the AWS SDK v3. With HOST:PORT the
 * client talks plain HTTP to that endpoint (DynamoDB Local, dynalite); without, to AWS in the
 * region (`?region=`, else the SDK's usual sources). Credentials come from the SDK's usual
 * sources (AWS_ACCESS_KEY_ID..., profiles, roles), never from the URL. The table (`--table` or
 * `?table=`, default `Shedlock`) has the provider's layout: partition key `_id`, string
 * attributes `lockUntil`, `lockedAt`, `lockedBy`.
 */
export async function open(url: StoreUrl, options: StoreOptions): Promise<StoreAdmin> {
  const parsed = url.url!
  if (parsed.username !== '' || parsed.password !== '') {
    throw new UsageError(
      'dynamodb URLs take no credentials: the AWS SDK reads them from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role',
    )
  }
  if (parsed.pathname !== '' && parsed.pathname !== '/')
    throw new UsageError(`dynamodb URLs take no path, got ${url.redacted}`)
  const parameters = ownParameters(url, ['region', 'table'])
  const inUrl = parameters.get('table')
  if (inUrl !== undefined && options.table !== undefined && inUrl !== options.table) {
    throw new UsageError(
      `the URL names table ${JSON.stringify(inUrl)} and --table ${JSON.stringify(options.table)}; give one`,
    )
  }
  const tableName = options.table ?? inUrl ?? DEFAULT_TABLE
  const endpoint = parsed.hostname === '' ? undefined : `http://${parsed.host}`
  const region = adminRegion(parameters.get('region'), endpoint)
  const sdk = await importDriver<SdkModule>(SDK, SDK, 'dynamodb://')
  const client = new sdk.DynamoDBClient({
    ...(region ? { region } : {}),
    ...(endpoint ? { endpoint } : {}),
    maxAttempts: 2,
    requestHandler: { connectionTimeout: TIMEOUT_MS, requestTimeout: TIMEOUT_MS },
  })
  const send = <T>(command: object): Promise<T> => client.send(command) as Promise<T>
  const describe = async (): Promise<TableDescription | undefined> => {
    try {
      return (
        (await send<{ Table?: TableDescription }>(new sdk.DescribeTableCommand({ TableName: tableName }))).Table ?? {}
      )
    } catch (error) {
      if (nameOf(error) === 'ResourceNotFoundException') return undefined
      throw error
    }
  }
  try {
    await describe()
  } catch (error) {
    client.destroy()
    const credentials =
      nameOf(error) === 'CredentialsProviderError'
        ? ' (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; any values do for a local endpoint)'
        : ''
    throw new CliError(
      `cannot reach DynamoDB at ${url.redacted}: ${firstLine(error)}${credentials}; check the URL, the region and the credentials`,
      {
        cause: error,
      },
    )
  }
  const missing = `table ${tableName} does not exist; create it with: shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${tableName}`}`

  return {
    kind: 'DynamoDB',
    where: `${url.redacted} (table ${tableName})`,
    extensible: true,
    provider: (options) => dynamoDBLockProvider({ client, tableName, lib: sdk, lockedBy: options?.lockedBy }),
    inspector: withInitAdvice(
      dynamoDBLockInspector({ client, tableName, lib: sdk }),
      (error) => nameOf(error) === 'ResourceNotFoundException',
      missing,
    ),
    async init() {
      if (await describe()) return [`table ${tableName} already exists: nothing to do (shedlock doctor checks its key)`]
      await createDynamoDBLockTable(client, tableName, { lib: sdk })
      return [`created table ${tableName} (partition key ${KEY}, on-demand capacity) and waited until it was ACTIVE`]
    },
    ping: async () => {
      await describe()
      return `DynamoDB${endpoint ? ` at ${endpoint}` : ''}`
    },
    async structure(): Promise<Check[]> {
      const table = await describe()
      const label = `table ${tableName}`
      if (!table) return [{ status: 'fail', label, detail: missing.replace(`${label} `, '') }]
      const problem = keySchemaProblem(table, KEY)
      if (problem)
        return [
          { status: 'fail', label, detail: `${problem.replace(/^the table exists with/, 'has')}; use another table` },
        ]
      if (table.TableStatus !== 'ACTIVE')
        return [
          {
            status: 'fail',
            label,
            detail: `is ${table.TableStatus ?? 'in an unknown state'}, not ACTIVE; wait and run doctor again`,
          },
        ]
      return [{ status: 'ok', label, detail: `ACTIVE, partition key ${KEY} (S)` }]
    },
    async remove(name) {
      await send(new sdk.DeleteItemCommand({ TableName: tableName, Key: { [KEY]: { S: name } } }))
    },
    readClock: replyDateClock(client, () => describe()),
    clockDependence:
      'the DynamoDB provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: async () => client.destroy(),
  }
}

function nameOf(error: unknown): unknown {
  return (error as { name?: unknown } | null)?.name
}
